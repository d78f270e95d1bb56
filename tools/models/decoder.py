"""A decoder-only transformer of the Llama / Qwen3 family as ONNX, in the layout Hugging
Face optimum's export (torch.onnx over transformers' modeling code) writes, plus an
independent float64 numpy forward pass of the same network and the checks `--verify` runs.

Graph (plain ai.onnx opset 21, float32, written with onnx.helper):
  Gather(embed_tokens, input_ids)
  RoPE tables from position_ids: MatMul(inv_freq [d/2, 1], Cast(position_ids)) -> Transpose
    -> Concat(freqs, freqs) -> Cos, Sin (transformers' rotary embedding as it traces)
  mask: Range over key and query positions, LessOrEqual (causal) And the padding mask ->
    Where(allowed, 0, float32 min), [batch, 1, seq, total_seq]
  per layer: RMSNorm (Pow 2, ReduceMean, Add eps, Sqrt, Reciprocal, Mul, Mul weight);
    q/k/v MatMul [in, out], Reshape to heads (Qwen3: per-head RMSNorm of q and k), Transpose;
    RoPE half-split (Slice, Neg, Concat = rotate_half; q*cos + rotate_half(q)*sin);
    cached form: Concat(past, new) on axis 2 = present.{i}.key / .value;
    repeat_kv: Unsqueeze, Expand, Reshape; MatMul(q, Transpose(k)) * head_dim^-0.5 + mask,
    Softmax, MatMul v, Transpose, Reshape, o_proj MatMul, residual Add;
    RMSNorm, gate/up MatMul, SiLU as gate * Sigmoid(gate), * up, down MatMul, residual Add
  RMSNorm, MatMul(lm_head) -> logits [batch, seq, vocab]; lm_head is the transposed
    embedding table (tied weights) stored as its own [hidden, vocab] initializer.

Weights are a dict of torch-layout arrays named as in Hugging Face checkpoints
(model.layers.{i}.self_attn.q_proj.weight [out, in], ...); the graph stores each
projection transposed ([in, out], initializer named like the parameter)."""

import dataclasses
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import common

OPSET = 21
IR_VERSION = 10  # opset 21 needs IR 10
FLOAT_MIN = float(np.finfo(np.float32).min)  # transformers' additive mask value
EXTERNAL_THRESHOLD = 1 << 30  # weights above 1 GiB go to external data (protobuf's 2 GB cap)


@dataclasses.dataclass(frozen=True)
class Config:
    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    mlp: int
    vocab: int
    eps: float
    rope_theta: float
    qk_norm: bool
    context: int


def layer_prefix(i):
    return "model.layers.%d." % i


class GraphWriter:
    """Nodes and initializers of one graph; node names follow optimum's (/model/layers.0/...)."""

    def __init__(self):
        self.nodes, self.initializers = [], []
        self._used = set()
        self._consts = {}

    def init(self, name, array):
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def const(self, value, dtype):
        """A shared small constant initializer."""
        array = np.array(value, dtype)
        key = (array.dtype.str, array.shape, array.tobytes())
        if key not in self._consts:
            self._consts[key] = self.init("const_%d" % len(self._consts), array)
        return self._consts[key]

    def op(self, op_type, inputs, name, output=None, **attrs):
        assert name not in self._used, name
        self._used.add(name)
        out = output or name + "_output_0"
        self.nodes.append(helper.make_node(op_type, inputs, [out], name=name, **attrs))
        return out

    def rms_norm(self, x, weight, name, eps):
        sq = self.op("Pow", [x, self.const(2.0, np.float32)], name + "/Pow")
        mean = self.op("ReduceMean", [sq, self.const([-1], np.int64)], name + "/ReduceMean",
                       keepdims=1)
        root = self.op("Sqrt", [self.op("Add", [mean, self.const(eps, np.float32)],
                                        name + "/Add")], name + "/Sqrt")
        normed = self.op("Mul", [x, self.op("Reciprocal", [root], name + "/Reciprocal")],
                         name + "/Mul")
        return self.op("Mul", [weight, normed], name + "/Mul_1")


