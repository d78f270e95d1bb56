"""DQ -> MatMul -> Q whose B is computed at run time (attention's K^T and V in a QDQ
model) becomes ai.onnx QLinearMatMul (rewrite/qdq_matmul.cc, ClaimRuntimeWeight).

ONNX Runtime 1.31.1 makes the same integer node of the group at ORT_ENABLE_ALL (for int8
activations only with session.qdqisint8allowed=1), so octet must equal it bit for bit
there; against ORT_DISABLE_ALL (float product, then Q) it may differ by one step where the
float product lands next to a rounding boundary.
"""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from test_qdq_fusion import ALL, DISABLED, TYPE_CODE, random_q, run_ort

import octet


def attention_like(a_type, b_type, batch=(2, 3), m=33, k=24, n=40):
    a_type, b_type = np.dtype(a_type), np.dtype(b_type)
    inits = [numpy_helper.from_array(np.array(0.03, np.float32), "sa"),
             numpy_helper.from_array(np.array(5 if a_type == np.int8 else 131, a_type), "za"),
             numpy_helper.from_array(np.array(0.02, np.float32), "sb"),
             numpy_helper.from_array(np.array(-7 if b_type == np.int8 else 120, b_type), "zb"),
             numpy_helper.from_array(np.array(0.03 * 0.02 * np.sqrt(k) * 20, np.float32), "sy"),
             numpy_helper.from_array(np.array(-3 if a_type == np.int8 else 128, a_type), "zy")]
    nodes = [helper.make_node("DequantizeLinear", ["a", "sa", "za"], ["ad"]),
             helper.make_node("DequantizeLinear", ["b", "sb", "zb"], ["bd"]),
             helper.make_node("MatMul", ["ad", "bd"], ["p"], name="scores"),
             helper.make_node("QuantizeLinear", ["p", "sy", "zy"], ["y"])]
    graph = helper.make_graph(
        nodes, "attention",
        [helper.make_tensor_value_info("a", TYPE_CODE[a_type], [*batch, m, k]),
         helper.make_tensor_value_info("b", TYPE_CODE[b_type], [*batch, k, n])],
        [helper.make_tensor_value_info("y", TYPE_CODE[a_type], None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    rng = np.random.default_rng(8)
    feeds = {"a": random_q(rng, a_type, (*batch, m, k)), "b": random_q(rng, b_type, (*batch, k, n))}
    return model.SerializeToString(), feeds


@pytest.mark.parametrize("a_type,b_type", [(np.uint8, np.uint8), (np.uint8, np.int8),
                                           (np.int8, np.int8)], ids=["u8u8", "u8s8", "s8s8"])
@pytest.mark.parametrize("threads", [1, 2])
def test_runtime_weight_group_equals_ort_integer_node(a_type, b_type, threads, capfd,
                                                      monkeypatch):
    monkeypatch.delenv("OCTET_QDQ", raising=False)
    monkeypatch.setenv("OCTET_QDQ_DEBUG", "1")
    model, feeds = attention_like(a_type, b_type)
    capfd.readouterr()
    ours = octet.InferenceSession(model, threads=threads).run(None, feeds)[0]
    assert "claimed=1" in capfd.readouterr().err
    fused = run_ort(model, feeds, ALL, int8_allowed=True)[0]
    np.testing.assert_array_equal(ours, fused)
    unfused = run_ort(model, feeds, DISABLED)[0]
    diff = np.abs(ours.astype(np.int32) - unfused.astype(np.int32))
    assert diff.max() <= 1 and (diff > 0).mean() < 0.05
