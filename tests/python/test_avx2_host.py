"""tools/avx2_host.sh: a command it runs sees an AVX2-only x86 CPU, at native speed.

Where the kernel and CPU offer CPUID faulting, a process under the tool must see no AVX-512
or AVX-VNNI in cpuid, octet must take its `avx2` path, the host line must name what cpuid
hides, and ONNX Runtime must take the kernels it takes on an AVX2 CPU: its u8 x s8 product
of full-range values then saturates (test_ort_exact's check, run under the tool), which a
VNNI kernel never does. Elsewhere the test skips with the reason.
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

# Under the tool: what cpuid reports, octet's path, the host line, then test_ort_exact's
# own check that ONNX Runtime's u8 x s8 product saturates where cpuid shows no VNNI.
PROBE = r"""
import json, sys
sys.path[:0] = sys.argv[1:3]
import octet, ort_exact, test_ort_exact
from octet import measure
assert not ort_exact.ort_u8s8_exact()
test_ort_exact.test_u8s8_kernel_is_exact_only_with_vnni()
print(json.dumps({"isa": ort_exact.cpu_features()["isa"], "octet": octet.active_isa(),
                  "flags": measure.isa_flags(), "host": measure.host_line(octet)}))
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
         str(ROOT / "tools"), str(ROOT / "tests" / "python")], capture_output=True, text=True,
        timeout=300)
    if result.returncode == 3 and "no CPUID faulting" in result.stderr:
        pytest.skip("this kernel or CPU has no CPUID faulting: " + result.stderr.strip())
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert "avx2" in seen["isa"] and not NOT_ON_AN_AVX2_CPU & set(seen["isa"]), seen
    assert seen["octet"] == "avx2"
    assert seen["flags"] == ["avx2"]
    from octet import measure
    hidden = [f for f in measure.isa_flags() if f != "avx2"]  # this process: unmasked
    if hidden:
        assert "(cpuid here hides %s, which /proc/cpuinfo lists)" % " ".join(hidden) in \
            seen["host"], seen


def test_cpuid_and_proc_cpuinfo_agree_without_the_tool():
    """On a plain host the flags read from cpuid are /proc/cpuinfo's, and the host line says
    nothing is hidden."""
    from octet import measure
    if "cpuid_avx2.so" in os.environ.get("LD_PRELOAD", ""):
        pytest.skip("this pytest runs under tools/avx2_host.sh")
    if measure.cpu_features()["source"] != "cpuid":
        pytest.skip("cpuid cannot be read in this process")
    assert measure.isa_flags() == [f for f in measure._FLAGS
                                   if f in measure._cpuinfo_features()["isa"]]
    assert measure.flags_cpuid_hides() == []
    assert "hides" not in measure.host_line()
