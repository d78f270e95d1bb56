#!/usr/bin/env python3
"""Writes the fuzz targets' models and seed corpora into build/fuzz (tools/fuzz.sh runs it).

    build/fuzz/models/<stem>.onnx     the models fuzz_run feeds (tests/fuzz/run_models.txt)
    build/fuzz/seeds/loader/*         model bytes for fuzz_loader
    build/fuzz/seeds/session/*        model bytes for fuzz_session
    build/fuzz/seeds/run/*            feeds for fuzz_run, in its input format (below)

The models: small hand-built graphs with dynamic shapes for every operator family octet has
(QDQ MatMul/Conv groups quantized by onnxruntime.quantization three ways, QOperator and
com.microsoft ops with their parameters as graph inputs, the shape-driven ops with their
shape, pads, scales or sizes as graph inputs, float ops), a tiny MiniLM (the same graph
tools/models/build_minilm.py writes, with hidden size 32 and random weights) in its four
quantized forms, and the models tools/models builds: the reduced MiniLM (2 layers, seq 32)
and the ddddocr detector at 32 x 32. The loader and session seeds are those models (the
large ones left out: libFuzzer mutates each input whole), the ORT oracle's 979 operator
models (tools/ops_quant_oracle.py) and ONNX's node test models when
build/onnx_node_tests holds them.

fuzz_run's input format (decoded by tests/fuzz/targets.cc, encoded by run_seed here):
byte 0 picks the model (modulo the count), byte 1 bit 0 also runs a 2-thread session and
requires the same bytes. Then per graph input a flags byte: bits 0-1 the value mode (0 raw
bytes, 1 one signed byte per element, 2 one byte per element picking a special value,
3 one bit per element), bit 2: a dtype byte follows (the feed's dtype is byte % 23 + 1
instead of the declared one), bit 3: a rank byte (% 6) and one byte per dim follow (the
declared shape is ignored). Without bit 3 a static dim keeps its size, a symbolic dim takes
byte % 17 the first time its symbol occurs, an unknown dim byte % 17, and an input without
a declared shape a rank byte (% 5) and dims (% 17). The bytes after the last header are the
values, consumed input after input (zeros when they run out).

Deterministic: the same bytes on every run (seeded generators, onnxruntime's quantizer).
Files already present are kept unless --force.
"""

import argparse
import hashlib
import os
import shutil
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
sys.path.insert(0, os.path.join(ROOT, "tools", "models"))
import common  # noqa: E402

OUT = os.path.join(ROOT, "build", "fuzz")
RUN_MODELS = os.path.join(ROOT, "tests", "fuzz", "run_models.txt")
F, U8, I8, I32, I64, B = (TensorProto.FLOAT, TensorProto.UINT8, TensorProto.INT8,
                          TensorProto.INT32, TensorProto.INT64, TensorProto.BOOL)
MS = "com.microsoft"
# Seeds larger than this stay out of the loader and session corpora.
MAX_SEED_BYTES = 1 << 20


def run_model_names():
    with open(RUN_MODELS) as f:
        return [line.strip() for line in f if line.strip() and not line.startswith("#")]


def rng_for(name):
    return np.random.default_rng(int(hashlib.sha256(name.encode()).hexdigest()[:8], 16))


def vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def init(name, array):
    return numpy_helper.from_array(np.ascontiguousarray(array), name)


def model(nodes, inputs, outputs, inits=(), opset=21, ms=False, ir=10):
    graph = helper.make_graph(nodes, "fuzz", inputs, outputs, list(inits))
    opsets = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(MS, 1)] if ms else [])
    return helper.make_model(graph, opset_imports=opsets, ir_version=ir,
                             producer_name="octet fuzz_seeds")


def node(op, inputs, outputs, domain="", **attrs):
    return helper.make_node(op, inputs, outputs, domain=domain, **attrs)


# ---- QDQ groups through onnxruntime's quantizer -------------------------------------------

def quantized(float_model, recipe, feeds):
    """float_model quantized by onnxruntime.quantization (tools/models/common.py recipes)."""
    with tempfile.TemporaryDirectory() as tmp:
        float_path, out_path = os.path.join(tmp, "float.onnx"), os.path.join(tmp, "q.onnx")
        onnx.save(float_model, float_path)
        common.quantize(float_path, out_path, recipe, None if recipe == "dynamic" else feeds)
        return onnx.load(out_path)


