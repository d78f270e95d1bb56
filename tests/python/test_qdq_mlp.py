"""A typical QDQ MLP from onnxruntime.quantization.quantize_static (issue 4): every
MatMul group is claimed, the int8 output of one fused node flows straight into the next
(no DequantizeLinear -> float -> QuantizeLinear in between), and the result equals
ORT_ENABLE_ALL bit for bit (s8 with session.qdqisint8allowed=1)."""

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

from test_qdq_fusion import ALL, DISABLED, run_octet, run_ort


class Reader(CalibrationDataReader):
    def __init__(self, batches):
        self.batches = iter(batches)

    def get_next(self):
        return next(self.batches, None)


def float_mlp(rng):
    w1 = rng.normal(0, 0.2, (64, 96)).astype(np.float32)
    w2 = rng.normal(0, 0.2, (96, 32)).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]),
             helper.make_node("Relu", ["h"], ["hr"]),
             helper.make_node("MatMul", ["hr", "w2"], ["y"])]
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [16, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [16, 32])],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("activation", [QuantType.QUInt8, QuantType.QInt8], ids=["u8", "s8"])
def test_quantize_static_mlp(activation, tmp_path, capfd, monkeypatch):
    monkeypatch.setenv("OCTET_QDQ_DEBUG", "1")
    rng = np.random.default_rng(5)
    float_path, q_path = tmp_path / "mlp.onnx", tmp_path / "mlp.qdq.onnx"
    onnx.save(float_mlp(rng), float_path)
    calib = [{"x": rng.normal(0, 1, (16, 64)).astype(np.float32)} for _ in range(4)]
    quantize_static(str(float_path), str(q_path), Reader(calib), quant_format=QuantFormat.QDQ,
                    activation_type=activation, weight_type=QuantType.QInt8)
    model = onnx.load(q_path)
    ops = [n.op_type for n in model.graph.node]
    assert ops.count("MatMul") == 2 and "Relu" not in ops, ops  # the quantizer folds Relu
    feeds = {"x": rng.normal(0, 1, (16, 64)).astype(np.float32)}
    (ours,), report = run_octet(model.SerializeToString(), feeds, capfd)
    assert re.search(r"qdq_groups=2 claimed=2", report), report
    assert "qdq_refused" not in report, report
    fused = run_ort(model.SerializeToString(), feeds, ALL, activation == QuantType.QInt8)[0]
    assert np.array_equal(ours, fused)
    unfused = run_ort(model.SerializeToString(), feeds, DISABLED)[0]
    np.testing.assert_allclose(ours, unfused, atol=2 * np.abs(unfused).max() / 100)
