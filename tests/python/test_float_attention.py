"""Attention steps fused by rewrite/float_attention.h.

octet.FloatAttention: MatMul(q, k_t) -> Div -> Add(mask) -> Softmax(-1) -> MatMul(v), as
the encoders keep it in float, and the decoders' form: k_t = Transpose(k, [0, 1, 3, 2]), the
scale a Mul, k and v often through grouped-query attention's repeat_kv. octet.MaskedSoftmax: DequantizeLinear -> Div (a lookup
table after the QDQ passes) -> Add(mask) -> Softmax(-1) -> QuantizeLinear, the scores of
quantized attention. Fused, they must give the same bits as the nodes run one by one
(OCTET_QDQ=0), with the mask on either side of the Add, on 1 and 2 threads, and stay
within float tolerance (one quantization step) of ONNX Runtime. A chain whose scores are
read elsewhere is left as written.
"""

import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import octet
from octet_cli import inspect_model

B, H, S, D = 2, 3, 20, 8


def fused_runs_equal_to_unfused(m, feeds, monkeypatch):
    """octet's outputs with the rewrites on, on 1 and 2 threads, each checked equal bit for
    bit to the same run with the rewrites off (OCTET_QDQ=0)."""
    for threads in (1, 2):
        monkeypatch.delenv("OCTET_QDQ", raising=False)
        ours = octet.InferenceSession(m, threads=threads).run(None, feeds)
        monkeypatch.setenv("OCTET_QDQ", "0")
        plain = octet.InferenceSession(m, threads=threads).run(None, feeds)
        monkeypatch.delenv("OCTET_QDQ", raising=False)
        for a, b in zip(ours, plain):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
        yield ours