def mlp_float():
    rng = rng_for("mlp")
    nodes = [node("MatMul", ["x", "w0"], ["m0"]), node("Add", ["m0", "b0"], ["a0"]),
             node("Relu", ["a0"], ["r0"]), node("MatMul", ["r0", "w1"], ["m1"]),
             node("Add", ["m1", "b1"], ["y"])]
    inits = [init("w0", rng.standard_normal((16, 24)).astype(np.float32) * 0.3),
             init("b0", rng.standard_normal(24).astype(np.float32) * 0.1),
             init("w1", rng.standard_normal((24, 8)).astype(np.float32) * 0.3),
             init("b1", rng.standard_normal(8).astype(np.float32) * 0.1)]
    m = model(nodes, [vi("x", F, ["batch", "rows", 16])], [vi("y", F, ["batch", "rows", 8])],
              inits, opset=17, ir=8)
    feeds = [{"x": rng.standard_normal((2, 3, 16)).astype(np.float32)} for _ in range(4)]
    return m, feeds


def cnn_float():
    rng = rng_for("cnn")
    w = lambda *s: (rng.standard_normal(s) * 0.3).astype(np.float32)  # noqa: E731
    nodes = [node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
             node("Relu", ["c0"], ["r0"]),
             node("Conv", ["r0", "w1", "b1"], ["c1"], group=8, pads=[1, 1, 1, 1], strides=[2, 2]),
             node("Relu", ["c1"], ["r1"]),
             node("MaxPool", ["r1"], ["p1"], kernel_shape=[2, 2], strides=[2, 2]),
             node("Conv", ["p1", "w2", "b2"], ["c2"]),
             node("Add", ["c2", "p1"], ["s2"]),
             node("GlobalAveragePool", ["s2"], ["g"]), node("Flatten", ["g"], ["f"]),
             node("Gemm", ["f", "w3", "b3"], ["y"], transB=1)]
    inits = [init("w0", w(8, 3, 3, 3)), init("b0", w(8)), init("w1", w(8, 1, 3, 3)),
             init("b1", w(8)), init("w2", w(8, 8, 1, 1)), init("b2", w(8)),
             init("w3", w(4, 8)), init("b3", w(4))]
    m = model(nodes, [vi("x", F, [1, 3, "h", "w"])], [vi("y", F, [1, 4])], inits, opset=17, ir=8)
    feeds = [{"x": (rng.standard_normal((1, 3, 12, 12)) * 2).astype(np.float32)} for _ in range(4)]
    return m, feeds


def ddq_models():
    out = {}
    for stem, build in (("mlp", mlp_float), ("cnn", cnn_float)):
        float_model, feeds = build()
        for recipe in ("qdq_pc", "qdq_pt", "qop") + (("dynamic",) if stem == "mlp" else ()):
            out["%s.%s" % (stem, recipe)] = quantized(float_model, recipe, feeds)
    return out


# ---- QOperator and com.microsoft ops with their parameters as inputs -----------------------

def scalar(name, elem):
    return vi(name, elem, [])


