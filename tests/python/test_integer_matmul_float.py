"""MatMulInteger -> Cast -> Mul [-> Add] folded into MatMulIntegerToFloat
(rewrite/integer_matmul_float.h), against ONNX Runtime 1.31.1.

The fold keeps the float operations of the unfused graph, so octet must equal ONNX
Runtime bit for bit at ORT_DISABLE_ALL (the graph as written) and at ORT_ENABLE_ALL
(which makes the same fusion); and it must equal octet with the fold off (OCTET_QDQ=0).
Models: quantize_dynamic's output (per-tensor and per-channel weights, with bias), and
hand-made forms: the scale first in the Mul, no bias, a bias that broadcasts to a higher
rank (left unfolded), a per-row A zero point (refused).
"""

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import QuantType, quantize_dynamic

import octet
import ort_exact
from octet_cli import inspect_model

K, N = 48, 40


def float_model(tmp_path, with_bias=True):
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((K, N)).astype(np.float32) * 0.2, "w")
    b = numpy_helper.from_array(rng.standard_normal(N).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"])]
    if with_bias:
        nodes.append(helper.make_node("Add", ["p", "b"], ["y"]))
    else:
        nodes.append(helper.make_node("Identity", ["p"], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         ["batch", 7, K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [w, b])
    path = tmp_path / "float.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                ir_version=10), path)
    return path


def quantized(tmp_path, per_channel, with_bias=True):
    out = tmp_path / ("dyn_%d_%d.onnx" % (per_channel, with_bias))
    quantize_dynamic(str(float_model(tmp_path, with_bias)), str(out), per_channel=per_channel,
                     weight_type=QuantType.QInt8)
    return out.read_bytes()


def hand_made(scale_first=False, bias_shape=(N,), a_zero_per_row=False):
    """DynamicQuantizeLinear -> MatMulInteger -> Cast -> Mul(scale product) -> Add(bias)."""
    rng = np.random.default_rng(5)
    inits = [numpy_helper.from_array(rng.integers(-128, 128, (K, N)).astype(np.int8), "w"),
             numpy_helper.from_array(np.array(3, np.int8), "wz"),
             numpy_helper.from_array(np.array(0.0123, np.float32), "ws"),
             numpy_helper.from_array(rng.standard_normal(bias_shape).astype(np.float32), "b"),
             numpy_helper.from_array(np.arange(7, dtype=np.uint8) + 100, "xz_rows")]
    zero = "xz_rows" if a_zero_per_row else "xz"
    nodes = [helper.make_node("DynamicQuantizeLinear", ["x"], ["xq", "xs", "xz"]),
             helper.make_node("MatMulInteger", ["xq", "w", zero, "wz"], ["acc"], name="mm"),
             helper.make_node("Cast", ["acc"], ["accf"], to=TensorProto.FLOAT),
             helper.make_node("Mul", ["xs", "ws"], ["s"]),
             helper.make_node("Mul", ["s", "accf"] if scale_first else ["accf", "s"], ["scaled"]),
             helper.make_node("Add", ["scaled", "b"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [7, K])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=10)
    return model.SerializeToString()


def run_ort(model, x, level):
    """ORT's output; its exact u8 x u8 form where its u8 x s8 kernel saturates (no VNNI)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    model, feeds = ort_exact.for_ort(model, {"x": x})
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]


def run_octet(model, x, monkeypatch, capfd, fold=True):
    if fold:
        monkeypatch.delenv("OCTET_QDQ", raising=False)
    else:
        monkeypatch.setenv("OCTET_QDQ", "0")
    capfd.readouterr()
    y = octet.InferenceSession(model).run(None, {"x": x})[0]
    return y, capfd.readouterr().err



def check(model, x_shape, monkeypatch, capfd, tmp_path, expect_folds):
    x = (np.random.default_rng(11).standard_normal(x_shape) * 2).astype(np.float32)
    ours, _ = run_octet(model, x, monkeypatch, capfd)
    plain, _ = run_octet(model, x, monkeypatch, capfd, fold=False)
    np.testing.assert_array_equal(ours, plain)
    for level in (ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
                  ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
        np.testing.assert_array_equal(ours, run_ort(model, x, level))
    assert len(re.findall(r"-> com\.microsoft\.MatMulIntegerToFloat", inspect_model(model, tmp_path))) \
        == expect_folds


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
@pytest.mark.parametrize("with_bias", [True, False], ids=["bias", "no_bias"])
def test_quantize_dynamic_output(per_channel, with_bias, tmp_path, monkeypatch, capfd):
    check(quantized(tmp_path, per_channel, with_bias), (3, 7, K), monkeypatch, capfd, tmp_path, 1)


@pytest.mark.parametrize("kwargs", [{}, {"scale_first": True}, {"bias_shape": (1, N)},
                                    {"a_zero_per_row": True}],
                         ids=["plain", "scale_first", "bias_rank2", "a_zero_per_row"])
def test_hand_made_forms(kwargs, monkeypatch, capfd, tmp_path):
    model = hand_made(**kwargs)
    if kwargs.get("a_zero_per_row"):
        # ONNX Runtime's CPU MatMulInteger refuses a per-row a_zero_point; octet runs it
        # unfused (checked against the fold-off graph only).
        monkeypatch.setenv("OCTET_QDQ_DEBUG", "1")
        x = np.random.default_rng(2).standard_normal((7, K)).astype(np.float32)
        ours, report = run_octet(model, x, monkeypatch, capfd)
        plain, _ = run_octet(model, x, monkeypatch, capfd, fold=False)
        np.testing.assert_array_equal(ours, plain)
        assert "why=a_zero_point_not_scalar op=MatMulInteger" in report, report
        return
    check(model, (7, K), monkeypatch, capfd, tmp_path, 1)


def test_inspect_names_what_was_folded(tmp_path):
    assert re.search(r"fused\s+MatMulInteger 'mm' -> com\.microsoft\.MatMulIntegerToFloat "
                     r"\(Cast, Mul, Add folded\)", inspect_model(hand_made(), tmp_path))
    assert re.search(r"\(Cast, Mul folded\)", inspect_model(hand_made(bias_shape=(1, N)), tmp_path))
