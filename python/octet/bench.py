"""`octet bench MODEL`: octet's latency on a model, side by side with ONNX Runtime in the same
process on the same inputs (--vs-ort), with its operator-time breakdown and what octet's
rewrites fused or refused. docs/usage.md, "octet bench", documents every option."""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

from . import _command, feeds as feeds_mod, measure
from ._command import CommandError, UsageError

SCHEMA = "octet-bench/1"
ENGINE_LABEL = {"octet": "octet", "ort": "onnxruntime"}
TOP_OPS = 10
MAX_ROUNDS = 1000  # with --time: a fast model stops here before its seconds are up

HELP = """\
Times MODEL in octet (and with --vs-ort in ONNX Runtime, in this process, on the same
inputs, in alternating rounds) and prints a table: min / median / p90 latency, throughput,
peak RSS and session-creation time per engine and thread count, with each engine's time
relative to octet's; then the outputs' agreement, octet's top operators by kernel time
(OCTET_PROFILE's counters) and what octet's rewrites fused or refused (octet inspect).

Inputs not given with --input are invented from the model's declared inputs: float
values normal(0, 1); integer ids that index a Gather table uniform over the table's
length; 8-bit quantized data uniform over its type; inputs named like a mask all ones.
Symbolic dims are set with --shape (a dim shared by several inputs follows the one set),
else 1. Anything else must be given with --input.

Exit status: 0 on success, 1 when the run fails, 2 on a usage error."""


def _threads(text):
    try:
        values = [int(t) for t in text.split(",")]
    except ValueError:
        values = []
    if not values or any(t < 0 for t in values):
        raise UsageError("--threads takes comma-separated thread counts like 1,2 (0 = one per "
                         "core), got '%s'" % text)
    return values