def _rotate_half(g, x, half, name):
    """cat(-x[..., half:], x[..., :half]) as the exporter writes it."""
    axis = g.const([-1], np.int64)
    x1 = g.op("Slice", [x, g.const([0], np.int64), g.const([half], np.int64), axis],
              name + "/Slice")
    x2 = g.op("Slice", [x, g.const([half], np.int64), g.const([np.iinfo(np.int64).max], np.int64),
                        axis], name + "/Slice_1")
    return g.op("Concat", [g.op("Neg", [x2], name + "/Neg"), x1], name + "/Concat", axis=-1)


def _rope(g, x, cos, sin, half, name):
    return g.op("Add", [g.op("Mul", [x, cos], name + "/Mul"),
                        g.op("Mul", [_rotate_half(g, x, half, name), sin], name + "/Mul_1")],
                name + "/Add")


def build_graph(cfg, weights, cached):
    """ModelProto of the decoder (weights in the proto; `save` moves large ones out)."""
    g = GraphWriter()
    d, half, rep = cfg.head_dim, cfg.head_dim // 2, cfg.heads // cfg.kv_heads
    embed = g.init("model.embed_tokens.weight", weights["model.embed_tokens.weight"])
    x = g.op("Gather", [embed, "input_ids"], "/model/embed_tokens/Gather")

    # Rotary tables [batch, 1, seq, head_dim] from the positions.
    inv_freq = 1.0 / (cfg.rope_theta ** (np.arange(0, d, 2, dtype=np.int64).astype(np.float32) / d))
    inv_freq = g.init("model.rotary_emb.inv_freq", inv_freq.astype(np.float32).reshape(half, 1))
    pos = g.op("Cast", [g.op("Unsqueeze", ["position_ids", g.const([1], np.int64)],
                             "/model/rotary_emb/Unsqueeze")], "/model/rotary_emb/Cast",
               to=TensorProto.FLOAT)
    freqs = g.op("Transpose", [g.op("MatMul", [inv_freq, pos], "/model/rotary_emb/MatMul")],
                 "/model/rotary_emb/Transpose", perm=[0, 2, 1])
    emb = g.op("Concat", [freqs, freqs], "/model/rotary_emb/Concat", axis=-1)
    heads_axis = g.const([1], np.int64)
    cos = g.op("Unsqueeze", [g.op("Cos", [emb], "/model/rotary_emb/Cos"), heads_axis],
               "/model/rotary_emb/Unsqueeze_cos")
    sin = g.op("Unsqueeze", [g.op("Sin", [emb], "/model/rotary_emb/Sin"), heads_axis],
               "/model/rotary_emb/Unsqueeze_sin")

    # Additive mask [batch, 1, seq, total]: key k is visible to query q (at absolute position
    # past + q) when k <= past + q and attention_mask[k] is 1.
    zero, one = g.const(0, np.int64), g.const(1, np.int64)
    total = g.op("Squeeze", [g.op("Shape", ["attention_mask"], "/model/mask/Shape_total",
                                  start=1, end=2)], "/model/mask/Squeeze_total")
    seq = g.op("Squeeze", [g.op("Shape", ["input_ids"], "/model/mask/Shape_seq", start=1, end=2)],
               "/model/mask/Squeeze_seq")
    past = g.op("Sub", [total, seq], "/model/mask/Sub")
    key_pos = g.op("Unsqueeze", [g.op("Range", [zero, total, one], "/model/mask/Range_key"),
                                 g.const([0], np.int64)], "/model/mask/Unsqueeze_key")
    query_pos = g.op("Unsqueeze", [g.op("Range", [past, total, one], "/model/mask/Range_query"),
                                   g.const([1], np.int64)], "/model/mask/Unsqueeze_query")
    causal = g.op("LessOrEqual", [key_pos, query_pos], "/model/mask/LessOrEqual")
    padding = g.op("Cast", [g.op("Unsqueeze", ["attention_mask", g.const([1, 2], np.int64)],
                                 "/model/mask/Unsqueeze_padding")], "/model/mask/Cast",
                   to=TensorProto.BOOL)
    allowed = g.op("And", [causal, padding], "/model/mask/And")
    mask = g.op("Where", [allowed, g.const(0.0, np.float32), g.const(FLOAT_MIN, np.float32)],
                "/model/mask/Where")

    q_shape = g.const([0, 0, cfg.heads, d], np.int64)
    kv_shape = g.const([0, 0, cfg.kv_heads, d], np.int64)
    rep_shape = g.const([1, 1, rep, 1, 1], np.int64)
    merged_heads = g.const([0, cfg.heads, -1, d], np.int64)
    hidden_shape = g.const([0, 0, cfg.heads * d], np.int64)
    scale = g.const(1.0 / math.sqrt(d), np.float32)
    kv_inputs, kv_outputs = [], []
    for i in range(cfg.layers):
        p, n = layer_prefix(i), "/model/layers.%d" % i

        def w(part):
            return g.init(p + part, weights[p + part].T)

        def proj(h, part, name):
            return g.op("MatMul", [h, w(part + ".weight")], n + name + "/MatMul")

        norm = p + "input_layernorm.weight"
        h = g.rms_norm(x, g.init(norm, weights[norm]), n + "/input_layernorm", cfg.eps)
        states = {}
        for part, shape, count in (("q", q_shape, cfg.heads), ("k", kv_shape, cfg.kv_heads),
                                   ("v", kv_shape, cfg.kv_heads)):
            y = g.op("Reshape", [proj(h, "self_attn.%s_proj" % part, "/self_attn/%s_proj" % part),
                                 shape], n + "/self_attn/Reshape_" + part)
            if cfg.qk_norm and part in "qk":
                norm = p + "self_attn.%s_norm.weight" % part
                y = g.rms_norm(y, g.init(norm, weights[norm]), n + "/self_attn/%s_norm" % part,
                               cfg.eps)
            states[part] = g.op("Transpose", [y], n + "/self_attn/Transpose_" + part,
                                perm=[0, 2, 1, 3])
        q = _rope(g, states["q"], cos, sin, half, n + "/self_attn/rope_q")
        k = _rope(g, states["k"], cos, sin, half, n + "/self_attn/rope_k")
        v = states["v"]
        if cached:
            names = ["past_key_values.%d.key" % i, "past_key_values.%d.value" % i]
            kv_inputs += names
            k = g.op("Concat", [names[0], k], n + "/self_attn/Concat_key", "present.%d.key" % i,
                     axis=2)
            v = g.op("Concat", [names[1], v], n + "/self_attn/Concat_value",
                     "present.%d.value" % i, axis=2)
            kv_outputs += ["present.%d.key" % i, "present.%d.value" % i]
        if rep > 1:
            def repeat_kv(t, s):
                name = n + "/self_attn/repeat_kv_" + s
                t = g.op("Unsqueeze", [t, g.const([2], np.int64)], name + "/Unsqueeze")
                t = g.op("Expand", [t, rep_shape], name + "/Expand")
                return g.op("Reshape", [t, merged_heads], name + "/Reshape")
            k, v = repeat_kv(k, "k"), repeat_kv(v, "v")
        kt = g.op("Transpose", [k], n + "/self_attn/Transpose_kt", perm=[0, 1, 3, 2])
        scores = g.op("Mul", [g.op("MatMul", [q, kt], n + "/self_attn/MatMul_scores"), scale],
                      n + "/self_attn/Mul_scale")
        probs = g.op("Softmax", [g.op("Add", [scores, mask], n + "/self_attn/Add_mask")],
                     n + "/self_attn/Softmax", axis=-1)
        ctx = g.op("MatMul", [probs, v], n + "/self_attn/MatMul_context")
        ctx = g.op("Reshape", [g.op("Transpose", [ctx], n + "/self_attn/Transpose_context",
                                    perm=[0, 2, 1, 3]), hidden_shape],
                   n + "/self_attn/Reshape_context")
        x = g.op("Add", [x, proj(ctx, "self_attn.o_proj", "/self_attn/o_proj")], n + "/Add")
        h = g.rms_norm(x, g.init(p + "post_attention_layernorm.weight",
                                 weights[p + "post_attention_layernorm.weight"]),
                       n + "/post_attention_layernorm", cfg.eps)
        gate = proj(h, "mlp.gate_proj", "/mlp/gate_proj")
        act = g.op("Mul", [gate, g.op("Sigmoid", [gate], n + "/mlp/act_fn/Sigmoid")],
                   n + "/mlp/act_fn/Mul")
        up = proj(h, "mlp.up_proj", "/mlp/up_proj")
        down = proj(g.op("Mul", [act, up], n + "/mlp/Mul"), "mlp.down_proj", "/mlp/down_proj")
        x = g.op("Add", [x, down], n + "/Add_1")
    x = g.rms_norm(x, g.init("model.norm.weight", weights["model.norm.weight"]), "/model/norm",
                   cfg.eps)
    lm_head = g.init("lm_head.weight", weights["model.embed_tokens.weight"].T)
    g.op("MatMul", [x, lm_head], "/lm_head/MatMul", "logits")

    seq_dims = ["batch", "seq"]
    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, seq_dims),
              helper.make_tensor_value_info("attention_mask", TensorProto.INT64,
                                            ["batch", "total_seq" if cached else "seq"]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64, seq_dims)]
    inputs += [helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                             ["batch", cfg.kv_heads, "past_seq", d])
               for name in kv_inputs]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT,
                                             ["batch", "seq", cfg.vocab])]
    outputs += [helper.make_tensor_value_info(name, TensorProto.FLOAT,
                                              ["batch", cfg.kv_heads, "total_seq", d])
                for name in kv_outputs]
    graph = helper.make_graph(g.nodes, cfg.name + (" (KV cache)" if cached else ""), inputs,
                              outputs, g.initializers)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              ir_version=IR_VERSION, producer_name="octet tools/models")
    for key, value in dataclasses.asdict(cfg).items():
        model.metadata_props.add(key=key, value=str(value))
    return model


