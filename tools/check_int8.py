#!/usr/bin/env python3
"""Model-level accuracy of octet against ONNX Runtime 1.31.1, gated by ONNX Runtime's own
noise floor (shared/seeds 001; docs/accuracy.md).

For each model the reference is ONNX Runtime with ORT_ENABLE_ALL. Three statistics compare
an output with it:
  row cosine   1st percentile over rows of the per-row cosine (the minimum below 100 rows);
               rows are token vectors (real tokens only) or detector anchors
  pooled       minimum cosine of the pooled vectors (sentence embedding; mean over anchors)
  decisions    positions whose decision equals the reference's (sentence encoder: nearest
               other sentence of the batch; detector: anchor kept, objectness*class > 0.1)
The floor f of each statistic is its smallest value over ONNX Runtime's own runs:
  1. ORT_DISABLE_ALL on the same inputs;
  2. --trials ORT_ENABLE_ALL runs with relative Gaussian noise 1e-7 on every float input;
  3. --trials ORT_ENABLE_ALL runs with the same noise on a tap tensor: the embedding output
     of a token-id encoder, or the float tensor feeding the first DynamicQuantizeLinear
     (skipped when that tensor is a graph input, which set 2 covers). The tap is an Add of
     a new graph input noise_tap (the onnx package edits the graph; ORT only runs it).
Gates: min(0.99, f) for the cosines, f for the decision count. A row passes when octet is
at or above every gate. Exits 1 when a row fails (or octet refuses the model).

    python tools/check_int8.py                      # full models (builds them if missing)
    python tools/check_int8.py --minilm-layers 2 --minilm-seq 32 --minilm-batch 8 --det-size 128
"""

import argparse
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "models"))
import build_cnn  # noqa: E402
import build_minilm  # noqa: E402

NOISE = 1e-7
COS_CAP = 0.99
NOISE_TAP = "noise_tap"


class Spec:
    """One model to check: its file, inputs (a list of feeds, outputs concatenated along the
    first axis) and how to read rows, pooled vectors and decisions from its outputs."""

    def __init__(self, name, path, feeds, summarize, tap=None):
        self.name, self.path, self.feeds, self.summarize, self.tap = name, path, feeds, summarize, tap


def minilm_specs(layers, seq, batch, variants):
    paths = build_minilm.build(layers, seq, variants)
    feeds = build_minilm.eval_feeds(seq, batch)
    real = feeds["attention_mask"].astype(bool)

    def summarize(outputs):
        (hidden, embedding), = outputs
        sims = embedding @ embedding.T
        np.fill_diagonal(sims, -np.inf)
        return hidden[real], embedding, sims.argmax(1)
    label = "minilm-L%d b%d s%d" % (layers, batch, seq)
    return [Spec("%s %s" % (label, v), paths[v], [feeds], summarize, build_minilm.EMBEDDING_TAP)
            for v in variants]


def detector_specs(size, variants):
    paths = build_cnn.build(size, variants)
    feeds = build_cnn.eval_feeds(size)

    def summarize(outputs):
        per_image = [out[0][0] for out in outputs]  # [anchors, 6] each
        rows = np.concatenate(per_image)
        pooled = np.stack([image.mean(0) for image in per_image])
        kept = rows[:, 4] * rows[:, 5] > build_cnn.SCORE_THRESHOLD
        return rows, pooled, kept
    return [Spec("det-%d x%d %s" % (size, len(feeds), v), paths[v], feeds, summarize)
            for v in variants]