def hand_models():
    rng = rng_for("hand")
    m = {}
    m["qlinear_matmul_inputs"] = model(
        [node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"], ["y"])],
        [vi("a", U8, ["batch", "m", "k"]), scalar("as", F), scalar("az", U8),
         vi("b", I8, ["k", "n"]), vi("bs", F, ["n"]), vi("bz", I8, ["n"]), scalar("ys", F),
         scalar("yz", U8)], [vi("y", U8, None)])
    wq = rng.integers(-128, 128, (8, 2, 3, 3)).astype(np.int8)
    m["qlinear_conv"] = model(
        [node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz", "bias"], ["y"],
              group=2, pads=[1, 0, 1, 2], strides=[1, 2], dilations=[2, 1])],
        [vi("x", U8, ["n", 4, "h", "w"]), scalar("xs", F), scalar("xz", U8)],
        [vi("y", U8, None)],
        [init("w", wq), init("ws", (rng.random(8) * 0.01 + 0.001).astype(np.float32)),
         init("wz", np.zeros(8, np.int8)), init("ys", np.array(0.05, np.float32)),
         init("yz", np.array(128, np.uint8)),
         init("bias", rng.integers(-500, 500, 8).astype(np.int32))])
    m["matmul_integer_inputs"] = model(
        [node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])],
        [vi("a", U8, ["m", "k"]), vi("b", U8, ["batch", "k", "n"]), vi("az", U8, None),
         vi("bz", U8, None)], [vi("y", I32, None)])
    m["conv_integer"] = model(
        [node("ConvInteger", ["x", "w", "xz"], ["y"], auto_pad="SAME_UPPER", strides=[2, 1])],
        [vi("x", U8, [1, 3, "h", "w"]), scalar("xz", U8)], [vi("y", I32, None)],
        [init("w", rng.integers(0, 256, (4, 3, 3, 2)).astype(np.uint8))])
    m["quantize_inputs"] = model(
        [node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1),
         node("QuantizeLinear", ["x", "s1"], ["y1"])],
        [vi("x", F, ["a", "b", "c"]), vi("s", F, ["b"]), vi("z", I8, ["b"]), scalar("s1", F)],
        [vi("y", I8, None), vi("y1", U8, None)])
    m["dequantize_inputs"] = model(
        [node("DequantizeLinear", ["x", "s", "z"], ["y"], axis=-1, block_size=0),
         node("DequantizeLinear", ["x", "s1"], ["y1"])],
        [vi("x", I8, ["a", "b"]), vi("s", F, ["b"]), vi("z", I8, ["b"]), scalar("s1", F)],
        [vi("y", F, None), vi("y1", F, None)])
    m["dynamic_quantize"] = model(
        [node("DynamicQuantizeLinear", ["x"], ["y", "ys", "yz"])],
        [vi("x", F, ["a", "b"])], [vi("y", U8, None), vi("ys", F, None), vi("yz", U8, None)])
    m["ms_qlinear_binary"] = model(
        [node("QLinearAdd", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["c"], domain=MS),
         node("QLinearMul", ["a", "as", "az", "b", "bs", "bz", "cs", "cz"], ["d"], domain=MS)],
        [vi("a", U8, ["n", "c"]), scalar("as", F), scalar("az", U8), vi("b", U8, ["c"]),
         scalar("bs", F), scalar("bz", U8), scalar("cs", F), scalar("cz", U8)],
        [vi("c", U8, None), vi("d", U8, None)], ms=True)
    m["ms_qlinear_misc"] = model(
        [node("QLinearConcat", ["ys", "yz", "a", "as", "az", "b", "bs", "bz"], ["c"], domain=MS,
              axis=1),
         node("QLinearSigmoid", ["a", "as", "az", "ys", "yz"], ["s"], domain=MS),
         node("QLinearLeakyRelu", ["a", "as", "az", "ys", "yz"], ["l"], domain=MS, alpha=0.1),
         node("QLinearSoftmax", ["a", "as", "az", "ys", "yz"], ["x"], domain=MS, axis=-1,
              opset=13)],
        [vi("a", U8, ["n", "c"]), scalar("as", F), scalar("az", U8), vi("b", U8, ["n", "d"]),
         scalar("bs", F), scalar("bz", U8), scalar("ys", F), scalar("yz", U8)],
        [vi("c", U8, None), vi("s", U8, None), vi("l", U8, None), vi("x", U8, None)], ms=True)
    m["ms_qlinear_pool"] = model(
        [node("QLinearAveragePool", ["x", "xs", "xz", "ys", "yz"], ["p"], domain=MS,
              kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1], count_include_pad=1),
         node("QLinearGlobalAveragePool", ["x", "xs", "xz", "ys", "yz"], ["g"], domain=MS,
              channels_last=0)],
        [vi("x", U8, ["n", "c", "h", "w"]), scalar("xs", F), scalar("xz", U8), scalar("ys", F),
         scalar("yz", U8)], [vi("p", U8, None), vi("g", U8, None)], ms=True)
    m["ms_qgemm"] = model(
        [node("QGemm", ["a", "as", "az", "b", "bs", "bz", "c", "ys", "yz"], ["y"], domain=MS,
              transB=1, alpha=1.0)],
        [vi("a", U8, ["m", 8]), scalar("as", F), scalar("az", U8)], [vi("y", U8, None)],
        [init("b", rng.integers(-128, 128, (6, 8)).astype(np.int8)),
         init("bs", np.array(0.02, np.float32)), init("bz", np.array(0, np.int8)),
         init("c", rng.integers(-100, 100, 6).astype(np.int32)),
         init("ys", np.array(0.1, np.float32)), init("yz", np.array(100, np.uint8))], ms=True)
    m["ms_dynamic_quant_matmul"] = model(
        [node("DynamicQuantizeMatMul", ["x", "w", "ws", "wz", "bias"], ["y"], domain=MS),
         node("MatMulIntegerToFloat", ["a", "w", "as", "ws", "az", "wz", "bias"], ["z"],
              domain=MS)],
        [vi("x", F, ["m", 8]), vi("a", U8, ["m", 8]), scalar("as", F), scalar("az", U8)],
        [vi("y", F, None), vi("z", F, None)],
        [init("w", rng.integers(-128, 128, (8, 5)).astype(np.int8)),
         init("ws", (rng.random(5) * 0.02 + 0.001).astype(np.float32)),
         init("wz", np.zeros(5, np.int8)), init("bias", rng.standard_normal(5).astype(np.float32))],
        ms=True)
    m["qdq_lookup"] = model(
        [node("DequantizeLinear", ["x", "s", "z"], ["d"]), node("Sigmoid", ["d"], ["g"]),
         node("Mul", ["g", "d"], ["h"]), node("Tanh", ["h"], ["t"]),
         node("QuantizeLinear", ["t", "s2", "z2"], ["y"]),
         node("DequantizeLinear", ["x", "s", "z"], ["d2"]), node("Relu", ["d2"], ["r"]),
         node("QuantizeLinear", ["r", "s2", "z2"], ["y2"])],
        [vi("x", I8, ["a", "b"])], [vi("y", I8, None), vi("y2", I8, None)],
        [init("s", np.array(0.05, np.float32)), init("z", np.array(3, np.int8)),
         init("s2", np.array(0.01, np.float32)), init("z2", np.array(-5, np.int8))])
    return m