def save(model, path):
    """Saves with onnx's checker; a model whose weights pass 1 GiB keeps them in
    `<file>.data` beside it (external data, written in initializer order: same bytes every
    build)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    data_name = os.path.basename(path) + ".data"
    if sum(t.ByteSize() for t in model.graph.initializer) < EXTERNAL_THRESHOLD:
        common.save(model, path)
        return
    with open(os.path.join(os.path.dirname(path), data_name + ".tmp"), "wb") as data:
        for tensor in model.graph.initializer:
            if len(tensor.raw_data) < 1024:
                continue
            offset = data.tell()
            data.write(tensor.raw_data)
            tensor.ClearField("raw_data")
            tensor.data_location = TensorProto.EXTERNAL
            for key, value in (("location", data_name), ("offset", str(offset)),
                               ("length", str(data.tell() - offset))):
                tensor.external_data.add(key=key, value=value)
    with open(tmp, "wb") as f:
        f.write(model.SerializeToString())
    os.replace(os.path.join(os.path.dirname(path), data_name + ".tmp"),
               os.path.join(os.path.dirname(path), data_name))
    os.replace(tmp, path)
    onnx.checker.check_model(path)


# --- numpy reference -------------------------------------------------------------------


def _rms(x, w, eps):
    return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * w


def reference_forward(cfg, weights, input_ids, attention_mask, position_ids):
    """float64 logits [batch, seq, vocab] of the whole sequence, straight from the weights."""
    t = {}

    def get(name):
        if name not in t:
            t[name] = weights[name].astype(np.float64)
        return t[name]

    batch, seq = input_ids.shape
    d, half = cfg.head_dim, cfg.head_dim // 2
    x = get("model.embed_tokens.weight")[input_ids]
    inv_freq = cfg.rope_theta ** (-np.arange(0, d, 2) / d)
    angles = position_ids[..., None].astype(np.float64) * inv_freq  # [b, s, d/2]
    cos = np.cos(np.concatenate([angles, angles], -1))[:, None]
    sin = np.sin(np.concatenate([angles, angles], -1))[:, None]
    visible = (np.arange(seq)[None, :] <= np.arange(seq)[:, None])[None, None] & \
        attention_mask.astype(bool)[:, None, None, :]

    def rope(y):  # y [b, heads, s, d]
        return y * cos + np.concatenate([-y[..., half:], y[..., :half]], -1) * sin

    for i in range(cfg.layers):
        p = layer_prefix(i)

        def heads(h, part, count):
            y = (h @ get(p + "self_attn.%s_proj.weight" % part).T).reshape(batch, seq, count, d)
            if cfg.qk_norm and part in "qk":
                y = _rms(y, get(p + "self_attn.%s_norm.weight" % part), cfg.eps)
            return y.transpose(0, 2, 1, 3)

        h = _rms(x, get(p + "input_layernorm.weight"), cfg.eps)
        q = rope(heads(h, "q", cfg.heads))
        k = np.repeat(rope(heads(h, "k", cfg.kv_heads)), cfg.heads // cfg.kv_heads, axis=1)
        v = np.repeat(heads(h, "v", cfg.kv_heads), cfg.heads // cfg.kv_heads, axis=1)
        scores = np.where(visible, q @ k.transpose(0, 1, 3, 2) / math.sqrt(d), -np.inf)
        scores = np.where(visible.any(-1, keepdims=True), scores, 0.0)  # all-padding query rows
        probs = np.exp(scores - scores.max(-1, keepdims=True))
        probs /= probs.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(batch, seq, cfg.heads * d)
        x = x + ctx @ get(p + "self_attn.o_proj.weight").T
        h = _rms(x, get(p + "post_attention_layernorm.weight"), cfg.eps)
        gate = h @ get(p + "mlp.gate_proj.weight").T
        up = h @ get(p + "mlp.up_proj.weight").T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ get(p + "mlp.down_proj.weight").T
        for name in [n for n in t if n.startswith(p)]:
            del t[name]  # one layer in float64 at a time
    return _rms(x, get("model.norm.weight"), cfg.eps) @ get("model.embed_tokens.weight").T


# --- feeds and runs ----------------------------------------------------------------------


def batch_feeds(sequences, pad_id=0):
    """Left-padded batch of token id lists: input_ids, attention_mask, position_ids (positions
    count real tokens only, as transformers' generate makes them)."""
    seq = max(len(s) for s in sequences)
    ids = np.full((len(sequences), seq), pad_id, np.int64)
    mask = np.zeros((len(sequences), seq), np.int64)
    for row, s in enumerate(sequences):
        ids[row, seq - len(s):] = s
        mask[row, seq - len(s):] = 1
    positions = np.maximum(np.cumsum(mask, 1) - 1, 0)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions}


