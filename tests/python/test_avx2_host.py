"""tools/avx2_host.sh: a command it runs sees an AVX2-only x86 CPU, at native speed.

Where the kernel and CPU offer CPUID faulting, a process under the tool must see no AVX-512
or AVX-VNNI in cpuid, octet must take its `avx2` path, the host line must say the cpuid is
masked, and ONNX Runtime must take the kernels it takes on an AVX2 CPU: its u8 x s8
product of full-range values then saturates (most outputs differ from the int64 product,
as on the 2026-12-01 Zen 3), which a VNNI kernel never does. Elsewhere the test skips with
the reason.
"""

import json
import os
import platform
import subprocess
import sys
from pathlib import Path

import pytest

import ort_exact

ROOT = Path(__file__).resolve().parents[2]

PROBE = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
import numpy as np, onnxruntime as ort, octet
from octet import measure
from onnx import TensorProto, helper, numpy_helper
import ort_exact

rng = np.random.default_rng(17)
a = rng.integers(0, 256, (17, 257)).astype(np.uint8)
b = rng.integers(-128, 128, (257, 31)).astype(np.int8)
graph = helper.make_graph(
    [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "g",
    [helper.make_tensor_value_info("a", TensorProto.UINT8, [17, 257])],
    [helper.make_tensor_value_info("y", TensorProto.INT32, [17, 31])],
    [numpy_helper.from_array(b, "b")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)
options = ort.SessionOptions()
options.intra_op_num_threads = 1
y = ort.InferenceSession(model.SerializeToString(), options,
                         providers=["CPUExecutionProvider"]).run(None, {"a": a})[0]
exact = a.astype(np.int64) @ b.astype(np.int64)
print(json.dumps({"isa": ort_exact.cpu_features()["isa"], "octet": octet.active_isa(),
                  "flags": measure.isa_flags(), "host": measure.host_line(octet),
                  "ort_wrong": int((y != exact).sum()), "outputs": int(exact.size)}))
"""

NOT_ON_AN_AVX2_CPU = {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx_vnni",
                      "avx_vnni_int8"}


def test_a_command_under_the_tool_sees_an_avx2_only_cpu():
    if platform.machine() != "x86_64":
        pytest.skip("tools/avx2_host.sh is for x86-64 hosts")
    if "avx2" not in ort_exact.cpu_features()["isa"]:
        pytest.skip("this CPU has no AVX2 to present")
    result = subprocess.run(
        ["bash", str(ROOT / "tools" / "avx2_host.sh"), sys.executable, "-c", PROBE,
         str(ROOT / "tools")], capture_output=True, text=True, timeout=300)
    if result.returncode == 3 and "no CPUID faulting" in result.stderr:
        pytest.skip("this kernel or CPU has no CPUID faulting: " + result.stderr.strip())
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert "avx2" in seen["isa"] and not NOT_ON_AN_AVX2_CPU & set(seen["isa"]), seen
    assert seen["octet"] == "avx2"
    assert seen["flags"] == ["avx2"]
    assert "cpuid masked to AVX2 by tools/avx2_host.sh" in seen["host"]
    assert seen["ort_wrong"] > seen["outputs"] // 2, (
        "ONNX Runtime's u8 x s8 product is exact under the tool: it did not take its AVX2 "
        "kernel", seen)


def test_without_the_tool_the_host_line_says_nothing_of_a_mask():
    from octet import measure
    if "cpuid_avx2.so" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("this pytest runs under tools/avx2_host.sh")
    assert not measure.cpuid_masked_to_avx2()
    assert "cpuid masked" not in measure.host_line()