# ---- shape-driven and data-movement ops ----------------------------------------------------

def shape_models():
    m = {}
    x = vi("x", F, ["a", "b"])
    m["reshape"] = model([node("Reshape", ["x", "shape"], ["y"]),
                          node("Reshape", ["x", "shape"], ["z"], allowzero=1)],
                         [x, vi("shape", I64, ["r"])], [vi("y", F, None), vi("z", F, None)])
    m["expand"] = model([node("Expand", ["x", "shape"], ["y"])],
                        [x, vi("shape", I64, ["r"])], [vi("y", F, None)])
    m["constant_of_shape"] = model(
        [node("ConstantOfShape", ["shape"], ["y"],
              value=helper.make_tensor("v", TensorProto.INT8, [1], [7]))],
        [vi("shape", I64, ["r"])], [vi("y", I8, None)])
    m["pad"] = model([node("Pad", ["x", "pads", "v"], ["y"], mode="constant"),
                      node("Pad", ["x", "pads"], ["z"], mode="reflect"),
                      node("Pad", ["x", "pads"], ["w"], mode="edge")],
                     [x, vi("pads", I64, [4]), scalar("v", F)],
                     [vi("y", F, None), vi("z", F, None), vi("w", F, None)])
    m["slice"] = model([node("Slice", ["x", "starts", "ends", "axes", "steps"], ["y"])],
                       [vi("x", F, ["a", "b", "c"]), vi("starts", I64, ["k"]),
                        vi("ends", I64, ["k"]), vi("axes", I64, ["k"]), vi("steps", I64, ["k"])],
                       [vi("y", F, None)])
    x4 = vi("x", F, ["n", "c", "h", "w"])
    m["resize_scales"] = model(
        [node("Resize", ["x", "", "scales"], ["y"], mode="nearest",
              coordinate_transformation_mode="asymmetric", nearest_mode="floor"),
         node("Resize", ["x", "", "scales"], ["z"], mode="linear")],
        [x4, vi("scales", F, [4])], [vi("y", F, None), vi("z", F, None)], opset=19)
    m["resize_sizes"] = model(
        [node("Resize", ["x", "", "", "sizes"], ["y"], mode="nearest"),
         node("Resize", ["q", "", "", "sizes"], ["z"], mode="nearest",
              coordinate_transformation_mode="half_pixel", nearest_mode="round_prefer_ceil")],
        [x4, vi("q", U8, ["n", "c", "h", "w"]), vi("sizes", I64, [4])],
        [vi("y", F, None), vi("z", U8, None)], opset=19)
    m["range"] = model([node("Range", ["s", "l", "d"], ["y"]),
                        node("Range", ["fs", "fl", "fd"], ["z"])],
                       [scalar("s", I64), scalar("l", I64), scalar("d", I64), scalar("fs", F),
                        scalar("fl", F), scalar("fd", F)], [vi("y", I64, None), vi("z", F, None)])
    m["gather"] = model([node("Gather", ["x", "i"], ["y"], axis=1),
                         node("Gather", ["x", "i"], ["z"], axis=0)],
                        [x, vi("i", I64, ["p", "q"])], [vi("y", F, None), vi("z", F, None)])
    m["split"] = model([node("Split", ["x", "split"], ["y0", "y1", "y2"], axis=1)],
                       [x, vi("split", I64, [3])],
                       [vi("y0", F, None), vi("y1", F, None), vi("y2", F, None)])
    m["unsqueeze_squeeze"] = model(
        [node("Unsqueeze", ["x", "axes"], ["u"]), node("Squeeze", ["u", "axes"], ["y"]),
         node("Flatten", ["u"], ["f"], axis=2)],
        [x, vi("axes", I64, ["k"])], [vi("y", F, None), vi("f", F, None)])
    m["reduce"] = model(
        [node("ReduceSum", ["x", "axes"], ["s"], keepdims=1),
         node("ReduceMean", ["x", "axes"], ["m"], keepdims=0),
         node("ReduceMax", ["x", "axes"], ["x1"]), node("ReduceMin", ["x"], ["x2"])],
        [vi("x", F, ["a", "b", "c"]), vi("axes", I64, ["k"])],
        [vi("s", F, None), vi("m", F, None), vi("x1", F, None), vi("x2", F, None)], opset=18)
    m["movement"] = model(
        [node("Transpose", ["x"], ["t"], perm=[1, 0]), node("Concat", ["x", "t"], ["c"], axis=0),
         node("Where", ["cond", "x", "t"], ["w"]), node("Cast", ["x"], ["i"], to=TensorProto.INT8),
         node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16), node("Shape", ["c"], ["s"]),
         node("Equal", ["x", "t"], ["e"]), node("Not", ["e"], ["n"]),
         node("And", ["n", "cond"], ["o"])],
        [x, vi("cond", B, ["a", "b"])],
        [vi("c", F, None), vi("w", F, None), vi("i", I8, None), vi("h", TensorProto.FLOAT16, None),
         vi("s", I64, None), vi("o", B, None)])
    return m


