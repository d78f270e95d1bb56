"""DequantizeLinear -> data-movement op -> QuantizeLinear with equal per-tensor parameters
runs on the 8-bit data (issue 4). Bit-exact against ORT_ENABLE_ALL and ORT_DISABLE_ALL;
unequal parameters are refused (`movement_params_differ`) and still correct."""

import re

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from test_qdq_fusion import ALL, DISABLED, TYPE_CODE, random_q, run_octet, run_ort

SHAPE = [2, 3, 4, 5]
I64 = lambda name, v: numpy_helper.from_array(np.array(v, np.int64), name)  # noqa: E731

CASES = {
    "Reshape": ({}, [I64("shape", [6, -1, 0])], ["shape"]),
    "Transpose": ({"perm": [2, 0, 3, 1]}, [], []),
    "Squeeze": ({}, [I64("axes", [0])], ["axes"]),
    "Unsqueeze": ({}, [I64("axes", [0, -1])], ["axes"]),
    "Flatten": ({"axis": 2}, [], []),
    "Gather": ({"axis": 2}, [I64("idx", [[3, 0], [-1, 1]])], ["idx"]),
    "Slice": ({}, [I64("st", [1, -1, 0]), I64("en", [3, -5, 5]), I64("ax", [1, 2, 3]),
                   I64("sp", [1, -2, 2])], ["st", "en", "ax", "sp"]),
}


def build(op, x_type, same=True):
    attrs, extra_inits, extra_inputs = CASES[op]
    code = TYPE_CODE[np.dtype(x_type)]
    zero = 9 if x_type == np.uint8 else -5
    shape = [1] + SHAPE[1:] if op == "Squeeze" else SHAPE
    inits = [numpy_helper.from_array(np.array(0.037, np.float32), "s"),
             numpy_helper.from_array(np.array(zero, x_type), "z"),
             numpy_helper.from_array(np.array(0.037 if same else 0.05, np.float32), "s2")]
    nodes = [helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xd"]),
             helper.make_node(op, ["xd"] + extra_inputs, ["m"], name="move", **attrs),
             helper.make_node("QuantizeLinear", ["m", "s2", "z"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", code, shape)],
                              [helper.make_tensor_value_info("y", code, None)],
                              inits + extra_inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    return model.SerializeToString(), shape


@pytest.fixture(autouse=True)
def qdq_debug(monkeypatch):
    monkeypatch.setenv("OCTET_QDQ_DEBUG", "1")
    monkeypatch.delenv("OCTET_QDQ", raising=False)


@pytest.mark.parametrize("same", [True, False], ids=["elided", "refused"])
@pytest.mark.parametrize("x_type", [np.uint8, np.int8], ids=["u8", "s8"])
@pytest.mark.parametrize("op", sorted(CASES))
def test_movement(op, x_type, same, capfd):
    model, shape = build(op, x_type, same)
    feeds = {"x": random_q(np.random.default_rng(3), x_type, shape)}
    (ours,), report = run_octet(model, feeds, capfd)
    refused = re.findall(r"qdq_refused why=(\S+) op=" + op, report)
    assert refused == ([] if same else ["movement_params_differ"]), report
    for level in (ALL, DISABLED):
        theirs = run_ort(model, feeds, level, int8_allowed=True)[0]
        assert theirs.shape == ours.shape and np.array_equal(theirs, ours), op


@pytest.mark.parametrize("q_zero", [None, "int8"], ids=["q_default_uint8", "q_int8"])
def test_dq_without_zero_point_reads_the_data_type(q_zero, capfd):
    """DQ(int8 x) with no zero point -> Reshape -> Q: the DQ's type is the data's (int8), not
    the uint8 an omitted zero point means for Q. Eliding across int8 -> uint8 would be wrong."""
    inits = [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
             I64("shape", [4, -1])]
    q_inputs = ["m", "s"]
    if q_zero:
        inits.append(numpy_helper.from_array(np.array(0, np.int8), "z"))
        q_inputs.append("z")
    nodes = [helper.make_node("DequantizeLinear", ["x", "s"], ["xd"]),
             helper.make_node("Reshape", ["xd", "shape"], ["m"], name="move"),
             helper.make_node("QuantizeLinear", q_inputs, ["y"])]
    out_code = TensorProto.INT8 if q_zero else TensorProto.UINT8
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.INT8,
                                                                         [2, 6])],
                              [helper.make_tensor_value_info("y", out_code, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                              ir_version=10).SerializeToString()
    feeds = {"x": np.arange(-60, 60, 10, dtype=np.int8).reshape(2, 6)}
    (ours,), report = run_octet(model, feeds, capfd)
    for level in (ALL, DISABLED):
        (want,) = run_ort(model, feeds, level)
        assert ours.dtype == want.dtype
        np.testing.assert_array_equal(ours, want)
    assert ("qdq_refused why=movement_params_differ" in report) == (q_zero is None), report
