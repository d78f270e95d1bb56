"""octet's introspection API (runtime/introspect.h), shared by Python and the CLI:
the instruction-set paths, the kernel list and what the rewrites do with a model."""

import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import octet

OCTET = os.path.join(os.path.dirname(sys.executable), "octet")
ISA_NAMES = {"scalar", "avx2", "avxvnni", "avx512", "avx512vnni", "neondot"}


def python_with_isa(isa, code):
    env = dict(os.environ, OCTET_ISA=isa)
    return subprocess.run([sys.executable, "-c", "import octet\n" + code], env=env,
                          capture_output=True, text=True, timeout=60)


def test_supported_isas_start_with_scalar_and_hold_the_active_one():
    isas = octet.supported_isas()
    assert isas[0] == "scalar"
    assert set(isas) <= ISA_NAMES and len(set(isas)) == len(isas)
    # Without OCTET_ISA the kernels take the best path, the last one listed.
    out = subprocess.run([sys.executable, "-c", "import octet; print(octet.active_isa())"],
                         env={k: v for k, v in os.environ.items() if k != "OCTET_ISA"},
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == isas[-1]


@pytest.mark.parametrize("isa", sorted(ISA_NAMES))
def test_octet_isa_forces_a_supported_path_and_refuses_others(isa):
    out = python_with_isa(isa, "print(octet.active_isa())")
    if isa in octet.supported_isas():
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == isa
    else:
        assert out.returncode != 0
        assert "OctetError" in out.stderr and "OCTET_ISA=" + isa in out.stderr


def test_an_unknown_isa_name_is_an_octet_error():
    out = python_with_isa("avx9000", "print(octet.active_isa())")
    assert out.returncode != 0
    assert "OctetError" in out.stderr and "is not one of" in out.stderr


def test_list_ops_matches_the_cli():
    ops = octet.list_ops()
    assert ("ai.onnx", "QuantizeLinear") in {(d, op) for d, op, _, _ in ops}
    assert all(since >= 1 and (end is None or end >= since) for _, _, since, end in ops)
    lines = {"%s %s %d%s" % (d, op, since, "+" if end is None else "-%d" % end)
             for d, op, since, end in ops}
    cli = subprocess.run([OCTET, "list-ops"], capture_output=True, text=True, timeout=60)
    assert cli.returncode == 0, cli.stderr
    assert set(cli.stdout.splitlines()) == lines


def test_inspect_matches_the_cli(tmp_path):
    """A DQ -> MatMul -> Q group with a per-tensor int8 weight is fused; the listing is the
    CLI's, line for line."""
    w = np.arange(-6, 6, dtype=np.int8).reshape(3, 4)
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w", "ws"], ["wd"]),
        helper.make_node("MatMul", ["xd", "wd"], ["mm"], name="the_matmul"),
        helper.make_node("QuantizeLinear", ["mm", "ys", "yz"], ["y"]),
    ]
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.array(0.5, np.float32), "xs"),
             numpy_helper.from_array(np.array(3, np.uint8), "xz"),
             numpy_helper.from_array(np.array(0.25, np.float32), "ws"),
             numpy_helper.from_array(np.array(2.0, np.float32), "ys"),
             numpy_helper.from_array(np.array(128, np.uint8), "yz")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.UINT8,
                                                                         [2, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.UINT8, [2, 4])],
                              inits)
    path = tmp_path / "group.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)]), str(path))
    listing = octet.inspect(path)
    assert "fused   MatMul 'the_matmul'" in listing
    assert listing.strip().endswith("qdq_groups=1 claimed=1")
    env = {k: v for k, v in os.environ.items() if k != "OCTET_QDQ"}
    cli = subprocess.run([OCTET, "inspect", str(path)], capture_output=True, text=True,
                         timeout=60, env=env)
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout == listing


def test_inspect_of_a_missing_file_is_an_octet_error(tmp_path):
    with pytest.raises(octet.OctetError, match="does not exist"):
        octet.inspect(tmp_path / "missing.onnx")
