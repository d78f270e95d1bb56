#!/usr/bin/env python3
"""Accuracy of quantized decoder models against their float model, seed 000's way (issue 18
part 6): for each prompt, greedy-decode --steps tokens with the float model (ONNX Runtime);
then, teacher-forced on the float model's tokens, compare at every step the next-token
distribution of each quantized model, run by each engine, with the float model's: mean
KL(float || quant) in nats and top-1 agreement.

ONNX Runtime runs each 8-bit model in its exact form on this CPU (tools/ort_exact.py: where
its u8 x s8 kernel saturates, without VNNI, the same product in u8 x u8 form); --ort-as-is
runs the files unchanged, as a user of this CPU gets them.

The gate (docs/accuracy.md, "Decoders"): ONNX Runtime's own runs of a quantized model in
three configurations (engines ort: ORT_ENABLE_ALL, ort-noopt: ORT_DISABLE_ALL, ort-int8:
ORT_ENABLE_ALL with session.qdqisint8allowed=1) give the floor, their largest mean KL and
their smallest top-1 agreement; octet passes when its mean KL is at most 1.05 x that KL
and its top-1 agreement at least that top-1. --engines gate runs them all and prints a
verdict per octet row; the tool then exits 1 when a row fails.

Models are the files tools/models/build_qwen3.py / build_smollm2.py write, in either form
(whole sequence, or KV cache: prefill then one token per step); the tokenizer is found
beside the float model (<name>.tokenizer.json). An engine that refuses a model (or fails
running it) gets its error printed, and, for octet, the operators of the model it has no
kernel for; the other rows go on.

    python tools/llm_accuracy.py build/models/smollm2-135m.fp32.onnx \\
        build/models/smollm2-135m.a8w8.onnx build/models/smollm2-135m.nbits_b32_acc4.onnx
"""

import argparse
import json
import os
import sys

import numpy as np
import onnx

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "models"))
import common  # noqa: E402
import ort_exact  # noqa: E402

# octet-int8: octet with float_matmul="int8" (a 4-bit DequantizeLinear -> MatMul at
# accuracy level 4, as ONNX Runtime's default options run it). The ort engines are the
# configurations of the floor (module doc).
ORT_ENGINES = ("ort", "ort-noopt", "ort-int8")
ENGINES = ORT_ENGINES + ("octet", "octet-int8")
GATE_ENGINES = ORT_ENGINES + ("octet",)
MARGIN = 1.05  # octet's mean KL may exceed the floor's by 5%, as in tools/check_int8.py


EIGHT_BIT = {"QuantizeLinear", "DequantizeLinear", "QLinearMatMul", "MatMulInteger"}


def open_session(engine, path, threads, ort_as_is=False):
    if engine in ORT_ENGINES:
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        if engine == "ort-noopt":
            options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
        if engine == "ort-int8":
            options.add_session_config_entry("session.qdqisint8allowed", "1")
        model = path
        nodes = onnx.load(path, load_external_data=False).graph.node
        if not ort_as_is and ort_exact.oracle_form() == "u8" and any(
                n.op_type in EIGHT_BIT for n in nodes):
            model = ort_exact.for_ort(onnx.load(path), {})[0].SerializeToString()
        return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    import octet
    return octet.InferenceSession(path, threads=threads,
                                  float_matmul="int8" if engine == "octet-int8" else "float")


def past_shapes(path):
    """{past input name: (kv_heads, head_dim)} from the model's input types."""
    model = onnx.load(path, load_external_data=False)
    shapes = {}
    for value in model.graph.input:
        if value.name.startswith("past_key_values."):
            dims = value.type.tensor_type.shape.dim
            shapes[value.name] = (dims[1].dim_value, dims[3].dim_value)
    return shapes


class Decoder:
    """One session of a decoder model in either form; logits(tokens) gives the next-token
    logits after every prefix of tokens (whole form: one run; cached form: prefill of
    `prefill` tokens, then one token per run)."""

    def __init__(self, session, path):
        self.session = session
        self.past = past_shapes(path)
        self.outputs = [o.name for o in session.get_outputs()]

    def _run(self, tokens, past, length):
        n = len(tokens)
        feeds = {"input_ids": np.array([tokens], np.int64),
                 "attention_mask": np.ones((1, length + n), np.int64),
                 "position_ids": np.arange(length, length + n, dtype=np.int64)[None]}
        feeds.update(past)
        return dict(zip(self.outputs, self.session.run(None, feeds)))

    def logits(self, tokens, prefill):
        if not self.past:
            return self._run(list(tokens), {}, 0)["logits"][0]
        past = {name: np.zeros((1, kv, 0, d), np.float32) for name, (kv, d) in self.past.items()}
        chunks, length = [list(tokens[:prefill])] + [[t] for t in tokens[prefill:]], 0
        rows = []
        for chunk in chunks:
            out = self._run(chunk, past, length)
            past = {name: out[name.replace("past_key_values", "present")] for name in past}
            length += len(chunk)
            rows.append(out["logits"][0])
        return np.concatenate(rows)

    def greedy(self, prompt, steps):
        tokens = list(prompt)
        for _ in range(steps):  # the whole sequence again each step: simple and exact
            tokens.append(int(np.argmax(self.logits(tokens, len(tokens))[-1])))
        return tokens[len(prompt):]


def log_softmax(x):
    x = x.astype(np.float64)
    x = x - x.max(-1, keepdims=True)
    return x - np.log(np.exp(x).sum(-1, keepdims=True))


def compare(float_logits, quant_logits):
    """(KL(float || quant) per position, top-1 agreement per position)."""
    lp, lq = log_softmax(float_logits), log_softmax(quant_logits)
    kl = (np.exp(lp) * (lp - lq)).sum(-1)
    return kl, float_logits.argmax(-1) == quant_logits.argmax(-1)


