#!/usr/bin/env python3
"""Model-level accuracy of octet's int8 output: as faithful to the float32 model as ONNX
Runtime 1.31.1's own runs of the same quantized model (docs/accuracy.md).

Three statistics compare an output with a reference:
  row cosine   1st percentile over rows of the per-row cosine (the minimum below 100 rows);
               rows are token vectors (real tokens only), detector anchors, or CRNN time
               steps
  pooled       minimum cosine of the pooled vectors (sentence embedding; the mean over an
               image's anchors or time steps)
  decisions    positions whose decision equals the reference's (sentence encoder: nearest
               other sentence of the batch; detector: anchor kept, objectness*class > 0.1;
               CRNN: the symbol of each time step)

Fidelity (the gate). The reference is the float32 model (ORT_ENABLE_ALL, same inputs). The
floor F of each statistic is its smallest value over ONNX Runtime's own runs of the quantized
model: ORT_ENABLE_ALL, ORT_DISABLE_ALL, session.qdqisint8allowed=1, --trials runs with
relative Gaussian noise 1e-7 on every float input and --trials with it on a tap tensor (the
embedding output of a token-id encoder, or the float tensor feeding the first
DynamicQuantizeLinear, unless that is a graph input). A row passes when octet's distance from
the float model is at most 5% above the largest of ONNX Runtime's:
    1 - S(octet) <= 1.05 * (1 - F) for the cosines, decisions(octet) >= F.
ONNX Runtime always runs the model in the form in which it computes its integer products
exactly (tools/ort_exact.py: the u8 x u8 form where its u8 x s8 kernel saturates), so the
floor is the same on every x86 CPU.

Agreement (seed 001's gate, second column). The reference is ONNX Runtime's ORT_ENABLE_ALL
output of the quantized model; its floor is the smallest statistic over the ORT_DISABLE_ALL
and noise runs; gate min(0.99, floor) for the cosines, the floor for decisions. It is a gate
only for rows whose integer products ONNX Runtime computes as octet does (QOperator and
dynamic rows, docs/decisions.md); elsewhere it is reported.

A task column reports what a user sees against ground truth (paraphrase retrieval; kept
anchors against the float model's; captcha text exact match and character error rate).

    python tools/check_int8.py                       # full rows (builds models if missing)
    python tools/check_int8.py --reduced             # the reduced rows CI runs
Exits 1 when a row fails its gate (or octet refuses a model).
"""

import argparse
import difflib
import os
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.join(TOOLS, "models"))
import build_cnn  # noqa: E402
import build_crnn  # noqa: E402
import build_minilm  # noqa: E402
import ort_exact  # noqa: E402

NOISE = 1e-7
COS_CAP = 0.99
MARGIN = 1.05  # octet's distance from the float model may exceed ORT's largest by 5%
NOISE_TAP = "noise_tap"
AGREEMENT_GATED = ("dynamic", "qop")  # ORT computes every integer product as octet does

# The rows of docs/accuracy.md: full and reduced (CI) sizes
FULL = dict(minilm=(6, 128, 32), det=416, crnn=64)
REDUCED = dict(minilm=(2, 32, 8), det=128, crnn=16)
MINILM_VARIANTS = build_minilm.QUANTIZED
DET_VARIANTS = build_cnn.QUANTIZED
CRNN_VARIANTS = build_crnn.QUANTIZED


class Spec:
    """One model to check: its file, its float model, inputs (a list of feeds, outputs
    concatenated along the first axis) and how to read rows, pooled vectors, decisions and
    the task result from its outputs."""

    def __init__(self, name, path, float_path, feeds, summarize, tap=None, task=None,
                 agreement_gated=False):
        self.name, self.path, self.float_path, self.feeds = name, path, float_path, feeds
        self.summarize, self.tap, self.task = summarize, tap, task
        self.agreement_gated = agreement_gated


def _variant_gated(variant):
    return variant in AGREEMENT_GATED


def minilm_specs(layers, seq, batch, variants):
    paths = build_minilm.build(layers, seq, ["fp32"] + list(variants))
    feeds = build_minilm.eval_feeds(seq, batch)
    real = feeds["attention_mask"].astype(bool)
    partner = np.arange(batch) ^ 1  # the eval sentences are paraphrase pairs

    def summarize(outputs):
        (hidden, embedding), = outputs
        sims = embedding @ embedding.T
        np.fill_diagonal(sims, -np.inf)
        return hidden[real], embedding, sims.argmax(1)

    def task(outputs, float_summary=None):
        nearest = summarize(outputs)[2]
        return {"text": "paraphrase found %d/%d" % ((nearest == partner).sum(), batch),
                "score": float((nearest == partner).mean())}
    label = "minilm-L%d b%d s%d" % (layers, batch, seq)
    return [Spec("%s %s" % (label, v), paths[v], paths["fp32"], [feeds], summarize,
                 build_minilm.EMBEDDING_TAP, task, _variant_gated(v)) for v in variants]