def make_parser():
    parser = _command.ArgumentParser(
        prog="octet bench", description=HELP,
        usage="octet bench MODEL [--input NAME=FILE.npy | FILE.npz]... [--shape NAME=DIMS]...\n"
              "                   [--threads 1,2] [--vs-ort] [--repeat N | --time S]\n"
              "                   [--warmup N] [--seed N] [--json OUT.json] [--report OUT.html]\n"
              "                   [--no-rss] [--quiet]",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", metavar="MODEL", help="the .onnx model")
    feeds_mod.add_arguments(parser)
    parser.add_argument("--threads", default="1", metavar="1,2",
                        help="comma-separated thread counts, each measured in turn "
                        "(default 1; 0 = one per core)")
    parser.add_argument("--vs-ort", action="store_true",
                        help="also time ONNX Runtime (CPU EP, ORT_ENABLE_ALL, "
                        "inter_op_num_threads=1, spinning off) and compare the outputs")
    how_long = parser.add_mutually_exclusive_group()
    how_long.add_argument("--repeat", type=int, metavar="N",
                          help="timed rounds per thread count (each round runs every engine "
                          "once)")
    how_long.add_argument("--time", type=float, metavar="S",
                          help="seconds of timed rounds per thread count, at least 3 and at "
                          "most %d rounds (default 3)" % MAX_ROUNDS)
    parser.add_argument("--warmup", type=int, default=2, metavar="N",
                        help="untimed runs of each engine before the rounds (default 2)")
    parser.add_argument("--json", metavar="OUT.json", help="also write the results as JSON")
    parser.add_argument("--report", metavar="OUT.html",
                        help="also write a self-contained HTML page with the table and charts")
    parser.add_argument("--no-rss", action="store_true",
                        help="skip the peak-RSS measurement (one extra process per engine and "
                        "thread count)")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return parser


def parse_args(argv):
    args = make_parser().parse_args(argv)
    args.threads = _threads(args.threads)
    if args.repeat is not None and args.repeat < 1:
        raise UsageError("--repeat needs a positive number of rounds, got %d" % args.repeat)
    if args.time is not None and not args.time > 0:
        raise UsageError("--time needs a positive number of seconds, got %s" % args.time)
    if args.repeat is None and args.time is None:
        args.time = 3.0
    if args.warmup < 0:
        raise UsageError("--warmup needs a number >= 0, got %d" % args.warmup)
    for path, ext in ((args.json, ".json"), (args.report, ".html")):
        if path and os.path.isdir(path):
            raise UsageError("%s is a directory; name a %s file" % (path, ext))
        if path and not os.path.isdir(os.path.dirname(os.path.abspath(path))):
            raise UsageError("cannot write %s: no folder %s" % (
                path, os.path.dirname(os.path.abspath(path))))
    try:
        args.shapes = feeds_mod.parse_shapes(args.shape)
    except feeds_mod.InputError as error:
        raise UsageError(str(error)) from None
    return args


# ---------------------------------------------------------------- pieces


def parse_inspect(text):
    """octet inspect's listing -> {"fused": [...], "refused": [...], "summary", "disabled"}."""
    fused, refused, summary = [], [], ""
    for line in text.splitlines():
        kind, _, rest = line.partition(" ")
        rest = rest.strip()
        if kind in ("fused", "refused"):
            op, _, rest = rest.partition(" ")
            node, detail = rest, ""
            if rest.startswith("'"):
                end = rest.find("'", 1)
                node, detail = rest[1:end], rest[end + 1:].strip()
            detail = detail[3:] if detail.startswith("-> ") else detail
            detail = detail[4:] if detail.startswith("why=") else detail
            (fused if kind == "fused" else refused).append(
                {"op": op, "node": node, "detail": detail})
        elif line.startswith("qdq_groups="):
            summary = line.strip()
    return {"fused": fused, "refused": refused, "summary": summary,
            "disabled": "OCTET_QDQ=0" in text}


def rewrite_lines(rewrites):
    """A few lines summing up parse_inspect's result."""
    if rewrites["disabled"]:
        return ["octet's QDQ rewrites are off (OCTET_QDQ=0): every node runs as written"]
    counts = {}
    for item in rewrites["fused"]:
        became = item["detail"].split(" ")[0]
        counts[became] = counts.get(became, 0) + 1
    lines = ["fused %d group(s): %s" % (len(rewrites["fused"]), ", ".join(
        "%s x%d" % (k, v) for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or "none")]
    reasons = {}
    for item in rewrites["refused"]:
        key = "%s why=%s" % (item["op"], item["detail"])
        reasons[key] = reasons.get(key, 0) + 1
    lines.append("refused %d group(s)%s" % (len(rewrites["refused"]), ": " + ", ".join(
        "%s (x%d)" % kv for kv in sorted(reasons.items(), key=lambda kv: -kv[1]))
        if reasons else ""))
    if rewrites["summary"]:
        lines.append(rewrites["summary"])
    return lines


def agreement(octet_outputs, ort_outputs, names):
    """Per output: max |d| and the count of differing values (exact comparison)."""
    rows = []
    for name, a, b in zip(names, octet_outputs, ort_outputs):
        a, b = np.asarray(a), np.asarray(b)
        row = {"output": name, "dtype": str(a.dtype), "shape": list(a.shape)}
        if a.shape != b.shape or a.dtype != b.dtype:
            row.update(comparable=False, note="octet %s %s vs ORT %s %s" % (
                a.dtype, list(a.shape), b.dtype, list(b.shape)))
        else:
            fa, fb = a.astype(np.float64), b.astype(np.float64)
            differ = ~((fa == fb) | (np.isnan(fa) & np.isnan(fb)))
            d = np.abs(fa - fb)[differ]
            row.update(comparable=True, total=int(a.size), differing=int(differ.sum()),
                       max_abs_diff=float(d.max()) if d.size else 0.0,
                       eight_bit=a.dtype.itemsize == 1 and a.dtype.kind in "iu")
        rows.append(row)
    return rows


def agreement_lines(rows):
    lines = []
    for r in rows:
        if not r["comparable"]:
            lines.append("  %s: not comparable (%s)" % (r["output"], r["note"]))
            continue
        what = "equal" if r["differing"] == 0 else "%d of %d values differ" % (
            r["differing"], r["total"])
        lines.append("  %s: %s %s, max |d| %.6g, %s" % (
            r["output"], r["dtype"], r["shape"], r["max_abs_diff"], what))
    return lines


def _fmt_ms(seconds):
    ms = seconds * 1e3
    return "%.3f" % ms if ms < 10 else "%.2f" % ms if ms < 100 else "%.1f" % ms


def result_table(results):
    header = ["engine", "threads", "rounds", "min ms", "median ms", "p90 ms", "runs/s",
              "peak RSS MiB", "create ms", "time/octet"]
    rows = []
    for r in results:
        lat = r["latency_s"]
        rss = "-" if r["peak_rss_mib"] is None else "%.1f (+%.1f)" % (
            r["peak_rss_mib"], r["rss_above_imports_mib"])
        rows.append([ENGINE_LABEL[r["engine"]], r["threads"], r["rounds"], _fmt_ms(lat["min"]),
                     _fmt_ms(lat["median"]), _fmt_ms(lat["p90"]),
                     "%.1f" % r["throughput_per_s"], rss, "%.1f" % (r["create_s"] * 1e3),
                     "%.2f" % r["vs_octet_median"] if r["vs_octet_median"] else "-"])
    return _command.format_table(header, rows)


def profile_lines(profile):
    if not profile or not profile["ops"]:
        return ["  (no kernel ran)"]
    rows = [[p["op"], "%.3f" % p["ms_per_run"], "%.1f%%" % p["percent"],
             "%g" % p["calls_per_run"]] for p in profile["ops"][:TOP_OPS]]
    table = _command.format_table(["op", "ms/run", "share", "calls/run"], rows)
    rest = len(profile["ops"]) - TOP_OPS
    lines = ["  " + line for line in table.splitlines()]
    if rest > 0:
        lines.append("  (%d more op types in --json)" % rest)
    return lines


def summarize_profile(raw, threads):
    runs = raw["runs"]
    total = sum(op["seconds"] for op in raw["ops"]) or 1.0
    return {"threads": threads, "runs": runs, "kernel_ms_per_run": 1e3 * total / max(runs, 1),
            "ops": [{"op": op["op"], "ms_per_run": 1e3 * op["seconds"] / max(runs, 1),
                     "percent": 100.0 * op["seconds"] / total,
                     "calls_per_run": op["calls"] / max(runs, 1)} for op in raw["ops"]]}


# ---------------------------------------------------------------- the command


def bench(args):
    import octet
    _command.check_model_path(args.model)
    _command.require("onnx", "octet bench", "onnx")
    ort = _command.require("onnxruntime", "octet bench --vs-ort",
                           "onnxruntime==1.31.1") if args.vs_ort else None
    if args.report:
        _command.require("matplotlib", "octet bench --report", "matplotlib")
    progress = _command.Progress(enabled=not args.quiet)
    engines = ["octet"] + (["ort"] if args.vs_ort else [])

    progress.say("octet bench: loading %s" % args.model, phase=True)
    given = feeds_mod.read_input_specs(args.input)
    # The first octet session also tells the declared inputs; its creation is timed.
    start = time.perf_counter()
    first = octet.InferenceSession(args.model, threads=args.threads[0])
    first_create = time.perf_counter() - start
    feeds, feed_notes = feeds_mod.make_feeds(args.model, feeds_mod.declared_inputs(first),
                                             given, args.shapes, args.seed)
    output_names = [o.name for o in first.get_outputs()]

    report = {"schema": SCHEMA, "model": os.path.abspath(args.model),
              "host": {"cpu": measure.cpu_model(), "cores": os.cpu_count(),
                       "flags": measure.isa_flags(), "octet_isa": octet.active_isa(),
                       "octet_supported_isas": octet.supported_isas(),
                       "line": measure.host_line(octet)},
              "versions": {"octet": _version("octet"), "numpy": np.__version__,
                           "onnxruntime": ort.__version__ if ort else None,
                           "python": sys.version.split()[0]},
              "load_before": measure.load_average(),
              "inputs": [{"name": n, "source": text} for n, text in feed_notes if n],
              "input_notes": [text for n, text in feed_notes if not n],
              "settings": {"threads": args.threads, "repeat": args.repeat,
                           "time_s": args.time, "warmup": args.warmup,
                           "vs_ort": args.vs_ort, "seed": args.seed,
                           "ort": "CPUExecutionProvider, ORT_ENABLE_ALL, intra_op_num_threads="
                                  "threads, inter_op_num_threads=1, spinning off"
                                  if args.vs_ort else None},
              "results": [], "agreement": None, "octet_thread_invariant": None,
              "profile": None, "rewrites": None}

    first_outputs = None
    profiled = None
    with tempfile.TemporaryDirectory(prefix="octet_bench_") as scratch:
        feeds_path = os.path.join(scratch, "feeds.npz")
        np.savez(feeds_path, **feeds)
        for threads in args.threads:
            label = "threads=%d" % threads
            sessions, create = {}, {}
            for engine in engines:
                if engine == "octet" and first is not None:
                    sessions[engine], create[engine], first = first, first_create, None
                    continue
                progress.say("%s: creating the %s session" % (label, ENGINE_LABEL[engine]),
                             phase=True)
                start = time.perf_counter()
                sessions[engine] = measure.make_session(engine, args.model, threads)
                create[engine] = time.perf_counter() - start
            runs = {engine: _runner(sessions[engine], feeds) for engine in engines}
            outputs = {engine: runs[engine]() for engine in engines}
            if first_outputs is None:
                first_outputs = outputs["octet"]
                if args.vs_ort:
                    report["agreement"] = agreement(outputs["octet"], outputs["ort"],
                                                    output_names)
                report["octet_thread_invariant"] = True
            elif not all(np.array_equal(a, b) for a, b in zip(first_outputs, outputs["octet"])):
                report["octet_thread_invariant"] = False

            clock = {}

            def show(phase, done, samples, label=label, clock=clock):
                if phase == "warm-up":
                    progress.say("%s: warm-up done (%d run(s) each), timing rounds" % (
                        label, args.warmup), phase=True)
                    clock["start"] = time.perf_counter()
                    return
                last = ", ".join("%s %s ms" % (ENGINE_LABEL[e], _fmt_ms(s[-1].wall))
                                 for e, s in samples.items())
                total = "/%d" % args.repeat if args.repeat else " (%.1f of %g s)" % (
                    time.perf_counter() - clock["start"], args.time)
                progress.say("%s: round %d%s: %s" % (label, done, total, last))

            progress.say("%s: warm-up, %d run(s) of each engine" % (label, args.warmup),
                         phase=True)

            samples = measure.alternate(runs, rounds=args.repeat, seconds=args.time,
                                        warmup=args.warmup, max_rounds=MAX_ROUNDS,
                                        progress=show)
            progress.say("%s: %d rounds timed" % (label, len(samples["octet"])), phase=True)
            rows = []
            for engine in engines:
                walls = [s.wall for s in samples[engine]]
                lat = measure.summary(walls)
                rows.append({"engine": engine, "threads": threads, "rounds": len(walls),
                             "latency_s": lat,
                             "cpu_s": measure.summary([s.cpu for s in samples[engine]]),
                             "samples_s": walls, "throughput_per_s": 1.0 / lat["median"],
                             "create_s": create[engine], "peak_rss_mib": None,
                             "rss_above_imports_mib": None})
            octet_median = rows[0]["latency_s"]["median"]
            for row in rows:
                row["vs_octet_median"] = row["latency_s"]["median"] / octet_median
                row["vs_octet_min"] = row["latency_s"]["min"] / rows[0]["latency_s"]["min"]
            if profiled is None:
                progress.say("%s: profiling octet's kernels" % label, phase=True)
                profiled = _profile(sessions["octet"], feeds, threads)
            del runs, sessions, outputs
            if not args.no_rss:
                for row in rows:
                    progress.say("%s: peak RSS of %s (a fresh process)" % (
                        label, ENGINE_LABEL[row["engine"]]), phase=True)
                    try:
                        rss = measure.peak_rss(row["engine"], args.model, threads, feeds_path)
                    except RuntimeError as error:
                        raise CommandError(str(error)) from None
                    row["peak_rss_mib"] = rss["peak_kib"] / 1024
                    row["rss_above_imports_mib"] = (rss["peak_kib"] - rss["base_kib"]) / 1024
            report["results"] += rows
    progress.say("reading octet's rewrites (octet inspect)", phase=True)
    report["rewrites"] = parse_inspect(octet.inspect(args.model))
    report["profile"] = profiled
    report["load_after"] = measure.load_average()
    progress.done()
    return report


def _runner(session, feeds):
    return lambda: session.run(None, feeds)


def _profile(session, feeds, threads):
    """Kernel time per op type over about a second of runs (at least 3)."""
    before = session.profile()
    session.set_profiling(True)
    try:
        measure.alternate({"octet": _runner(session, feeds)}, seconds=1.0, warmup=0,
                          min_rounds=3, max_rounds=1000)
    finally:
        if not os.environ.get("OCTET_PROFILE") == "1":
            session.set_profiling(False)
    after = session.profile()
    # Subtract what OCTET_PROFILE=1 had counted before (the timed rounds).
    seconds = {op["op"]: (op["seconds"], op["calls"]) for op in before["ops"]}
    ops = []
    for op in after["ops"]:
        s0, c0 = seconds.get(op["op"], (0.0, 0))
        ops.append({"op": op["op"], "seconds": op["seconds"] - s0, "calls": op["calls"] - c0})
    ops.sort(key=lambda op: -op["seconds"])
    return summarize_profile({"runs": after["runs"] - before["runs"], "ops": ops}, threads)


def _version(package):
    try:
        from importlib.metadata import version
        return version(package)
    except Exception:  # noqa: BLE001 - a source tree without metadata
        return None


def print_report(report, out=sys.stdout):
    w = out.write
    s = report["settings"]
    w("octet bench %s\n" % report["model"])
    w("host: %s\n" % report["host"]["line"])
    versions = report["versions"]
    w("octet %s, numpy %s%s; load %s\n" % (
        versions["octet"], versions["numpy"],
        ", onnxruntime %s (%s)" % (versions["onnxruntime"], s["ort"]) if s["vs_ort"] else "",
        " ".join("%.2f" % v for v in report["load_before"]) if report["load_before"] else "?"))
    for item in report["inputs"]:
        w("input %s: %s\n" % (item["name"], item["source"]))
    for note in report["input_notes"]:
        w("inputs: %s\n" % note)
    how = "%d rounds" % s["repeat"] if s["repeat"] else "%g s of rounds" % s["time_s"]
    w("timing: %d warm-up run(s), then %s per thread count; a round runs %s once\n\n" % (
        s["warmup"], how, "each engine (octet first)" if s["vs_ort"] else "octet"))
    w(result_table(report["results"]) + "\n")
    w("time/octet: the engine's median over octet's at the same thread count (> 1: octet is "
      "faster).\n")
    if any(r["peak_rss_mib"] is not None for r in report["results"]):
        w("peak RSS: a fresh process per row that imports the engine, creates the session and "
          "runs the inputs twice\n(+: above the process after its imports).\n")
    if report["agreement"] is not None:
        w("\noutputs, octet against onnxruntime:\n")
        w("\n".join(agreement_lines(report["agreement"])) + "\n")
        if any(r.get("differing") for r in report["agreement"]):
            if measure.ort_u8s8_saturates():
                w("  (this CPU has no VNNI: ONNX Runtime's u8 x s8 kernels saturate their 16-bit "
                  "pair sums here, octet's are exact)\n")
            w("  (octet compare MODEL lists the first tensors where the two differ, and why)\n")
    if report["octet_thread_invariant"] is False:
        w("warning: octet's outputs differ between thread counts\n")
    elif len(s["threads"]) > 1:
        w("octet's outputs are identical at every thread count\n")
    p = report["profile"]
    if p:
        w("\ntop operators in octet (threads=%d, %d profiled runs, %.3f ms per run in kernels):\n"
          % (p["threads"], p["runs"], p["kernel_ms_per_run"]))
        w("\n".join(profile_lines(p)) + "\n")
    w("\noctet's rewrites (octet inspect MODEL lists each group):\n")
    w("\n".join("  " + line for line in rewrite_lines(report["rewrites"])) + "\n")


def main(argv):
    args = parse_args(argv)
    report = bench(args)
    print_report(report)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
        print("wrote %s" % args.json)
    if args.report:
        from . import report as html
        html.write(report, args.report)
        print("wrote %s" % args.report)
    return 0


def cli(argv=None):
    return _command.run(main, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(cli())