def model(form):
    heads = form == "heads_inner"
    nodes = [helper.make_node("Transpose", ["q_in"], ["q"], perm=[0, 2, 1, 3]),
             helper.make_node("Transpose", ["k_in"], ["k_t"], perm=[0, 2, 3, 1]),
             helper.make_node("Transpose", ["v_in"], ["v"], perm=[0, 2, 1, 3])] if heads else []
    nodes += [helper.make_node("MatMul", ["q", "k_t"], ["scores"]),
             helper.make_node("Div", ["scores", "divisor"], ["scaled"]),
             helper.make_node("Add", ["mask", "scaled"] if form == "mask_first"
                              else ["scaled", "mask"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
             helper.make_node("MatMul", ["probs", "v"], ["context" if heads else "y"])]
    if heads:
        nodes.append(helper.make_node("Transpose", ["context"], ["y"], perm=[0, 2, 1, 3]))
    outputs = ["y"] + (["scores"] if form == "scores_read_elsewhere" else [])
    f = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)  # noqa
    graph = helper.make_graph(
        nodes, "attention",
        [f("q_in", [B, S, H, D]), f("k_in", [B, S, H, D]), f("mask", [B, 1, 1, S]),
         f("v_in", [B, S, H, D])] if heads else
        [f("q", [B, H, S, D]), f("k_t", [B, H, D, S]), f("mask", [B, 1, 1, S]),
         f("v", [B, H, S, D])],
        [f(o, None) for o in outputs],
        [numpy_helper.from_array(np.array(np.sqrt(D), np.float32), "divisor")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             ir_version=10).SerializeToString()



@pytest.mark.parametrize("form,fused", [("mask_last", True), ("mask_first", True),
                                        ("heads_inner", True), ("scores_read_elsewhere", False)])
def test_float_attention_fusion(form, fused, monkeypatch, tmp_path):
    m = model(form)
    rng = np.random.default_rng(7)
    mask = np.where(rng.random((B, 1, 1, S)) < 0.2, -10000.0, 0.0)
    if form == "heads_inner":
        feeds = {name: rng.standard_normal((B, S, H, D)) for name in ("q_in", "k_in", "v_in")}
    else:
        feeds = {"q": rng.standard_normal((B, H, S, D)), "k_t": rng.standard_normal((B, H, D, S)),
                 "v": rng.standard_normal((B, H, S, D))}
    feeds["mask"] = mask
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    monkeypatch.delenv("OCTET_QDQ", raising=False)
    report = inspect_model(m, tmp_path)
    assert bool(re.search(r"-> octet\.FloatAttention", report)) == fused
    assert ("Transpose x3" in report) == (form == "heads_inner")
    theirs = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feeds)
    for ours in fused_runs_equal_to_unfused(m, feeds, monkeypatch):
        for a, b in zip(ours, theirs):
            np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


KV, T, G = 2, 17, 3  # key/value heads, keys (past + new), query heads per key head


def decoder_model(form, keys=T):
    """Attention as tools/models/decoder.py writes it: q [1, KV*G, S, D], k and v
    [1, KV, T, D] (the present KV cache), repeat_kv, Transpose, Mul by the scale, a mask
    [1, 1, S, T]."""
    c = lambda name, v, t=np.int64: numpy_helper.from_array(np.array(v, t), name)  # noqa
    inits = [c("scale", 1 / np.sqrt(D), np.float32), c("axis2", [2]), c("rep", [1, 1, G, 1, 1]),
             c("merged", [0, KV * G, -1, D])]
    nodes = []
    k, v = "k", "v"
    if form != "no_repeat":
        for x in ("k", "v"):
            nodes += [helper.make_node("Unsqueeze", [x, "axis2"], [x + "_u"]),
                      helper.make_node("Expand", [x + "_u", "rep"], [x + "_e"]),
                      helper.make_node("Reshape", [x + "_e", "merged"], [x + "_r"])]
        k, v = "k_r", "v_r"
    scale = ["scale", "scores"] if form == "scale_first" else ["scores", "scale"]
    if form == "tensor_scale":  # one factor per head: the per-entry path does not apply
        inits[0] = numpy_helper.from_array(
            np.linspace(0.2, 0.4, KV * G, dtype=np.float32).reshape(1, KV * G, 1, 1), "scale")
    nodes += [helper.make_node("Transpose", [k], ["k_t"], perm=[0, 1, 3, 2]),
              helper.make_node("MatMul", ["q", "k_t"], ["scores"]),
              helper.make_node("Mul", scale, ["scaled"]),
              helper.make_node("Add", ["scaled", "mask"], ["masked"]),
              helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
              helper.make_node("MatMul", ["probs", v], ["y"])]
    heads = KV if form == "no_repeat" else KV * G
    f = lambda name, shape: helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)  # noqa
    graph = helper.make_graph(
        nodes, "decoder_attention",
        [f("q", [1, heads, "s", D]), f("k", [1, KV, keys, D]), f("v", [1, KV, keys, D]),
         f("mask", [1, 1, "s", keys])], [f("y", None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                             ir_version=10).SerializeToString()


@pytest.mark.parametrize("form", ["repeat", "scale_first", "no_repeat", "tensor_scale"])
# 1 and 4 query rows: an entry per key head; 13: per query head (ops/float_ops.cc).
@pytest.mark.parametrize("queries", [1, 4, 13])
def test_decoder_attention_fusion(form, queries, monkeypatch, tmp_path):
    """Fused, the decoder form gives the nodes' bits (per-entry path, or the steps when the
    scale is not one value) and stays within float tolerance of ONNX Runtime."""
    m = decoder_model(form)
    rng = np.random.default_rng(9)
    heads = KV if form == "no_repeat" else KV * G
    causal = np.triu(np.full((queries, T), np.finfo(np.float32).min), T - queries + 1)
    feeds = {"q": rng.standard_normal((1, heads, queries, D)), "k": rng.standard_normal((1, KV, T, D)),
             "v": rng.standard_normal((1, KV, T, D)), "mask": causal[None, None]}
    feeds = {k: v.astype(np.float32) for k, v in feeds.items()}
    monkeypatch.delenv("OCTET_QDQ", raising=False)
    report = inspect_model(m, tmp_path)
    assert "-> octet.FloatAttention" in report
    assert ("Unsqueeze, Expand, Reshape x2" in report) == (form != "no_repeat")
    theirs = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feeds)
    for ours in fused_runs_equal_to_unfused(m, feeds, monkeypatch):
        np.testing.assert_allclose(ours[0], theirs[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("case", ["causal_min", "causal_inf", "left_padded", "barely_kept",
                                  "masked_at_threshold", "kept_mask_inf_nan", "q_inf", "k_nan",
                                  "v_inf_hidden", "scores_too_large"])
def test_decoder_attention_skips_hidden_keys_exactly(case, monkeypatch):
    """A prefill of many query rows computes each block of rows only up to its last key
    the mask keeps (a causal mask hides the rest). The bits must stay those of the nodes:
    with -inf or float32-min masks, hidden keys at the start too, a last kept key whose
    mask value is barely above the hidden ones, kept mask values that make a row NaN, and
    q, k or v values that force every key to be computed (an infinity, a NaN, scores near
    overflow)."""
    queries, keys = 60, 69  # two blocks of rows, the second partial; 9 past keys
    m = decoder_model("repeat", keys)
    rng = np.random.default_rng(len(case))
    q = rng.standard_normal((1, KV * G, queries, D)).astype(np.float32)
    k = rng.standard_normal((1, KV, keys, D)).astype(np.float32)
    v = rng.standard_normal((1, KV, keys, D)).astype(np.float32)
    hidden = np.float32(-np.inf if case == "causal_inf" else np.finfo(np.float32).min)
    mask = np.triu(np.full((queries, keys), hidden, np.float32), keys - queries + 1)
    if case == "left_padded":
        mask[:, :3] = hidden
    if case == "barely_kept":  # the last kept key of row 30 at -5e29: that row is not cut
        mask[30, keys - queries + 30] = -5e29
    if case == "masked_at_threshold":
        mask[40:, -1] = -1e30
    if case == "kept_mask_inf_nan":  # rows of NaN, whose hidden keys are NaN too
        mask[20, 5], mask[21, 3], mask[22, keys - queries + 22] = np.inf, np.nan, np.nan
    if case == "q_inf":
        q[0, 1, 7, 3] = np.inf
    if case == "k_nan":
        k[0, 0, 2, 5] = np.nan
    if case == "v_inf_hidden":  # a hidden key's value: 0 x inf is NaN in the full product
        v[0, 1, keys - 1, 0] = np.inf
    if case == "scores_too_large":
        q *= np.float32(1e14)
        k *= np.float32(1e14)
    feeds = {"q": q, "k": k, "v": v, "mask": mask[None, None]}
    for _ in fused_runs_equal_to_unfused(m, feeds, monkeypatch):
        pass


def test_decoder_attention_needs_the_repeat_constants(monkeypatch, tmp_path):
    """An Expand that is not a repeat of axis 2 leaves the chain as written."""
    m = onnx.load_from_string(decoder_model("repeat"))
    for init in m.graph.initializer:
        if init.name == "rep":
            init.CopyFrom(numpy_helper.from_array(np.array([1, 1, G, 1, 2], np.int64), "rep"))
    report = inspect_model(m.SerializeToString(), tmp_path)
    assert "Unsqueeze, Expand, Reshape x2" not in report


def quantized_model(form):
    nodes = [helper.make_node("DequantizeLinear", ["x", "x_scale", "x_zero"], ["scores"]),
             helper.make_node("Div", ["scores", "divisor"], ["scaled"]),
             helper.make_node("Add", ["mask", "scaled"] if form == "mask_first"
                              else ["scaled", "mask"], ["masked"]),
             helper.make_node("Softmax", ["masked"], ["probs"], axis=-1),
             helper.make_node("QuantizeLinear", ["probs", "y_scale", "y_zero"], ["y"])]
    outputs = ["y"] + (["masked"] if form == "masked_read_elsewhere" else [])
    c = lambda name, v, t=np.float32: numpy_helper.from_array(np.array(v, t), name)  # noqa
    graph = helper.make_graph(
        nodes, "scores",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [B, H, S, S]),
         helper.make_tensor_value_info("mask", TensorProto.FLOAT, [B, 1, 1, S])],
        [helper.make_tensor_value_info(o, TensorProto.UINT8 if o == "y" else TensorProto.FLOAT,
                                       None) for o in outputs],
        [c("x_scale", 0.07), c("x_zero", 121, np.uint8), c("divisor", np.sqrt(D)),
         c("y_scale", 1 / 255), c("y_zero", 0, np.uint8)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                             ir_version=10).SerializeToString()


@pytest.mark.parametrize("form,fused", [("mask_last", True), ("mask_first", True),
                                        ("masked_read_elsewhere", False)])
def test_masked_softmax_fusion(form, fused, monkeypatch, tmp_path):
    m = quantized_model(form)
    rng = np.random.default_rng(8)
    feeds = {"x": rng.integers(0, 256, (B, H, S, S)).astype(np.uint8),
             "mask": np.where(rng.random((B, 1, 1, S)) < 0.2, -10000.0, 0.0).astype(np.float32)}
    monkeypatch.delenv("OCTET_QDQ", raising=False)
    assert bool(re.search(r"-> octet\.MaskedSoftmax", inspect_model(m, tmp_path))) == fused
    theirs = ort.InferenceSession(m, providers=["CPUExecutionProvider"]).run(None, feeds)
    for ours in fused_runs_equal_to_unfused(m, feeds, monkeypatch):
        assert np.abs(ours[0].astype(int) - theirs[0].astype(int)).max() <= 1