def detector_specs(size, variants):
    paths = build_cnn.build(size, ["fp32"] + list(variants))
    feeds = build_cnn.eval_feeds(size)

    def summarize(outputs):
        per_image = [out[0][0] for out in outputs]  # [anchors, 6] each
        rows = np.concatenate(per_image)
        pooled = np.stack([image.mean(0) for image in per_image])
        kept = rows[:, 4] * rows[:, 5] > build_cnn.SCORE_THRESHOLD
        return rows, pooled, kept

    def task(outputs, float_summary=None):
        kept = summarize(outputs)[2]
        if float_summary is None:
            return {"text": "kept %d" % kept.sum(), "score": 1.0}
        float_kept = float_summary[2]
        both = int((kept & float_kept).sum())
        f1 = 2 * both / max(int(kept.sum() + float_kept.sum()), 1)
        return {"text": "kept %d, float's %d, shared %d (F1 %.3f)" % (
            kept.sum(), float_kept.sum(), both, f1), "score": f1}
    return [Spec("det-%d x%d %s" % (size, len(feeds), v), paths[v], paths["fp32"], feeds,
                 summarize, None, task, _variant_gated(v)) for v in variants]


def crnn_specs(count, variants):
    paths = build_crnn.build(["fp32"] + list(variants))
    texts, feeds = build_crnn.eval_set(count)

    def summarize(outputs):
        (logits,), = outputs  # [time, batch, classes]
        steps = logits.transpose(1, 0, 2)
        return steps.reshape(-1, steps.shape[-1]), steps.mean(1), steps.argmax(-1).reshape(-1)

    def task(outputs, float_summary=None):
        read = build_crnn.decode(outputs[0][0])
        exact = sum(a == b for a, b in zip(read, texts))
        return {"text": "exact %d/%d, CER %.3f" % (exact, len(texts), character_error_rate(
            read, texts)), "score": exact / len(texts)}
    return [Spec("crnn x%d %s" % (count, v), paths[v], paths["fp32"], [feeds], summarize,
                 None, task, _variant_gated(v)) for v in variants]


def character_error_rate(read, truth):
    """Edit operations (difflib's opcodes: replace, delete, insert) over truth characters."""
    errors = 0
    for a, b in zip(read, truth):
        for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, b, a).get_opcodes():
            if tag != "equal":
                errors += max(i2 - i1, j2 - j1)
    return errors / max(sum(len(t) for t in truth), 1)


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
    return (float(row_stat), float(row_cosines(pooled, ref_pooled).min()),
            int((decisions == ref_decisions).sum()))


def ort_session(model, level, threads, int8_allowed=False):
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    if int8_allowed:
        options.add_session_config_entry("session.qdqisint8allowed", "1")
    data = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    return ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])


def float_inputs(model):
    return [i.name for i in model.graph.input
            if i.type.tensor_type.elem_type == TensorProto.FLOAT]


def tap_tensor(model, spec):
    """The tensor the tap runs perturb, or None (see the module doc)."""
    graph_inputs = {i.name for i in model.graph.input}
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


def timed(run, feeds):
    start = time.perf_counter()
    outputs = run_all(run, feeds)
    return outputs, (time.perf_counter() - start) * 1e3


def ort_runs(spec, model, trials, threads):
    """ONNX Runtime's own runs of the quantized model (already in its exact form): a list of
    (label, summary), ORT_ENABLE_ALL first; ORT_ENABLE_ALL's outputs; its time for the inputs
    (ms); the tap tensor."""
    import onnxruntime as ort
    level = ort.GraphOptimizationLevel
    runs = []
    enable = ort_session(model, level.ORT_ENABLE_ALL, threads)
    run_all(enable, spec.feeds)  # warm-up, so the time below is a steady run
    enable_outputs, ort_ms = timed(enable, spec.feeds)
    runs.append(("ORT_ENABLE_ALL", spec.summarize(enable_outputs)))
    runs.append(("ORT_DISABLE_ALL", spec.summarize(run_all(
        ort_session(model, level.ORT_DISABLE_ALL, threads), spec.feeds))))
    runs.append(("qdqisint8allowed=1", spec.summarize(run_all(
        ort_session(model, level.ORT_ENABLE_ALL, threads, int8_allowed=True), spec.feeds))))
    rng = np.random.default_rng(1)
    inputs = float_inputs(model)
    if inputs:
        for trial in range(trials):
            noisy = [{k: (v + v * NOISE * rng.standard_normal(v.shape).astype(np.float32)
                          if k in inputs else v) for k, v in feed.items()} for feed in spec.feeds]
            runs.append(("input noise %d" % trial, spec.summarize(run_all(enable, noisy))))
    tap = tap_tensor(model, spec)
    if tap is not None:
        n_out = len(model.graph.output)
        session = ort_session(with_noise_tap(model, tap), level.ORT_ENABLE_ALL, threads)
        zero = {NOISE_TAP: np.zeros(1, np.float32)}
        bases = [session.run(None, {**feed, **zero})[n_out] for feed in spec.feeds]
        for trial in range(trials):
            outputs = [session.run(None, {**feed, NOISE_TAP: base * NOISE * rng.standard_normal(
                base.shape).astype(np.float32)})[:n_out] for feed, base in zip(spec.feeds, bases)]
            runs.append(("tap noise %d" % trial, spec.summarize(outputs)))
    return runs, enable_outputs, ort_ms, tap