# ---- float ops -----------------------------------------------------------------------------

def float_models():
    rng = rng_for("float")
    m = {}
    c = 6
    m["float_nn"] = model(
        [node("LayerNormalization", ["x", "g", "b"], ["ln"], axis=-1, epsilon=1e-5),
         node("Softmax", ["ln"], ["sm"], axis=-1), node("Gelu", ["sm"], ["ge"]),
         node("Erf", ["ge"], ["er"]), node("Pow", ["er", "two"], ["pw"]),
         node("Clip", ["pw", "lo", "hi"], ["cl"]), node("Sqrt", ["cl"], ["sq"]),
         node("Div", ["sq", "x"], ["dv"]), node("Log", ["dv"], ["lg"]),
         node("BatchNormalization", ["img", "g", "b", "mean", "var"], ["bn"]),
         node("AveragePool", ["bn"], ["ap"], kernel_shape=[2, 2], pads=[0, 1, 1, 0]),
         node("MaxPool", ["bn"], ["mp"], kernel_shape=[3, 1], dilations=[1, 2], ceil_mode=1),
         node("GlobalMaxPool", ["bn"], ["gm"]), node("HardSwish", ["ap"], ["hs"]),
         node("LeakyRelu", ["mp"], ["lr"], alpha=0.2)],
        [vi("x", F, ["n", c]), vi("img", F, ["n", c, "h", "w"]), scalar("lo", F), scalar("hi", F)],
        [vi("lg", F, None), vi("gm", F, None), vi("hs", F, None), vi("lr", F, None)],
        [init("g", rng.standard_normal(c).astype(np.float32)),
         init("b", rng.standard_normal(c).astype(np.float32)),
         init("mean", rng.standard_normal(c).astype(np.float32)),
         init("var", (rng.random(c) + 0.5).astype(np.float32)),
         init("two", np.array(2.0, np.float32))], opset=20)
    m["float_conv_inputs"] = model(
        [node("Conv", ["x", "w"], ["y"], pads=[1, 1, 0, 0], group=1),
         node("Conv", ["x", "w", "b"], ["z"], auto_pad="SAME_LOWER", strides=[2, 2])],
        [vi("x", F, ["n", "c", "h", "w"]), vi("w", F, ["m", "c", "kh", "kw"]), vi("b", F, ["m"])],
        [vi("y", F, None), vi("z", F, None)])
    m["float_matmul_inputs"] = model(
        [node("MatMul", ["a", "b"], ["y"]), node("Gemm", ["a2", "b2", "c"], ["z"], transA=1)],
        [vi("a", F, ["batch", "m", "k"]), vi("b", F, ["k", "n"]), vi("a2", F, ["k", "m"]),
         vi("b2", F, ["k", "n"]), vi("c", F, ["n"])], [vi("y", F, None), vi("z", F, None)])
    return m


