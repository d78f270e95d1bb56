"""Relu / Clip around fused QDQ MatMul groups (issue 4) against ONNX Runtime 1.31.1.

Two forms:
  * quantized group -> DequantizeLinear -> Relu | Clip -> QuantizeLinear: octet folds the
    three nodes into the fused node's integer clamp when the 256-value table of the chain
    (ORT's float steps) is a clamp; otherwise it refuses (`activation_requantizes`, ...).
  * float-output group -> Relu | Clip -> QuantizeLinear: ORT deletes the activation when
    it changes no quantized value (zero point = qmin; Clip bounds covering the range) and
    fuses the group; otherwise it keeps MatMulIntegerToFloat -> float op -> Q, and so do we
    (`relu_zero_point_not_qmin`, `clip_inside_q_range`).
Outputs must equal ORT_ENABLE_ALL bit for bit (s8 with session.qdqisint8allowed=1) and be
within 1 LSB of ORT_DISABLE_ALL, only on rounding ties of the product.
"""

import re

import numpy as np
import pytest

import octet
from onnx import TensorProto, helper, numpy_helper

from test_qdq_fusion import ALL, DISABLED, TYPE_CODE, random_q, run_octet, run_ort

M, K, N = 33, 64, 48


@pytest.fixture(autouse=True)
def qdq_debug(monkeypatch):
    monkeypatch.setenv("OCTET_QDQ_DEBUG", "1")
    monkeypatch.delenv("OCTET_QDQ", raising=False)


def build(rng, x_type, act, y_zero, quantized_product, clip=(0.0, 1.0), out_zero=None,
          out_scale_factor=1.0):
    """x -> DQ, W -> DQ -> MatMul [-> Q -> DQ] -> act -> Q(out) -> y."""
    x_type = np.dtype(x_type)
    code = TYPE_CODE[x_type]
    sx, sw = np.float32(0.02), np.float32(0.01)
    sy = np.float32(sx * sw * np.sqrt(K) * 60 / 255)
    w = random_q(rng, np.int8, (K, N))
    out_zero = y_zero if out_zero is None else out_zero
    inits = [
        numpy_helper.from_array(np.array(sx, np.float32), "sx"),
        numpy_helper.from_array(np.array(7 if x_type == np.uint8 else -3, x_type), "zx"),
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(np.array(sw, np.float32), "sw"),
        numpy_helper.from_array(np.array(sy, np.float32), "sy"),
        numpy_helper.from_array(np.array(y_zero, x_type), "zy"),
        numpy_helper.from_array(np.array(sy * np.float32(out_scale_factor), np.float32), "so"),
        numpy_helper.from_array(np.array(out_zero, x_type), "zo"),
        numpy_helper.from_array(np.array(clip[0], np.float32), "cmin"),
        numpy_helper.from_array(np.array(clip[1], np.float32), "cmax"),
    ]
    nodes = [helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"]),
             helper.make_node("MatMul", ["xd", "wd"], ["p"], name="mm")]
    act_in = "p"
    if quantized_product:
        nodes += [helper.make_node("QuantizeLinear", ["p", "sy", "zy"], ["pq"]),
                  helper.make_node("DequantizeLinear", ["pq", "sy", "zy"], ["pd"])]
        act_in = "pd"
    act_inputs = [act_in, "cmin", "cmax"] if act == "Clip" else [act_in]
    nodes += [helper.make_node(act, act_inputs, ["a"], name="act"),
              helper.make_node("QuantizeLinear", ["a", "so", "zo"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", code, [M, K])],
                              [helper.make_tensor_value_info("y", code, [M, N])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    return model.SerializeToString(), {"x": random_q(rng, x_type, (M, K))}


def refusals(report):
    return set(re.findall(r"qdq_refused why=(\S+) op=(?:Relu|Clip)", report))


def check(model, feeds, capfd, x_type, expect_refused):
    try:
        (ours,), report = run_octet(model, feeds, capfd)
    except octet.OctetError as error:
        if "unsupported operator Clip" in str(error):  # float Clip: the float ops family
            pytest.skip("octet has no float Clip kernel yet: %s" % error)
        raise
    assert "claimed=1" in report, report
    assert refusals(report) == set(expect_refused), report
    fused = run_ort(model, feeds, ALL, int8_allowed=np.dtype(x_type) == np.int8)[0]
    assert np.array_equal(ours, fused), "worst |d| = %d against ORT_ENABLE_ALL" % np.abs(
        ours.astype(int) - fused.astype(int)).max()
    unfused = run_ort(model, feeds, DISABLED)[0]
    d = np.abs(ours.astype(int) - unfused.astype(int))
    assert d.max(initial=0) <= 1
    print("%d of %d values differ by 1 LSB from ORT_DISABLE_ALL" % (np.count_nonzero(d), d.size))
    return ours


TYPES = [np.uint8, np.int8]


@pytest.mark.parametrize("x_type", TYPES, ids=["u8", "s8"])
@pytest.mark.parametrize("act,clip", [("Relu", (0, 0)), ("Clip", (-0.005, 0.03)), ("Clip", (0.0, 0.02)),
                                      ("Clip", (-1e9, 1e9))], ids=["relu", "clip", "relu6", "wide"])
def test_quantized_group_activation_absorbed(x_type, act, clip, capfd):
    rng = np.random.default_rng(11)
    zero = 20 if x_type == np.uint8 else -9
    model, feeds = build(rng, x_type, act, zero, True, clip=clip)
    ours = check(model, feeds, capfd, x_type, [])
    if act == "Relu":
        assert ours.min() == zero
    elif clip[0] > -1:
        assert ours.min() > np.iinfo(x_type).min and ours.max() < np.iinfo(x_type).max


@pytest.mark.parametrize("x_type", TYPES, ids=["u8", "s8"])
def test_requantizing_activation_refused(x_type, capfd):
    rng = np.random.default_rng(12)
    model, feeds = build(rng, x_type, "Relu", 3, True, out_zero=5, out_scale_factor=1.5)
    check(model, feeds, capfd, x_type, ["activation_requantizes"])


@pytest.mark.parametrize("x_type", TYPES, ids=["u8", "s8"])
@pytest.mark.parametrize("act,clip,zero_is_min,refused", [
    ("Relu", (0, 0), True, []),
    ("Relu", (0, 0), False, ["relu_zero_point_not_qmin"]),
    ("Clip", (-1e9, 1e9), False, []),
    ("Clip", (-0.005, 0.03), False, ["clip_inside_q_range"]),
], ids=["relu_qmin", "relu_kept", "clip_wide", "clip_kept"])
def test_float_group_activation(x_type, act, clip, zero_is_min, refused, capfd):
    rng = np.random.default_rng(13)
    info = np.iinfo(x_type)
    zero = info.min if zero_is_min else info.min + 40
    model, feeds = build(rng, x_type, act, zero, False, clip=clip)
    check(model, feeds, capfd, x_type, refused)