def fidelity_gate(ours, floor):
    """Per statistic: octet's distance from the float model at most MARGIN times ORT's
    largest (cosines); decisions at least ORT's fewest."""
    return (1 - ours[0] <= MARGIN * (1 - floor[0]), 1 - ours[1] <= MARGIN * (1 - floor[1]),
            ours[2] >= floor[2])


def agreement_gates(floor):
    return min(COS_CAP, floor[0]), min(COS_CAP, floor[1]), floor[2]


def check(spec, trials=16, threads=1, octet_model=None):
    """Runs the float model, ONNX Runtime's runs and octet (on `octet_model` when given, else
    the spec's model) and returns a result dict: statistics, floors, gates, passed."""
    import octet
    import onnxruntime as ort
    model = onnx.load(spec.path)
    float_session = ort_session(spec.float_path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
                                threads)
    float_outputs = run_all(float_session, spec.feeds)
    float_summary = spec.summarize(float_outputs)
    form = ort_exact.oracle_form()
    ort_model, _ = ort_exact.for_ort(model, {}, form)
    result = {"name": spec.name, "rows": len(float_summary[0]), "form": form,
              "decisions_total": len(float_summary[2]), "agreement_gated": spec.agreement_gated}
    if spec.task:
        result["task_float"] = spec.task(float_outputs)
    try:
        session = octet.InferenceSession(octet_model or spec.path, threads=threads)
        run_all(session, spec.feeds)
        ours_outputs, result["octet_ms"] = timed(session, spec.feeds)
    except octet.OctetError as error:
        result.update(passed=False, error=str(error))
        return result
    runs, ort_outputs, result["ort_ms"], result["tap"] = ort_runs(spec, ort_model, trials,
                                                                  threads)
    ours = spec.summarize(ours_outputs)
    reference = runs[0][1]
    fidelity = {label: compare(summary, float_summary) for label, summary in runs}
    floor = tuple(min(s[i] for s in fidelity.values()) for i in range(3))
    ours_fidelity = compare(ours, float_summary)
    agreement = [compare(summary, reference) for _, summary in runs[1:]]
    agreement_floor = tuple(min(s[i] for s in agreement) for i in range(3))
    ours_agreement = compare(ours, reference)
    gate = fidelity_gate(ours_fidelity, floor)
    a_gates = agreement_gates(agreement_floor)
    agreement_ok = all(o >= g for o, g in zip(ours_agreement, a_gates))
    result.update(
        ours=ours_fidelity, floor=floor, fidelity_by_run=fidelity, fidelity_passed=all(gate),
        fidelity_gate=gate, worst_runs=[min(fidelity, key=lambda k: fidelity[k][i])
                                        for i in range(3)],
        ours_agreement=ours_agreement, agreement_floor=agreement_floor,
        agreement_gates=a_gates, agreement_passed=agreement_ok, floor_runs=len(runs),
        passed=all(gate) and (agreement_ok or not spec.agreement_gated))
    if spec.task:
        result["task_octet"] = spec.task(ours_outputs, float_summary)
        result["task_ort"] = spec.task(ort_outputs, float_summary)
    return result