# ---- MiniLM and the detector ---------------------------------------------------------------

def tiny_minilm_models():
    """build_minilm's graph at hidden 32 (4 heads of 8, feed-forward 64, vocabulary 64) with
    random weights, quantized the four ways the real one is."""
    import build_minilm as bm
    saved = bm.HIDDEN, bm.HEADS, bm.FFN, bm.HEAD_DIM
    bm.HIDDEN, bm.HEADS, bm.FFN = 32, 4, 64
    bm.HEAD_DIM = bm.HIDDEN // bm.HEADS
    try:
        rng = rng_for("tiny_minilm")
        h, f, layers = bm.HIDDEN, bm.FFN, 2
        t = {"embeddings.word_embeddings.weight": (64, h),
             "embeddings.position_embeddings.weight": (32, h),
             "embeddings.token_type_embeddings.weight": (2, h),
             "embeddings.LayerNorm.weight": (h,), "embeddings.LayerNorm.bias": (h,)}
        for i in range(layers):
            p = "encoder.layer.%d." % i
            for part in ("attention.self.query", "attention.self.key", "attention.self.value",
                         "attention.output.dense"):
                t[p + part + ".weight"], t[p + part + ".bias"] = (h, h), (h,)
            t[p + "intermediate.dense.weight"], t[p + "intermediate.dense.bias"] = (f, h), (f,)
            t[p + "output.dense.weight"], t[p + "output.dense.bias"] = (h, f), (h,)
            for norm in ("attention.output.LayerNorm", "output.LayerNorm"):
                t[p + norm + ".weight"], t[p + norm + ".bias"] = (h,), (h,)
        tensors = {k: (rng.standard_normal(s) * 0.2).astype(np.float32) for k, s in t.items()}
        float_model = bm.build_float_model(tensors, layers)
        feeds = []
        for _ in range(4):
            ids = rng.integers(0, 64, (2, 8)).astype(np.int64)
            feeds.append({"input_ids": ids, "attention_mask": np.ones_like(ids),
                          "token_type_ids": np.zeros_like(ids)})
        out = {}
        with tempfile.TemporaryDirectory() as tmp:
            float_path = os.path.join(tmp, "float.onnx")
            onnx.save(float_model, float_path)
            for recipe in ("qdq_pc", "qdq_pt", "qop", "dynamic"):
                path = os.path.join(tmp, recipe + ".onnx")
                common.quantize(float_path, path, recipe, None if recipe == "dynamic" else feeds,
                                nodes_to_exclude=bm.float_attention_nodes(layers))
                out["tiny_minilm." + recipe] = onnx.load(path)
        return out
    finally:
        bm.HIDDEN, bm.HEADS, bm.FFN, bm.HEAD_DIM = saved


def tool_model_paths():
    """The models tools/models builds (built on first use, as the tests do)."""
    import build_cnn
    import build_minilm
    paths = {}
    minilm = build_minilm.build(2, 32, ["qdq_pc", "qdq_pt", "qop", "dynamic"])
    for variant, path in minilm.items():
        paths[os.path.basename(path)[:-len(".onnx")]] = path
    for variant, path in build_cnn.build(32, ["qdq_pc", "qop"]).items():
        paths[os.path.basename(path)[:-len(".onnx")]] = path
    return paths


# ---- fuzz_run seeds ------------------------------------------------------------------------

