"""tools/ort_exact.py: ONNX Runtime as an exact oracle on every x86 CPU.

Pins down the reason the helper exists on the machine the test runs on: ORT's u8 x s8 form
of a full-range product differs from the exact int64 product where the CPU has no VNNI
(its kernel saturates int16 pair sums) and equals it where it has; the u8 x u8 form equals
it everywhere. Then, per operator the helper converts, ORT's u8 form is checked against an
independent numpy reference (int64 sums, then ORT's float epilogue as docs/ort-facts.md
writes it), so a conversion ORT rejects or computes differently fails here.
"""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import ort_exact

TOOLS = str(Path(__file__).resolve().parents[2] / "tools")
LEVELS = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL, ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
F32 = np.float32
U8, S8 = TensorProto.UINT8, TensorProto.INT8


def run(model, feeds, level=LEVELS[0]):
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.intra_op_num_threads = 1
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]


def make(nodes, inputs, output_type, inits, opset=21):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(n, t, None) for n, t in inputs],
        [helper.make_tensor_value_info("y", output_type, None)],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                   helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10)


def full_range(rng, dtype, shape):
    info = np.iinfo(dtype)
    values = rng.integers(info.min, info.max + 1, shape).astype(dtype)
    values.reshape(-1)[:2] = [info.min, info.max]
    return values


# ---------------------------------------------------------------------------------------
# The fact


def test_u8s8_kernel_is_exact_only_with_vnni():
    """17x257x31 MatMulInteger, full-range uint8 x int8: on an x86 CPU without VNNI most
    outputs of the s8 form differ from the int64 product (the 2026-12-01 Zen 3 measurement:
    525 of 527), with VNNI none do; the u8 form equals it on every CPU, at both levels."""
    rng = np.random.default_rng(17)
    a, b = full_range(rng, np.uint8, (17, 257)), full_range(rng, np.int8, (257, 31))
    za, zb = np.uint8(131), np.int8(-7)
    exact = (a.astype(np.int64) - int(za)) @ (b.astype(np.int64) - int(zb))
    model = make([helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])],
                 [("a", U8)], TensorProto.INT32, {"b": b, "za": za, "zb": zb}, opset=13)
    u8_model, u8_feeds, converted = ort_exact.to_u8_form(model, {"a": a})
    assert converted == ["b"]
    for level in LEVELS:
        s8_wrong = int((run(model, {"a": a}, level) != exact).sum())
        assert np.array_equal(run(u8_model, u8_feeds, level), exact)
        if ort_exact.ort_u8s8_exact():
            assert s8_wrong == 0, "ORT's u8 x s8 kernel is inexact on %s" % (
                ort_exact.describe_host())
        else:
            assert s8_wrong > exact.size // 2, (
                "ORT's u8 x s8 kernel is exact on %s: the helper's reason is gone (%d wrong)"
                % (ort_exact.describe_host(), s8_wrong))
    # what the oracle does here follows from the same decision
    assert ort_exact.oracle_form() == ("s8" if ort_exact.ort_u8s8_exact() else "u8")


def test_cpuid_agrees_with_octet():
    """The features read by cpuid in a process agree with the instruction sets octet (its own
    cpuid code) says it can run in the same kind of process."""
    out = subprocess.run([sys.executable, "-c", "import sys, json; sys.path.insert(0, %r); "
                          "import ort_exact; print(json.dumps(ort_exact.cpu_features()))"
                          % TOOLS], capture_output=True, text=True, check=True)
    features = json.loads(out.stdout)
    if features["machine"] != "x86_64":
        pytest.skip("x86 only")
    assert features["source"] == "cpuid"
    paths = ort_exact.octet_isas(features)
    for isa in ("scalar", "avx2", "avxvnni", "avx512", "avx512vnni"):
        assert ort_exact.octet_isa_supported(isa)[0] == (isa in paths), (isa, features)
    supported, reason = ort_exact.octet_isa_supported("neondot")
    assert not supported and "aarch64" in reason


# ---------------------------------------------------------------------------------------
# Every converted operator: ORT's u8 form against numpy


M, K, N = 9, 67, 13


def requantize(acc, multiplier, zero, dtype=np.uint8):
    """ORT's requantization: float32(acc) * multiplier, round half to even, + zero point,
    saturate."""
    info = np.iinfo(dtype)
    scaled = np.rint(acc.astype(F32) * multiplier.astype(F32)).astype(np.int64) + int(zero)
    return np.clip(scaled, info.min, info.max).astype(dtype)


