"""The `octet` command line (installed console script -> C++ binary)."""

import io
import os
import subprocess
import sys
import zipfile

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

OCTET = os.path.join(os.path.dirname(sys.executable), "octet")
WEIGHT = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)


def run(*args):
    return subprocess.run([OCTET, *map(str, args)], capture_output=True, text=True, timeout=60)


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    """out = Relu(x @ W), neg = x * -1 (Mul by a constant)."""
    nodes = [helper.make_node("MatMul", ["x", "W"], ["mm"]),
             helper.make_node("Relu", ["mm"], ["out"]),
             helper.make_node("Mul", ["x", "minus_one"], ["neg"])]
    graph = helper.make_graph(
        nodes, "cli", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("neg", TensorProto.FLOAT, ["batch", 3])],
        [numpy_helper.from_array(WEIGHT, "W"),
         numpy_helper.from_array(np.array(-1, np.float32), "minus_one")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    path = tmp_path_factory.mktemp("cli") / "model.onnx"
    onnx.save(model, str(path))
    return path


X = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5


def expected_out(x):
    return np.maximum(x.astype(np.float64) @ WEIGHT, 0)


def assert_one_line_error(result, *needles, code=1):
    assert result.returncode == code, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("octet: error: "), result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_help_is_true():
    main = run("--help")
    assert main.returncode == 0
    for command in ["run", "inspect", "list-ops"]:
        assert f"\n  {command} " in main.stdout
        assert run(command, "--help").returncode == 0
    sub = run("run", "--help")
    assert sub.returncode == 0
    for option in ["--input NAME=FILE.npy", "--output", "--threads"]:
        assert option in sub.stdout


def test_run_npy_to_npz(model_path, tmp_path):
    np.save(tmp_path / "x.npy", X)
    result = run("run", model_path, "--input", f"x={tmp_path / 'x.npy'}", "--output",
                 tmp_path / "out.npz", "--threads", 2)
    assert result.returncode == 0, result.stderr
    assert "out: float [2,4]" in result.stdout and "neg: float [2,3]" in result.stdout
    with np.load(tmp_path / "out.npz") as saved:
        assert sorted(saved.files) == ["neg", "out"]
        np.testing.assert_allclose(saved["out"], expected_out(X), rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(saved["neg"], -X)
        assert saved["out"].dtype == np.float32


def test_run_npz_input_fortran_order_and_npy_output(model_path, tmp_path):
    np.savez(tmp_path / "in.npz", x=np.asfortranarray(X))
    result = run("run", model_path, "--input", tmp_path / "in.npz", "--output",
                 tmp_path / "out.npz")
    assert result.returncode == 0, result.stderr
    with np.load(tmp_path / "out.npz") as saved:
        np.testing.assert_array_equal(saved["neg"], -X)
        np.testing.assert_allclose(saved["out"], expected_out(X), rtol=1e-6, atol=1e-6)
    np.save(tmp_path / "xf.npy", np.asfortranarray(X))
    result = run("run", model_path, "--input", f"x={tmp_path / 'xf.npy'}", "--output",
                 tmp_path / "one.npy")
    # Two outputs do not fit one .npy.
    assert_one_line_error(result, "2 outputs", ".npz")


def test_bad_paths_and_specs(model_path, tmp_path):
    np.save(tmp_path / "x.npy", X)
    assert_one_line_error(run("run", tmp_path / "missing.onnx", "--input", f"x={tmp_path}/x.npy"),
                          "missing.onnx")
    assert_one_line_error(run("run", model_path, "--input", f"x={tmp_path}/nope.npy"), "nope.npy")
    assert_one_line_error(run("run", model_path, "--input", "x"), "NAME=FILE.npy", code=2)
    assert_one_line_error(run("run", model_path, "--input", f"y={tmp_path}/x.npy"),
                          "unknown input name 'y'")
    assert_one_line_error(run("run", model_path, "--threads", "two"), "--threads", code=2)
    assert_one_line_error(run("run"), "MODEL", code=2)
    assert_one_line_error(run("frobnicate"), "unknown command", code=2)
    assert_one_line_error(run("run", model_path), "input 'x'", "not fed")


def test_bad_input_files(model_path, tmp_path):
    np.save(tmp_path / "x64.npy", X.astype(np.float64))
    assert_one_line_error(run("run", model_path, "--input", f"x={tmp_path}/x64.npy"),
                          "input 'x'", "float", "double")
    (tmp_path / "junk.npy").write_bytes(b"not an npy file at all")
    assert_one_line_error(run("run", model_path, "--input", f"x={tmp_path}/junk.npy"), "NPY")
    buffer = io.BytesIO()
    np.save(buffer, X)
    (tmp_path / "short.npy").write_bytes(buffer.getvalue()[:-5])
    assert_one_line_error(run("run", model_path, "--input", f"x={tmp_path}/short.npy"),
                          "truncated")
    np.savez_compressed(tmp_path / "packed.npz", x=X)
    assert_one_line_error(run("run", model_path, "--input", tmp_path / "packed.npz"),
                          "compressed", "np.savez")
    with zipfile.ZipFile(tmp_path / "packed.npz") as z:
        assert z.infolist()[0].compress_type == zipfile.ZIP_DEFLATED


def test_list_ops_matches_docs():
    """docs/operators.md names every operator a model may use (list-ops is the registry)."""
    result = run("list-ops")
    assert result.returncode == 0, result.stderr
    rows = [line.split() for line in result.stdout.splitlines()]
    assert rows and all(len(r) == 3 for r in rows), result.stdout
    assert any(r[:2] == ["ai.onnx", "QuantizeLinear"] for r in rows)
    docs = open(os.path.join(os.path.dirname(__file__), "..", "..", "docs", "operators.md")).read()
    missing = sorted({op for domain, op, _ in rows if domain != "octet" and op not in docs})
    assert not missing, f"registered but not in docs/operators.md: {missing}"


def test_inspect_lists_fused_and_refused_groups(tmp_path):
    """A QDQ MatMul group with a per-tensor weight is fused; a K-axis activation scale is not."""
    rng = np.random.default_rng(5)
    w = rng.integers(-127, 128, (8, 6), dtype=np.int8)
    nodes = [helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xf"]),
             helper.make_node("DequantizeLinear", ["w", "sw"], ["wf"]),
             helper.make_node("MatMul", ["xf", "wf"], ["yf"]),
             helper.make_node("QuantizeLinear", ["yf", "sy", "zy"], ["y"])]
    graph = helper.make_graph(
        nodes, "inspect", [helper.make_tensor_value_info("x", TensorProto.INT8, [4, 8])],
        [helper.make_tensor_value_info("y", TensorProto.INT8, [4, 6])],
        [numpy_helper.from_array(w, "w"),
         numpy_helper.from_array(np.array(0.02, np.float32), "sx"),
         numpy_helper.from_array(np.array(3, np.int8), "zx"),
         numpy_helper.from_array(np.array(0.01, np.float32), "sw"),
         numpy_helper.from_array(np.array(0.1, np.float32), "sy"),
         numpy_helper.from_array(np.array(-2, np.int8), "zy")])
    path = tmp_path / "qdq.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                                ir_version=10), str(path))
    result = run("inspect", path)
    assert result.returncode == 0, result.stderr
    assert "fused   MatMul" in result.stdout and "qdq_groups=1 claimed=1" in result.stdout
    off = subprocess.run([OCTET, "inspect", str(path)], capture_output=True, text=True,
                         timeout=60, env=dict(os.environ, OCTET_QDQ="0"))
    assert off.returncode == 0 and "OCTET_QDQ=0" in off.stdout
