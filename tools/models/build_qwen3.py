#!/usr/bin/env python3
"""Builds a decoder with Qwen3-0.6B's architecture and seeded random weights as ONNX
(tools/models/decoder.py's layout, opset 21, float32), whole-sequence and KV-cache forms,
and its quantized forms (tools/models/quantize_llm.py). Deterministic; needs no download.

Qwen3-0.6B: 28 layers, hidden 1024, 16 query / 8 KV heads of head_dim 128, SiLU-gated MLP
3072, vocab 151936, RMSNorm eps 1e-6, per-head q/k RMSNorm before RoPE (theta 1e6,
half-split), tied embeddings. --layers N keeps the first N layers (CI: 2); --tiny shrinks
every width for unit tests (hidden 64, 4 / 2 heads of 16, MLP 128, vocab 512).

Weights: normal(0, 1) * 0.64 / sqrt(fan_in) for every projection (0.02 at fan-in 1024),
normal * 2 / sqrt(hidden) for the tied embedding (logits of std ~2: a next-token
distribution neither flat nor one-hot; at 1.5 it is nearly uniform, at 2.5 the input token
carried by the residual wins 85% of positions), norms 1, seed 0.

Tokenizer (`<name>.tokenizer.json`): byte-level, the 256 GPT-2 byte tokens and
<|endoftext|> (id 256), no merges: the weights are random, so any vocabulary serves, and
this one fits every form (--tiny's vocab is 512).

Writes build/models/qwen3-L{n}[-tiny].{variant}.onnx and qwen3-L{n}[-tiny].cached.{variant}.onnx
(the 28-layer float model keeps its weights in <file>.data)."""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402
import decoder  # noqa: E402
import quantize_llm  # noqa: E402

SEED = 0
FULL = dict(layers=28, hidden=1024, heads=16, kv_heads=8, head_dim=128, mlp=3072, vocab=151936)
TINY = dict(layers=2, hidden=64, heads=4, kv_heads=2, head_dim=16, mlp=128, vocab=512)
EOS_ID = 256


def config(layers=28, tiny=False):
    dims = dict(TINY if tiny else FULL, layers=layers)
    name = "qwen3-L%d%s" % (layers, "-tiny" if tiny else "")
    return decoder.Config(name=name, eps=1e-6, rope_theta=1e6, qk_norm=True, context=40960,
                          **dims)


def random_weights(cfg, seed=SEED):
    rng = np.random.default_rng(seed)

    def normal(shape, std):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)

    def linear(out, fan_in):
        return normal((out, fan_in), 0.64 / np.sqrt(fan_in))

    ones = np.ones
    w = {"model.embed_tokens.weight": normal((cfg.vocab, cfg.hidden), 2 / np.sqrt(cfg.hidden))}
    q, kv = cfg.heads * cfg.head_dim, cfg.kv_heads * cfg.head_dim
    for i in range(cfg.layers):
        p = decoder.layer_prefix(i)
        w[p + "input_layernorm.weight"] = ones(cfg.hidden, np.float32)
        w[p + "self_attn.q_proj.weight"] = linear(q, cfg.hidden)
        w[p + "self_attn.k_proj.weight"] = linear(kv, cfg.hidden)
        w[p + "self_attn.v_proj.weight"] = linear(kv, cfg.hidden)
        w[p + "self_attn.o_proj.weight"] = linear(cfg.hidden, q)
        w[p + "self_attn.q_norm.weight"] = ones(cfg.head_dim, np.float32)
        w[p + "self_attn.k_norm.weight"] = ones(cfg.head_dim, np.float32)
        w[p + "post_attention_layernorm.weight"] = ones(cfg.hidden, np.float32)
        w[p + "mlp.gate_proj.weight"] = linear(cfg.mlp, cfg.hidden)
        w[p + "mlp.up_proj.weight"] = linear(cfg.mlp, cfg.hidden)
        w[p + "mlp.down_proj.weight"] = linear(cfg.hidden, cfg.mlp)
    w["model.norm.weight"] = ones(cfg.hidden, np.float32)
    return w


def tokenizer():
    bpe = common.bpe()
    tokens = list(bpe.bytes_to_unicode().values()) + ["<|endoftext|>"]
    return bpe.Tokenizer(tokens, [], [], special_ids=[EOS_ID], eos_id=EOS_ID)


def build(layers=28, tiny=False, forms=decoder.FORMS, variants=("fp32",), force=False,
          log=lambda *a: None):
    cfg = config(layers, tiny)
    return cfg, decoder.build(cfg, lambda: random_weights(cfg), tokenizer, forms, variants,
                              force, log)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=None, help="decoder layers (28; --tiny: 2)")
    parser.add_argument("--tiny", action="store_true", help="every width shrunk (unit tests)")
    parser.add_argument("--forms", default=",".join(decoder.FORMS), help="plain,cached")
    parser.add_argument("--variants", default="fp32",
                        help="fp32 and any of %s, or all" % ",".join(quantize_llm.VARIANTS))
    parser.add_argument("--force", action="store_true", help="rebuild models already cached")
    parser.add_argument("--verify", action="store_true",
                        help="check against the numpy reference and cached against whole")
    args = parser.parse_args()
    layers = args.layers or (2 if args.tiny else 28)
    variants = decoder.parse_variants(parser, args.variants)
    forms = decoder.parse_forms(parser, args.forms)
    cfg, paths = build(layers, args.tiny, forms, variants, args.force, log=print)
    decoder.report(paths)
    if args.verify:
        tok = decoder.load_tokenizer(cfg)
        sequences = [tok.encode(p) for p in decoder.read_prompts()[:4]]
        decoder.verify(cfg, random_weights(cfg), paths["plain", "fp32"],
                       paths["cached", "fp32"], sequences)
        # Next-token distribution of the random model: not flat, not one-hot.
        import onnxruntime  # noqa: F401
        (logits,) = decoder.ort_session(paths["plain", "fp32"]).run(
            None, decoder.batch_feeds(sequences[:1]))
        p = np.exp(logits[0] - logits[0].max(-1, keepdims=True))
        p /= p.sum(-1, keepdims=True)
        entropy = -(p * np.log(np.maximum(p, 1e-30))).sum(-1)
        print("next-token distribution: entropy %.2f nats (uniform %.2f), top-1 p %.3f (mean "
              "over positions)" % (entropy.mean(), np.log(cfg.vocab), p.max(-1).mean()))


if __name__ == "__main__":
    main()