def format_row(r):
    if "error" in r:
        return "| %s | — | — | — | — | — | FAIL: %s |" % (r["name"], r["error"])
    (rc, pc, dc), (rf, pf, df) = r["ours"], r["floor"]
    worst = [" (%s)" % _short(w) for w in r["worst_runs"]]
    (ra, pa, da), (rg, pg, dg) = r["ours_agreement"], r["agreement_gates"]
    mark = ["" if ok else " **x**" for ok in r["fidelity_gate"]]
    agreement = "%.4f / %.4f / %d (gate %.4f / %.4f / %d)%s" % (
        ra, pa, da, rg, pg, dg, "" if r["agreement_gated"] else ", not a gate")
    if r["agreement_gated"] and not r["agreement_passed"]:
        agreement += " **x**"
    task = "—"
    if "task_octet" in r:
        task = "octet %s; ORT %s; float %s" % (r["task_octet"]["text"], r["task_ort"]["text"],
                                               r["task_float"]["text"])
    return ("| %s | %.4f / %.4f%s%s | %.4f / %.4f%s%s | %d / %d%s of %d%s | %s | %s | %.0f / %.0f "
            "| %s |" % (r["name"], rc, rf, worst[0], mark[0], pc, pf, worst[1], mark[1], dc, df,
                        worst[2], r["decisions_total"], mark[2], agreement, task, r["octet_ms"],
                        r["ort_ms"],
               "pass" if r["passed"] else "FAIL"))


def _short(label):
    """The kind of ORT run a floor came from: ENABLE_ALL, DISABLE_ALL, int8 (qdqisint8allowed),
    input / tap (noise draws)."""
    return {"ORT_ENABLE_ALL": "ENABLE_ALL", "ORT_DISABLE_ALL": "DISABLE_ALL",
            "qdqisint8allowed=1": "int8"}.get(label, label.split(" noise")[0])


HEADER = ("| model | row cosine p1 vs float: octet / ORT floor | pooled vs float: octet / floor "
          "| decisions = float's: octet / floor | agreement with ORT_ENABLE_ALL: row / pooled / "
          "decisions | task | ms octet / ORT | verdict |\n"
          "|---|---|---|---|---|---|---|---|")


def host_lines():
    """The host's CPU and ISA as ONNX Runtime's and octet's kernel dispatch see them."""
    import onnxruntime
    import octet  # noqa: F401  (fails early when octet is not installed)
    features = ort_exact.cpu_features()
    forced = os.environ.get("OCTET_ISA")
    return ["host: %s" % ort_exact.describe_host(),
            "octet path: %s; ONNX Runtime %s" % (
                ("%s (OCTET_ISA)" % forced) if forced else ort_exact.octet_best_isa(features) +
                " (best for this CPU)", onnxruntime.__version__)]


def specs_for(args):
    sizes = REDUCED if args.reduced else FULL
    layers, seq, batch = sizes["minilm"]
    specs = []
    models = args.models.split(",")
    if "minilm" in models:
        specs += minilm_specs(args.minilm_layers or layers, args.minilm_seq or seq,
                              args.minilm_batch or batch, _pick(args.minilm_variants,
                                                                MINILM_VARIANTS))
    if "det" in models:
        specs += detector_specs(args.det_size or sizes["det"], _pick(args.det_variants,
                                                                     DET_VARIANTS))
    if "crnn" in models:
        specs += crnn_specs(args.crnn_images or sizes["crnn"], _pick(args.crnn_variants,
                                                                     CRNN_VARIANTS))
    return specs


def _pick(text, known):
    chosen = [v for v in (text.split(",") if text else known) if v]
    unknown = set(chosen) - set(known)
    if unknown:
        raise SystemExit("error: unknown variants %s (known: %s)" % (sorted(unknown),
                                                                     ", ".join(known)))
    return chosen


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reduced", action="store_true",
                        help="the reduced rows CI runs (MiniLM L2 b8 s32, detector 128, "
                        "CRNN 16 images)")
    parser.add_argument("--models", default="minilm,det,crnn", help="minilm, det, crnn")
    parser.add_argument("--minilm-layers", type=int)
    parser.add_argument("--minilm-seq", type=int)
    parser.add_argument("--minilm-batch", type=int)
    parser.add_argument("--minilm-variants", default="", help="default: all")
    parser.add_argument("--det-size", type=int)
    parser.add_argument("--det-variants", default="")
    parser.add_argument("--crnn-images", type=int)
    parser.add_argument("--crnn-variants", default="")
    parser.add_argument("--trials", type=int, default=16, help="noise draws per set")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--verbose", action="store_true",
                        help="after each row, every ORT run's statistics against the float model")
    args = parser.parse_args()
    for line in host_lines():
        print(line)
    specs = specs_for(args)
    print(HEADER, flush=True)
    failed = 0
    for spec in specs:
        result = check(spec, args.trials, args.threads)
        print(format_row(result), flush=True)
        if args.verbose and "fidelity_by_run" in result:
            for label, (row, pooled, decisions) in result["fidelity_by_run"].items():
                print("    %-20s row %.4f  pooled %.4f  decisions %d" % (label, row, pooled,
                                                                      decisions))
        failed += not result["passed"]
    print("%d of %d rows pass their gate" % (len(specs) - failed, len(specs)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
