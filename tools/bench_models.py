"""octet against ONNX Runtime 1.31.1 on whole real models (docs/benchmarks.md, "Whole models").

Rows: all-MiniLM-L6-v2 in the four forms of tools/models/build_minilm.py (dynamic, static
QDQ per-channel, static QDQ per-tensor, static QOperator) at batch 1 x seq 128 and batch 32 x
seq 128 (the bundled evaluation sentences), and ddddocr's detector (tools/models/build_cnn.py,
416x416) static QDQ per-channel and QOperator on one synthetic image; 1 and 2 threads.
Models are built into build/models/ when missing.

Time: both engines in this one process on the same inputs, warmed up, then --repeat rounds
that alternate octet / ONNX Runtime (one run each), min and median per engine (the timer,
the alternation and the RSS probe are `octet bench`'s, python/octet/measure.py). ONNX Runtime:
CPU EP, ORT_ENABLE_ALL, intra_op_num_threads=T, inter_op_num_threads=1, spinning off (its
spinning workers would otherwise take the core octet needs between its runs). octet:
octet.InferenceSession(model, threads=T). The outputs are compared as a sanity check
(minimum row cosine of the main output); the accuracy gate is tools/check_int8.py.

Peak RSS: one child process per engine, model and thread count (a shared process cannot
tell the two engines' memory apart): it imports numpy and the one engine, creates the
session and runs the input twice. The table gives the child's peak RSS (VmHWM) and the
part above the RSS it had after the imports, before the session (the model's own cost).

    .venv/bin/python tools/bench_models.py [--models minilm,det] [--threads 1,2]
        [--batches 1,32] [--minilm-variants dynamic,qop] [--repeat 7] [--no-rss]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile

import numpy as np

TOOLS = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, TOOLS)
sys.path.insert(0, os.path.join(TOOLS, "models"))
import measure  # noqa: E402  (octet bench's timer, alternation and RSS probe)

SEQ = 128


def make_session(engine, path, threads):
    session = measure.make_session(engine, path, threads)
    return lambda feeds: session.run(None, feeds)


def measure_rss(engine, path, threads, feeds_path):
    try:
        rss = measure.peak_rss(engine, path, threads, feeds_path)
    except RuntimeError as error:
        raise SystemExit("bench_models: %s on %s: %s" % (engine, path, error))
    return {"base": rss["base_kib"], "peak": rss["peak_kib"]}


def min_row_cosine(a, b):
    a = a.reshape(-1, a.shape[-1]).astype(np.float64)
    b = b.reshape(-1, b.shape[-1]).astype(np.float64)
    norms = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    cos = (a * b).sum(1) / np.where(norms > 0, norms, 1)
    return float(np.where(norms > 0, cos, 1.0).min())


def rows(args):
    """(label, model path, feeds) for every requested model and input."""
    result = []
    if "minilm" in args.models:
        import build_minilm
        paths = build_minilm.build(6, SEQ, args.minilm_variants, log=print)
        for batch in args.batches:
            feeds = build_minilm.eval_feeds(SEQ, batch)
            for variant in args.minilm_variants:
                result.append(("minilm-L6 %s b%d s%d" % (variant, batch, SEQ), paths[variant],
                               feeds))
    if "det" in args.models:
        import build_cnn
        paths = build_cnn.build(args.det_size, args.det_variants)
        feeds = build_cnn.eval_feeds(args.det_size)[0]
        for variant in args.det_variants:
            result.append(("det-%d %s 1 image" % (args.det_size, variant), paths[variant], feeds))
    return result


def timed_rounds(runs, feeds, repeat):
    """Alternating rounds (one run of each engine per round): {engine: [seconds, ...]}."""
    samples = measure.alternate({engine: (lambda run=run: run(feeds)) for engine, run in
                                 runs.items()}, rounds=repeat, warmup=0)
    return {engine: [s.wall for s in values] for engine, values in samples.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="minilm,det", help="minilm, det or both")
    parser.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    parser.add_argument("--batches", default="1,32", help="MiniLM batch sizes (seq 128)")
    parser.add_argument("--minilm-variants", default="dynamic,qdq_pc,qdq_pt,qop")
    parser.add_argument("--det-size", type=int, default=416)
    parser.add_argument("--det-variants", default="qdq_pc,qop")
    parser.add_argument("--repeat", type=int, default=7, help="timed rounds per engine")
    parser.add_argument("--no-rss", action="store_true", help="skip the peak-RSS children")
    args = parser.parse_args(argv)
    args.models = args.models.split(",")
    args.threads = [int(t) for t in args.threads.split(",")]
    args.batches = [int(b) for b in args.batches.split(",")]
    args.minilm_variants = args.minilm_variants.split(",")
    args.det_variants = args.det_variants.split(",")

    import onnxruntime as ort
    import octet
    import host
    print("# onnxruntime %s, numpy %s; load before %s" % (
        ort.__version__, np.__version__, tuple(round(v, 2) for v in os.getloadavg())))
    print("# host: %s" % host.describe(octet))
    print("| model | threads | octet min / median (ms) | ORT min / median (ms) | ORT/octet (min) "
          "| ORT/octet (median) | peak RSS octet / ORT (MiB) | above imports octet / ORT (MiB) "
          "| min row cosine vs ORT |")
    print("|---|---|---|---|---|---|---|---|---|", flush=True)
    with tempfile.TemporaryDirectory(prefix="octet_bench_models_") as scratch:
        for label, path, feeds in rows(args):
            feeds_path = os.path.join(scratch, "feeds.npz")
            np.savez(feeds_path, **feeds)
            for threads in args.threads:
                try:
                    runs = {engine: make_session(engine, path, threads)
                            for engine in ("octet", "ort")}
                except Exception as error:  # octet.OctetError: a row octet cannot run yet
                    print("| %s | %d | refused: %s |" % (label, threads, str(error)[:160]),
                          flush=True)
                    continue
                outputs = {engine: run(feeds) for engine, run in runs.items()}  # warm-up
                cosine = min_row_cosine(outputs["octet"][0], outputs["ort"][0])
                times = timed_rounds(runs, feeds, args.repeat)
                del runs, outputs
                o_min, r_min = min(times["octet"]), min(times["ort"])
                o_med, r_med = statistics.median(times["octet"]), statistics.median(times["ort"])
                rss = "— | —"
                if not args.no_rss:
                    o, r = (measure_rss(engine, path, threads, feeds_path)
                            for engine in ("octet", "ort"))
                    rss = "%.0f / %.0f | %.0f / %.0f" % (
                        o["peak"] / 1024, r["peak"] / 1024, (o["peak"] - o["base"]) / 1024,
                        (r["peak"] - r["base"]) / 1024)
                print("| %s | %d | %.1f / %.1f | %.1f / %.1f | %.2f | %.2f | %s | %.4f |" % (
                    label, threads, o_min * 1e3, o_med * 1e3, r_min * 1e3, r_med * 1e3,
                    r_min / o_min, r_med / o_med, rss, cosine), flush=True)
    print("# load after %s" % (tuple(round(v, 2) for v in os.getloadavg()),))
    return 0


if __name__ == "__main__":
    sys.exit(main())