def row_cosines(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    dot = (a * b).sum(1)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    # Two zero rows are the same row; one zero row against a non-zero one shares nothing.
    return np.where(norms > 0, dot / np.where(norms > 0, norms, 1), np.where(
        np.linalg.norm(a - b, axis=1) == 0, 1.0, 0.0))


def compare(summary, reference):
    rows, pooled, decisions = summary
    ref_rows, ref_pooled, ref_decisions = reference
    row_cos = row_cosines(rows, ref_rows)
    row_stat = np.percentile(row_cos, 1) if len(row_cos) >= 100 else row_cos.min()
    return row_stat, row_cosines(pooled, ref_pooled).min(), int((decisions == ref_decisions).sum())


def ort_session(model, level, threads):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return ort.InferenceSession(model if isinstance(model, str) else model.SerializeToString(),
                                options, providers=["CPUExecutionProvider"])


def float_inputs(model):
    return [i.name for i in model.graph.input
            if i.type.tensor_type.elem_type == TensorProto.FLOAT]


def tap_tensor(model, spec):
    """The tensor set 3 perturbs, or None (see the module doc)."""
    graph_inputs = {i.name for i in model.graph.input}
    tap = None
    if not float_inputs(model):
        tap = spec.tap
    else:
        tap = next((n.input[0] for n in model.graph.node
                    if n.op_type == "DynamicQuantizeLinear"), None)
    return None if tap is None or tap in graph_inputs else tap


def with_noise_tap(model, tap):
    """A copy whose tensor `tap` becomes tap_pre + noise_tap; tap_pre is also an output so the
    noise can be scaled by the value it perturbs."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    pre = tap + "/before_noise"
    producer = next((n for n in model.graph.node if tap in n.output), None)
    if producer is None:
        raise SystemExit("error: %s: no node produces the tap tensor '%s'" % (model.graph.name, tap))
    producer.output[list(producer.output).index(tap)] = pre
    model.graph.node.append(helper.make_node("Add", [pre, NOISE_TAP], [tap], name="noise_tap_add"))
    model.graph.input.append(helper.make_tensor_value_info(NOISE_TAP, TensorProto.FLOAT, None))
    model.graph.output.append(helper.make_tensor_value_info(pre, TensorProto.FLOAT, None))
    return model


def run_all(session, feeds, extra=None, output_count=None):
    outputs = []
    for feed in feeds:
        out = session.run(None, {**feed, **(extra or {})})
        outputs.append(out[:output_count] if output_count else out)
    return outputs


def noise_floor(spec, model, reference, trials, threads):
    """Smallest (row cosine, pooled cosine, decisions) over ONNX Runtime's own runs, and the
    number of runs."""
    import onnxruntime as ort
    level = ort.GraphOptimizationLevel
    n_out = len(model.graph.output)
    stats = [compare(spec.summarize(run_all(ort_session(model, level.ORT_DISABLE_ALL, threads),
                                            spec.feeds)), reference)]
    rng = np.random.default_rng(1)
    inputs = float_inputs(model)
    if inputs:
        session = ort_session(model, level.ORT_ENABLE_ALL, threads)
        for _ in range(trials):
            noisy = [{k: (v + v * NOISE * rng.standard_normal(v.shape).astype(np.float32)
                          if k in inputs else v) for k, v in feed.items()} for feed in spec.feeds]
            stats.append(compare(spec.summarize(run_all(session, noisy)), reference))
    tap = tap_tensor(model, spec)
    if tap is not None:
        session = ort_session(with_noise_tap(model, tap), level.ORT_ENABLE_ALL, threads)
        zero = {NOISE_TAP: np.zeros(1, np.float32)}
        bases = [session.run(None, {**feed, **zero})[n_out] for feed in spec.feeds]
        for _ in range(trials):
            outputs = [session.run(None, {**feed, NOISE_TAP: base * NOISE * rng.standard_normal(
                base.shape).astype(np.float32)})[:n_out] for feed, base in zip(spec.feeds, bases)]
            stats.append(compare(spec.summarize(outputs), reference))
    return tuple(min(s[i] for s in stats) for i in range(3)), len(stats), tap


def timed(run, feeds):
    start = time.perf_counter()
    outputs = run_all(run, feeds)
    return outputs, (time.perf_counter() - start) * 1e3


def check(spec, trials=16, threads=1):
    """Returns a result dict: the three statistics for octet, their floors and gates, pass."""
    import octet
    import onnxruntime as ort
    model = onnx.load(spec.path)
    ort_all = ort_session(spec.path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, threads)
    run_all(ort_all, spec.feeds)  # warm-up, so the timing below is a steady run
    ref_outputs, ort_ms = timed(ort_all, spec.feeds)
    reference = spec.summarize(ref_outputs)
    result = {"name": spec.name, "rows": len(reference[0]), "decisions_total": len(reference[2]),
              "ort_ms": ort_ms}
    try:
        ours_session = octet.InferenceSession(spec.path, threads=threads)
        run_all(ours_session, spec.feeds)
        ours_outputs, result["octet_ms"] = timed(ours_session, spec.feeds)
    except octet.OctetError as error:
        result.update(passed=False, error=str(error))
        return result
    ours = compare(spec.summarize(ours_outputs), reference)
    floor, runs, tap = noise_floor(spec, model, reference, trials, threads)
    gates = (min(COS_CAP, floor[0]), min(COS_CAP, floor[1]), floor[2])
    result.update(ours=ours, floor=floor, gates=gates, floor_runs=runs, tap=tap,
                  passed=all(o >= g for o, g in zip(ours, gates)))
    return result


def format_row(r):
    if "error" in r:
        return "| %s | — | — | — | — | FAIL: %s |" % (r["name"], r["error"])
    (rc, pc, dc), (rf, pf, df), (rg, pg, dg) = r["ours"], r["floor"], r["gates"]
    return ("| %s | %.4f / %.4f (gate %.4f) | %.4f / %.4f (gate %.4f) | %d / %d (gate %d) of %d "
            "| %.1f / %.1f | %s |" % (r["name"], rc, rf, rg, pc, pf, pg, dc, df, dg,
                                      r["decisions_total"], r["octet_ms"], r["ort_ms"],
                                      "pass" if r["passed"] else "FAIL"))


HEADER = ("| model | row cosine p1: octet / floor | pooled cosine: octet / floor "
          "| decisions: octet / floor | ms octet / ORT (1 run) | verdict |\n"
          "|---|---|---|---|---|---|")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="minilm,det", help="minilm, det or both")
    parser.add_argument("--minilm-layers", type=int, default=6)
    parser.add_argument("--minilm-seq", type=int, default=128)
    parser.add_argument("--minilm-batch", type=int, default=32)
    parser.add_argument("--minilm-variants", default="dynamic,qdq_pc,qdq_pt,qop")
    parser.add_argument("--det-size", type=int, default=416)
    parser.add_argument("--det-variants", default="qdq_pc,qop")
    parser.add_argument("--trials", type=int, default=16, help="noise draws per set")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    specs = []
    models = args.models.split(",")
    if "minilm" in models:
        specs += minilm_specs(args.minilm_layers, args.minilm_seq, args.minilm_batch,
                              args.minilm_variants.split(","))
    if "det" in models:
        specs += detector_specs(args.det_size, args.det_variants.split(","))
    print(HEADER, flush=True)
    failed = 0
    for spec in specs:
        result = check(spec, args.trials, args.threads)
        print(format_row(result), flush=True)
        failed += not result["passed"]
    print("%d of %d rows pass their gate" % (len(specs) - failed, len(specs)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