def empty_past(cfg, batch):
    return {"past_key_values.%d.%s" % (i, kind): np.zeros((batch, cfg.kv_heads, 0, cfg.head_dim),
                                                          np.float32)
            for i in range(cfg.layers) for kind in ("key", "value")}


class CachedRunner:
    """Drives a cached-form session (anything with run(None, feeds) -> [logits, present...])
    one chunk at a time for a batch of one, feeding the presents back; with kv_cache (an
    octet KV cache of the session's) octet holds the past instead."""

    def __init__(self, cfg, session, output_names, kv_cache=None):
        self.cfg, self.session, self.names = cfg, session, output_names
        self.kv_cache = kv_cache
        self.past = {} if kv_cache is not None else empty_past(cfg, 1)
        self.length = 0

    def step(self, tokens):
        n = len(tokens)
        feeds = {"input_ids": np.array([tokens], np.int64),
                 "attention_mask": np.ones((1, self.length + n), np.int64),
                 "position_ids": np.arange(self.length, self.length + n, dtype=np.int64)[None]}
        feeds.update(self.past)
        self.length += n
        if self.kv_cache is not None:
            return self.session.run(["logits"], feeds, kv_cache=self.kv_cache)[0][0]
        outputs = dict(zip(self.names, self.session.run(None, feeds)))
        for name in self.past:
            self.past[name] = outputs[name.replace("past_key_values", "present")]
        return outputs["logits"][0]