def missing_operators(path):
    """Operators of the model octet has no kernel for at the model's opset."""
    import octet
    model = onnx.load(path, load_external_data=False)
    opsets = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    kernels = octet.list_ops()
    missing = set()
    for node in model.graph.node:
        domain = node.domain or "ai.onnx"
        version = opsets.get(domain, 1)
        if not any(d == domain and op == node.op_type and since <= version and
                   (end is None or version <= end) for d, op, since, end in kernels):
            missing.add("%s:%s" % (domain, node.op_type))
    return sorted(missing)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("float_model")
    parser.add_argument("models", nargs="+", help="quantized forms of the float model")
    parser.add_argument("--prompts", default=os.path.join(common.DATA_DIR, "llm_prompts.txt"))
    parser.add_argument("--steps", type=int, default=16, help="greedy steps per prompt")
    parser.add_argument("--engines", default="ort,octet",
                        help="of %s, or gate (%s and the verdict)" % (
                            ",".join(ENGINES), ",".join(GATE_ENGINES)))
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--ort-as-is", action="store_true",
                        help="run ONNX Runtime on the files unchanged, not in its exact form")
    parser.add_argument("--json", help="write the rows here")
    args = parser.parse_args()
    gate = args.engines == "gate"
    engines = list(GATE_ENGINES) if gate else [e for e in args.engines.split(",") if e]
    if set(engines) - set(ENGINES):
        parser.error("--engines takes %s, or gate" % ",".join(ENGINES))
    bpe = common.bpe()
    tok_path = bpe.tokenizer_path(args.float_model)
    if not os.path.exists(tok_path):
        parser.error("no tokenizer beside the float model (%s)" % tok_path)
    tok = bpe.Tokenizer.from_file(tok_path)
    with open(args.prompts, encoding="utf-8") as f:
        prompts = [tok.encode(line.rstrip("\n")) for line in f if line.strip()]

    reference = Decoder(open_session("ort", args.float_model, args.threads), args.float_model)
    cases = []  # (tokens, prompt length, float logits at the steps)
    for prompt in prompts:
        tokens = prompt + reference.greedy(prompt, args.steps)
        cases.append((tokens, len(prompt),
                      reference.logits(tokens[:-1], len(prompt))[len(prompt) - 1:]))
    print("float model %s: %d prompts x %d greedy steps; e.g. %r -> %r" % (
        os.path.basename(args.float_model), len(prompts), args.steps, tok.decode(prompts[0]),
        tok.decode(cases[0][0][len(prompts[0]):])))

    if set(engines) & set(ORT_ENGINES):
        print("ONNX Runtime runs 8-bit models %s (%s)" % (
            "as they are" if args.ort_as_is or ort_exact.oracle_form() == "s8" else
            "in their exact u8 x u8 form", ort_exact.describe_host()))
    rows = []
    failed = False
    print("%-40s %-10s %12s %8s" % ("model", "engine", "mean KL", "top-1"))
    for path in args.models:
        for engine in engines:
            row = {"model": os.path.basename(path), "engine": engine}
            try:
                decoder = Decoder(open_session(engine, path, args.threads, args.ort_as_is), path)
                kls, agree = [], []
                for tokens, prompt_len, float_logits in cases:
                    kl, same = compare(float_logits, decoder.logits(tokens[:-1], prompt_len)[
                        prompt_len - 1:])
                    kls.append(kl)
                    agree.append(same)
                row.update(mean_kl=float(np.concatenate(kls).mean()),
                           top1=float(np.concatenate(agree).mean()),
                           positions=int(sum(len(k) for k in kls)))
                print("%-40s %-10s %12.3e %7.1f%%" % (row["model"], engine, row["mean_kl"],
                                                      100 * row["top1"]))
            except Exception as error:  # a refusal: say it, go on with the other rows
                row["refused"] = "%s: %s" % (type(error).__name__, error)
                if engine == "octet":
                    row["missing_operators"] = missing_operators(path)
                print("%-40s %-10s refused: %s" % (row["model"], engine, row["refused"]))
                if row.get("missing_operators"):
                    print("%-40s %-10s   no kernel for: %s" % ("", "", ", ".join(
                        row["missing_operators"])))
            rows.append(row)
        if gate:
            failed |= not print_verdict([r for r in rows if r["model"] == os.path.basename(path)])
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    sys.exit(1 if failed else 0)


def print_verdict(model_rows):
    """Prints octet's verdict against the floor of ORT's rows of one model; True if it passes."""
    ort_rows = [r for r in model_rows if r["engine"] in ORT_ENGINES and "mean_kl" in r]
    octet_row = next(r for r in model_rows if r["engine"] == "octet")
    if not ort_rows or "mean_kl" not in octet_row:
        print("%-40s %-10s no verdict: %s" % (octet_row["model"], "gate", "octet refused"
                                              if "mean_kl" not in octet_row else "no ORT run"))
        return "mean_kl" in octet_row
    floor_kl = max(r["mean_kl"] for r in ort_rows)
    floor_top1 = min(r["top1"] for r in ort_rows)
    passed = octet_row["mean_kl"] <= MARGIN * floor_kl and octet_row["top1"] >= floor_top1
    octet_row.update(floor_kl=floor_kl, floor_top1=floor_top1, passed=passed)
    print("%-40s %-10s %12.3e %7.1f%%  floor of %d ORT runs; octet %s" % (
        octet_row["model"], "floor", floor_kl, 100 * floor_top1, len(ort_rows),
        "passes" if passed else "FAILS"))
    return passed


if __name__ == "__main__":
    main()