def run_seeds(index, m, rng):
    """A few fuzz_run inputs for model `index` (see the module docstring for the format)."""
    seeds = []
    for dim_value, mode_int, mode_float in ((1, 1, 1), (3, 1, 0), (5, 3, 2)):
        header, symbols, counts = bytearray([index, 1]), {}, []
        constants = {t.name for t in m.graph.initializer}
        for inp in (i for i in m.graph.input if i.name not in constants):
            elem = inp.type.tensor_type.elem_type
            is_int = elem in (TensorProto.INT64, TensorProto.INT32)
            header.append(mode_int if is_int or elem == B else mode_float)
            count = 1
            for d in inp.type.tensor_type.shape.dim:
                if d.HasField("dim_value"):
                    count *= d.dim_value
                    continue
                if d.dim_param and d.dim_param in symbols:
                    count *= symbols[d.dim_param]
                    continue
                header.append(dim_value)
                if d.dim_param:
                    symbols[d.dim_param] = dim_value
                count *= dim_value
            counts.append(count * 8)
        values = rng.integers(0, 256, sum(counts), dtype=np.uint8).tobytes()
        seeds.append(bytes(header) + values)
    return seeds


# ---- main ----------------------------------------------------------------------------------

def oracle_models():
    import ops_quant_oracle as oracle
    for case in oracle.all_cases():
        yield case.case_id, oracle.BUILDERS[case.spec["builder"]](case.spec).model


def node_test_models():
    base = os.path.join(ROOT, "build", "onnx_node_tests")
    for dirpath, _, files in os.walk(base):
        if "model.onnx" in files:
            with open(os.path.join(dirpath, "model.onnx"), "rb") as f:
                yield os.path.basename(dirpath), f.read()


def write(path, data, force):
    if os.path.exists(path) and not force:
        return
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def seed_name(data):
    return hashlib.sha1(data).hexdigest()  # libFuzzer's own naming


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--force", action="store_true", help="rewrite files already present")
    args = parser.parse_args()
    models_dir = os.path.join(OUT, "models")
    names = run_model_names()
    wanted = set(names)
    have = {n for n in names if os.path.exists(os.path.join(models_dir, n + ".onnx"))}
    # The models are rebuilt when this script or the list changes.
    with open(__file__, "rb") as f, open(RUN_MODELS, "rb") as g:
        stamp = hashlib.sha256(f.read() + g.read()).hexdigest()
    stamp_path = os.path.join(models_dir, "STAMP")
    old_stamp = open(stamp_path).read() if os.path.exists(stamp_path) else ""
    if stamp != old_stamp:
        args.force = True
    built = {}
    if args.force or have != wanted:
        built.update(ddq_models())
        built.update(hand_models())
        built.update(shape_models())
        built.update(float_models())
        built.update(tiny_minilm_models())
        for stem, m in built.items():
            write(os.path.join(models_dir, stem + ".onnx"), m.SerializeToString(), True)
        for stem, path in tool_model_paths().items():
            target = os.path.join(models_dir, stem + ".onnx")
            if stem in wanted and (args.force or not os.path.exists(target)):
                shutil.copyfile(path, target + ".tmp")
                os.replace(target + ".tmp", target)
    missing = [n for n in names if not os.path.exists(os.path.join(models_dir, n + ".onnx"))]
    if missing:
        raise SystemExit("fuzz_seeds: error: no builder wrote %s" % ", ".join(missing))
    write(stamp_path, stamp.encode(), True)

    counts = {"loader": 0, "session": 0, "run": 0}

    def add(target, data):
        write(os.path.join(OUT, "seeds", target, seed_name(data)), data, args.force)
        counts[target] += 1

    for index, stem in enumerate(names):
        data = open(os.path.join(models_dir, stem + ".onnx"), "rb").read()
        for seed in run_seeds(index, onnx.load_from_string(data), rng_for("run/" + stem)):
            add("run", seed)
        if len(data) <= MAX_SEED_BYTES:
            add("loader", data)
            add("session", data)
    for _, data in list(oracle_models()) + list(node_test_models()):
        add("loader", data)
        add("session", data)
    print("fuzz_seeds: %d models in %s; seeds: %s" % (
        len(names), models_dir, ", ".join("%s %d" % kv for kv in counts.items())))


if __name__ == "__main__":
    main()