def ort_session(path):
    import onnxruntime as ort
    return ort.InferenceSession(path, providers=["CPUExecutionProvider"])


def greedy(cfg, session, prompt_ids, steps, eos_id=None):
    """Greedy decode with a cached-form session; returns the generated ids."""
    runner = CachedRunner(cfg, session, [o.name for o in session.get_outputs()])
    logits = runner.step(list(prompt_ids))
    out = []
    for _ in range(steps):
        token = int(np.argmax(logits[-1]))
        out.append(token)
        if token == eos_id:
            break
        logits = runner.step([token])
    return out


def verify(cfg, weights, plain_path, cached_path, sequences, log=print):
    """The float ONNX model (ONNX Runtime) against the numpy reference on a left-padded batch,
    and the cached form (prefill then one token per step) against the whole-sequence form.
    Returns (max |diff| to the reference, max |diff| cached vs whole, logit std)."""
    feeds = batch_feeds(sequences)
    (logits,) = ort_session(plain_path).run(None, feeds)
    ref = reference_forward(cfg, weights, **feeds)
    real = feeds["attention_mask"].astype(bool)
    ref_diff = float(np.abs(logits[real] - ref[real]).max())
    log("float ONNX vs numpy float64 reference: max |diff| %.2e (logits std %.2f, batch %d, "
        "seq %d, left-padded)" % (ref_diff, ref[real].std(), *feeds["input_ids"].shape))
    session = ort_session(cached_path)
    cache_diff = 0.0
    for s in sequences:
        (whole,) = ort_session(plain_path).run(None, batch_feeds([s]))
        runner = CachedRunner(cfg, session, [o.name for o in session.get_outputs()])
        prefill = max(1, len(s) // 2)
        steps = [runner.step(s[:prefill])] + [runner.step([tok]) for tok in s[prefill:]]
        cache_diff = max(cache_diff, float(np.abs(np.concatenate(steps) - whole[0]).max()))
    log("cached form (prefill half, then one token per step) vs whole sequence: max |diff| %.2e"
        % cache_diff)
    return ref_diff, cache_diff, float(ref[real].std())


# --- building ----------------------------------------------------------------------------

FORMS = ("plain", "cached")


def model_path(cfg, form, variant):
    """build/models/<name>.<variant>.onnx (whole sequence) or <name>.cached.<variant>.onnx."""
    infix = "" if form == "plain" else form + "."
    return os.path.join(common.MODELS_DIR, "%s.%s%s.onnx" % (cfg.name, infix, variant))


def tokenizer_file(cfg):
    return os.path.join(common.MODELS_DIR, cfg.name + ".tokenizer.json")


def read_prompts(name="llm_prompts.txt"):
    with open(os.path.join(common.DATA_DIR, name), encoding="utf-8") as f:
        return [line.rstrip("\n") for line in f if line.strip()]


def build(cfg, weights_fn, tokenizer_fn, forms=FORMS, variants=("fp32",), force=False,
          log=lambda *a: None):
    """Builds the float model in each form, its tokenizer file and the requested quantized
    variants (quantize_llm.VARIANTS); returns {(form, variant): path}. Files already in the
    cache are kept unless force. weights_fn / tokenizer_fn are called only when needed."""
    import quantize_llm
    paths, weights = {}, None
    tok_path = tokenizer_file(cfg)
    if force or not os.path.exists(tok_path):
        os.makedirs(common.MODELS_DIR, exist_ok=True)
        tokenizer_fn().save(tok_path)
        log("wrote", tok_path)
    for form in forms:
        float_path = model_path(cfg, form, "fp32")
        if force or not os.path.exists(float_path):
            weights = weights if weights is not None else weights_fn()
            save(build_graph(cfg, weights, form == "cached"), float_path)
            log("wrote", float_path)
        paths[form, "fp32"] = float_path
        for variant in variants:
            if variant == "fp32":
                continue
            path = model_path(cfg, form, variant)
            if force or not os.path.exists(path):
                quantize_llm.quantize(cfg, float_path, path, variant, form == "cached",
                                      calibration_sequences(cfg))
                log("wrote", path)
            paths[form, variant] = path
    return paths


def load_tokenizer(cfg):
    return common.bpe().Tokenizer.from_file(tokenizer_file(cfg))


def calibration_sequences(cfg):
    """Token ids of the prompts the A8W8 forms calibrate on (tools/models/data/llm_prompts.txt)."""
    tok = load_tokenizer(cfg)
    return [tok.encode(p) for p in read_prompts()]


def parse_variants(parser, text):
    import quantize_llm
    known = ("fp32",) + quantize_llm.VARIANTS
    variants = list(known) if text == "all" else [v for v in text.split(",") if v]
    unknown = set(variants) - set(known)
    if unknown:
        parser.error("unknown variants %s (known: %s)" % (sorted(unknown), ", ".join(known)))
    return variants


def parse_forms(parser, text):
    forms = [f for f in text.split(",") if f]
    if not forms or set(forms) - set(FORMS):
        parser.error("--forms takes plain, cached or both")
    return forms


def report(paths):
    for (form, variant), path in sorted(paths.items()):
        size = os.path.getsize(path) + (os.path.getsize(path + ".data")
                                        if os.path.exists(path + ".data") else 0)
        print("%-6s %-16s %8.1f MB  %s  sha256 %s" % (form, variant, size / 1e6, path,
                                                     common.sha256(path)[:16]))