def matmul_case(rng, kind):
    a, b = full_range(rng, np.uint8, (M, K)), full_range(rng, np.int8, (K, N))
    za = np.uint8(rng.integers(0, 256))
    zb = full_range(rng, np.int8, (N,))
    sa, sb = F32(0.02), rng.uniform(0.001, 0.01, N).astype(F32)
    sy, zy = F32(4.0), np.uint8(128)
    acc = (a.astype(np.int64) - int(za)) @ (b.astype(np.int64) - zb.astype(np.int64))
    if kind == "MatMulInteger":
        model = make([helper.make_node("MatMulInteger", ["a", "b", "za", "zb"], ["y"])],
                     [("a", U8), ("b", S8)], TensorProto.INT32, {"za": za, "zb": zb}, 13)
        return model, {"a": a, "b": b}, acc.astype(np.int32)
    if kind == "QLinearMatMul":
        model = make([helper.make_node("QLinearMatMul",
                                       ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"])],
                     [("a", U8), ("b", S8)], U8,
                     {"sa": sa, "za": za, "sb": sb, "zb": zb, "sy": sy, "zy": zy})
        return model, {"a": a, "b": b}, requantize(acc, (sa * sb) / sy, zy)
    if kind == "QGemm":  # float output, B constant, per-column parameters
        model = make([helper.make_node("QGemm", ["a", "sa", "za", "b", "sb", "zb"], ["y"],
                                       domain="com.microsoft")],
                     [("a", U8)], TensorProto.FLOAT,
                     {"sa": sa, "za": za, "b": b, "sb": sb, "zb": zb})
        return model, {"a": a}, acc.astype(F32) * (sa * sb)
    if kind == "QGemm_quantized":
        model = make([helper.make_node("QGemm", ["a", "sa", "za", "b", "sb", "zb", "", "sy",
                                                 "zy"], ["y"], domain="com.microsoft")],
                     [("a", U8)], U8,
                     {"sa": sa, "za": za, "b": b, "sb": sb, "zb": zb, "sy": sy, "zy": zy})
        return model, {"a": a}, requantize(acc, (sa * sb) / sy, zy)
    if kind == "MatMulIntegerToFloat":
        model = make([helper.make_node("MatMulIntegerToFloat", ["a", "b", "sa", "sb", "za", "zb"],
                                       ["y"], domain="com.microsoft")],
                     [("a", U8)], TensorProto.FLOAT,
                     {"b": b, "sa": sa, "sb": sb, "za": za, "zb": zb})
        return model, {"a": a}, acc.astype(F32) * (sa * sb)
    raise AssertionError(kind)


def conv_acc(x, w, zx, zw, pad):
    """int64 NCHW convolution, stride 1, symmetric padding `pad`, one group."""
    xp = np.pad(x.astype(np.int64) - int(zx), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    wd = w.astype(np.int64) - zw.astype(np.int64).reshape(-1, 1, 1, 1)
    kh, kw = w.shape[2:]
    h, v = xp.shape[2] - kh + 1, xp.shape[3] - kw + 1
    out = np.zeros((x.shape[0], w.shape[0], h, v), np.int64)
    for i in range(kh):
        for j in range(kw):
            out += np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + v], wd[:, :, i, j])
    return out


def conv_case(rng, kind):
    x, w = full_range(rng, np.uint8, (1, 16, 7, 8)), full_range(rng, np.int8, (6, 16, 3, 3))
    zx = np.uint8(119)
    sx, sw, sy, zy = F32(0.02), rng.uniform(0.002, 0.01, 6).astype(F32), F32(3.0), np.uint8(100)
    if kind == "ConvInteger":  # ORT's ConvInteger takes a scalar weight zero point
        zw = np.int8(-5)
        model = make([helper.make_node("ConvInteger", ["x", "w", "zx", "zw"], ["y"],
                                       pads=[1, 1, 1, 1])],
                     [("x", U8)], TensorProto.INT32, {"w": w, "zx": zx, "zw": zw}, 13)
        return model, {"x": x}, conv_acc(x, w, zx, np.full(6, zw), 1).astype(np.int32)
    # per-channel zero points that differ: ORT's QLinearConv takes them in both forms
    zw = np.arange(6, dtype=np.int8) - 2
    model = make([helper.make_node("QLinearConv", ["x", "sx", "zx", "w", "sw", "zw", "sy", "zy"],
                                   ["y"], pads=[1, 1, 1, 1])],
                 [("x", U8), ("w", S8)] if kind == "QLinearConv_runtime_w" else [("x", U8)], U8,
                 dict({"sx": sx, "zx": zx, "sw": sw, "zw": zw, "sy": sy, "zy": zy},
                      **({} if kind == "QLinearConv_runtime_w" else {"w": w})), 13)
    feeds = {"x": x, "w": w} if kind == "QLinearConv_runtime_w" else {"x": x}
    return model, feeds, requantize(conv_acc(x, w, zx, zw, 1), ((sx * sw) / sy).reshape(
        1, -1, 1, 1), zy)


def qdq_s8_activation_case(rng):
    """Q(float x) -> int8 -> DQ, DQ(int8 weight) -> MatMul -> Q(int8) -> DQ: ORT's int8 ->
    uint8 move on x86 turns both Q -> DQ pairs into uint8, then fuses a u8 x s8
    QLinearMatMul. x is a multiple of a power-of-two scale, so the Q gives xq exactly; the
    output scale keeps the products' saturation errors visible in y."""
    sx, zx, sy, zy = F32(0.0625), np.int8(-3), F32(0.25), np.int8(5)
    xq, w = full_range(rng, np.int8, (M, K)), full_range(rng, np.int8, (K, N))
    x = ((xq.astype(F32) - F32(zx)) * sx).astype(F32)
    sw = rng.uniform(0.001, 0.01, N).astype(F32)
    nodes = [helper.make_node("QuantizeLinear", ["x", "sx", "zx"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "sx", "zx"], ["xd"]),
             helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"], axis=1),
             helper.make_node("MatMul", ["xd", "wd"], ["p"]),
             helper.make_node("QuantizeLinear", ["p", "sy", "zy"], ["yq"]),
             helper.make_node("DequantizeLinear", ["yq", "sy", "zy"], ["y"])]
    model = make(nodes, [("x", TensorProto.FLOAT)], TensorProto.FLOAT,
                 {"sx": sx, "zx": zx, "sy": sy, "zy": zy, "w": w, "sw": sw})
    acc = (xq.astype(np.int64) - int(zx)) @ w.astype(np.int64)
    yq = requantize(acc, (sx * sw) / sy, zy, np.int8)
    return model, {"x": x}, ((yq.astype(F32) - F32(zy)) * sy).astype(F32)


def qdq_case(rng, kind):
    """The QDQ groups ORT fuses: DQ(uint8 x), DQ(int8 weight) -> MatMul | Gemm | Conv -> Q;
    'qdq_matmul_q_weight' takes its weight from a QuantizeLinear at run time."""
    if kind == "qdq_matmul_s8_activation":
        return qdq_s8_activation_case(rng)
    sx, zx, sy, zy = F32(0.02), np.uint8(77), F32(4.0), np.uint8(128)
    nodes = [helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xd"])]
    inits = {"sx": sx, "zx": zx, "sy": sy, "zy": zy}
    if kind == "qdq_conv":
        x, w = full_range(rng, np.uint8, (1, 16, 7, 8)), full_range(rng, np.int8, (6, 16, 3, 3))
        sw = rng.uniform(0.002, 0.01, 6).astype(F32)
        nodes += [helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"], axis=0),
                  helper.make_node("Conv", ["xd", "wd"], ["p"], pads=[1, 1, 1, 1])]
        inits.update(w=w, sw=sw)
        want = requantize(conv_acc(x, w, zx, np.zeros(6, np.int8), 1),
                          ((sx * sw) / sy).reshape(1, -1, 1, 1), zy)
        feeds = {"x": x}
    else:
        x, w = full_range(rng, np.uint8, (M, K)), full_range(rng, np.int8, (K, N))
        sw = rng.uniform(0.001, 0.01, N).astype(F32)
        acc = (x.astype(np.int64) - int(zx)) @ w.astype(np.int64)
        want = requantize(acc, (sx * sw) / sy, zy)
        feeds = {"x": x}
        if kind == "qdq_gemm":
            nodes += [helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"], axis=0),
                      helper.make_node("Gemm", ["xd", "wd"], ["p"], transB=1)]
            inits.update(w=np.ascontiguousarray(w.T), sw=sw)
        elif kind == "qdq_matmul":
            nodes += [helper.make_node("DequantizeLinear", ["w", "sw"], ["wd"], axis=1),
                      helper.make_node("MatMul", ["xd", "wd"], ["p"])]
            inits.update(w=w, sw=sw)
        else:  # a run-time weight: Q(float) -> DQ, per-tensor (the Q decides the values)
            sw = F32(0.01)
            wf = (w.astype(F32) * sw).astype(F32)
            nodes += [helper.make_node("QuantizeLinear", ["wf", "sw", "zw"], ["wq"]),
                      helper.make_node("DequantizeLinear", ["wq", "sw", "zw"], ["wd"]),
                      helper.make_node("MatMul", ["xd", "wd"], ["p"])]
            inits.update(sw=sw, zw=np.int8(0))
            feeds["wf"] = wf
            want = requantize(acc, np.array((sx * sw) / sy), zy)
    nodes.append(helper.make_node("QuantizeLinear", ["p", "sy", "zy"], ["y"]))
    inputs = [("x", U8)] + ([("wf", TensorProto.FLOAT)] if "wf" in feeds else [])
    return make(nodes, inputs, U8, inits), feeds, want


def dynamic_case(rng):
    """DynamicQuantizeMatMul: A quantized to uint8 at run time (ORT's own DynamicQuantizeLinear
    gives the reference its scale and zero point), then int64 sums times a_scale * b_scale."""
    x = rng.standard_normal((M, K)).astype(F32) * 3
    b, sb, zb = full_range(rng, np.int8, (K, N)), rng.uniform(0.001, 0.01, N).astype(F32), \
        full_range(rng, np.int8, (N,))
    model = make([helper.make_node("DynamicQuantizeMatMul", ["x", "b", "sb", "zb"], ["y"],
                                   domain="com.microsoft")],
                 [("x", TensorProto.FLOAT)], TensorProto.FLOAT, {"b": b, "sb": sb, "zb": zb})
    dql = helper.make_graph([helper.make_node("DynamicQuantizeLinear", ["x"], ["q", "s", "z"])],
                            "d", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                            [helper.make_tensor_value_info(n, t, None) for n, t in
                             (("q", U8), ("s", TensorProto.FLOAT), ("z", U8))])
    q, s, z = ort.InferenceSession(helper.make_model(
        dql, opset_imports=[helper.make_opsetid("", 13)], ir_version=8).SerializeToString(),
        providers=["CPUExecutionProvider"]).run(None, {"x": x})
    acc = (q.astype(np.int64) - int(z)) @ (b.astype(np.int64) - zb.astype(np.int64))
    return model, {"x": x}, acc.astype(F32) * (F32(s) * sb)


CASES = ["MatMulInteger", "QLinearMatMul", "QGemm", "QGemm_quantized", "MatMulIntegerToFloat",
         "ConvInteger", "QLinearConv", "QLinearConv_runtime_w", "qdq_matmul", "qdq_gemm",
         "qdq_conv", "qdq_matmul_q_weight", "qdq_matmul_s8_activation", "DynamicQuantizeMatMul"]


@pytest.mark.parametrize("kind", CASES)
def test_u8_form_is_exact(kind):
    rng = np.random.default_rng(CASES.index(kind))
    if kind in ("ConvInteger", "QLinearConv", "QLinearConv_runtime_w"):
        model, feeds, want = conv_case(rng, kind)
    elif kind.startswith("qdq"):
        model, feeds, want = qdq_case(rng, kind)
    elif kind == "DynamicQuantizeMatMul":
        model, feeds, want = dynamic_case(rng)
    else:
        model, feeds, want = matmul_case(rng, kind)
    u8_model, u8_feeds, converted = ort_exact.to_u8_form(model, feeds)
    assert converted, "nothing converted"
    types = {i.name: i.type.tensor_type.elem_type for i in u8_model.graph.input}
    assert all(u8_feeds[n].dtype == np.uint8 for n in converted if n in u8_feeds)
    assert all(types[n] == U8 for n in converted if n in types)
    # the fused levels compute the product in integers; DISABLE_ALL runs the QDQ forms as
    # DequantizeLinear + float op + QuantizeLinear, which is not exact (checked elsewhere)
    levels = LEVELS[:1] if kind.startswith("qdq") else LEVELS
    for level in levels:
        got = run(u8_model, u8_feeds, level)
        assert got.dtype == want.dtype and got.shape == want.shape
        if want.dtype == F32:
            np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
        else:
            np.testing.assert_array_equal(got, want)
    if kind == "qdq_matmul_s8_activation" and ort_exact.oracle_form() == "u8":
        # ORT fuses the model as written into its saturating u8 x s8 kernel here
        assert not np.array_equal(run(model, feeds), want)
    # the DQ of a converted weight gives the same floats: the float path sees no change
    if kind.startswith("qdq"):
        np.testing.assert_array_equal(run(u8_model, u8_feeds, LEVELS[1]),
                                      run(model, feeds, LEVELS[1]))


# ---------------------------------------------------------------------------------------
# What the conversion leaves alone, and what it refuses


def test_products_without_u8s8_are_left_alone():
    """s8 x s8 and u8 x u8 products (exact in ORT on every CPU), and a model without any
    integer product, come back unchanged."""
    rng = np.random.default_rng(3)
    for a_type, b_type in ((S8, S8), (U8, U8)):
        b = full_range(rng, np.int8 if b_type == S8 else np.uint8, (K, N))
        model = make([helper.make_node("MatMulInteger", ["a", "b"], ["y"])], [("a", a_type)],
                     TensorProto.INT32, {"b": b}, 13)
        converted_model, _, converted = ort_exact.to_u8_form(model, {})
        assert converted == []
        assert converted_model.SerializeToString() == model.SerializeToString()
    relu = make([helper.make_node("Relu", ["x"], ["y"])], [("x", TensorProto.FLOAT)],
                TensorProto.FLOAT, {})
    assert ort_exact.to_u8_form(relu.SerializeToString())[2] == []


def test_for_ort_keeps_the_s8_form_where_exact():
    rng = np.random.default_rng(4)
    model, feeds, _ = matmul_case(rng, "MatMulInteger")
    same, same_feeds = ort_exact.for_ort(model, feeds, form="s8")
    assert same is model and all(same_feeds[k] is feeds[k] for k in feeds)
    changed, changed_feeds = ort_exact.for_ort(model, feeds, form="u8")
    assert changed_feeds["b"].dtype == np.uint8
    assert np.array_equal(changed_feeds["b"].astype(np.int16) - 128, feeds["b"])


def test_a_weight_that_cannot_follow_is_refused():
    """An int8 weight that also feeds an op whose meaning would change (here a Cast) cannot
    be converted; the helper says so instead of giving ORT a different model."""
    b = np.ones((K, N), np.int8)
    model = make([helper.make_node("MatMulInteger", ["a", "b"], ["y"]),
                  helper.make_node("Cast", ["b"], ["bf"], to=TensorProto.FLOAT)],
                 [("a", U8)], TensorProto.INT32, {"b": b}, 13)
    model.graph.output.append(helper.make_tensor_value_info("bf", TensorProto.FLOAT, None))
    with pytest.raises(ort_exact.ConversionError, match="also feeds Cast"):
        ort_exact.to_u8_form(model)


def test_shared_zero_point_is_not_shifted_for_its_other_readers():
    """The Q producing a run-time weight and an unrelated activation DQ share one int8 zero
    point initializer: only the weight's readers get the shifted copy."""
    model, feeds, _ = qdq_case(np.random.default_rng(5), "qdq_matmul_q_weight")
    model.graph.node.append(helper.make_node("QuantizeLinear", ["wf", "sw", "zw"], ["wq2"]))
    model.graph.node.append(helper.make_node("DequantizeLinear", ["wq2", "sw", "zw"], ["other"]))
    model.graph.output.append(helper.make_tensor_value_info("other", TensorProto.FLOAT, None))
    converted_model, _, converted = ort_exact.to_u8_form(model, feeds)
    assert converted == ["wq"]
    readers = {n.output[0]: list(n.input) for n in converted_model.graph.node}
    assert readers["other"][2] == "zw" and readers["wq2"][2] == "zw"
    values = {t.name: numpy_helper.to_array(t) for t in converted_model.graph.initializer}
    assert values["zw"] == 0 and values["zw"].dtype == np.int8
    for reader in ("wq", "wd"):
        assert values[readers[reader][2]] == 128 and values[readers[reader][2]].dtype == np.uint8
    session = ort.InferenceSession(converted_model.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    original = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(["other"], feeds)[0],
                                  original.run(["other"], feeds)[0])
