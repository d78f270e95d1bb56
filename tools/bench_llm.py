"""Decoder speed, octet vs ONNX Runtime (and llama.cpp on a GGUF), side by side in one run.

For each KV-cache model (tools/models/build_smollm2.py, build_qwen3.py --cached forms) and
thread count: prefill ms/token for prompts of --prefill tokens (an empty cache), and decode
ms/token at --context (a cache of context - 1 positions, one new token), each engine in
alternating rounds on the same feeds (a decode round runs --steps steps of an engine back
to back and counts their mean), min and median over the rounds; decode's weight read
rate (the model's initializer bytes except the embedding table, which decode gathers one
row of, per decode time) against this machine's measured memory read rate (the higher of a
measurement before and one after the runs); with --rss the
peak RSS of a fresh process per engine that runs one decode step; with --load the time to
create a session (load, rewrites, weight packing), min and median over --rounds alternating
rounds, in a table of its own. With --gguf FILE, the same
prefill and decode through llama-cpp-python (`llama_cpp`, if installed). With --forward,
a third engine, octet-int8: octet with float_matmul="int8" (the forward route, which gives a
4-bit DequantizeLinear -> MatMul the accuracy level 4 arithmetic ONNX Runtime's default
options give it; octet alone keeps the pair's float arithmetic). With --last-row, prefill adds
octet-last: octet with last_row_outputs=["logits"], the logits of the last position only
(what `octet generate` runs: the LM head on one row, the same bits), where every other engine
computes the whole graph's logits. Decode adds octet-kv where
octet can hold the model's KV cache (InferenceSession.new_kv_cache, what `octet generate`
uses): the same step appending to a cache of context - 1 positions held across runs (filled
by a prefill of random tokens, truncated back before each round) instead of the graph's
presents = Concat(past, new); ORT runs the graph as written. With --profile N, after each
phase's rounds octet's kernel time per op type over --rounds more runs of it (the N op
types that take the most, ms per run: OCTET_PROFILE's counters), octet-kv's for decode,
and ONNX Runtime's (its profiler's node times, op types of the graph it optimized).

    .venv/bin/python tools/bench_llm.py build/models/smollm2-135m.cached.a8w8.onnx \\
        [MODEL...] [--threads 1,2] [--prefill 32,256] [--context 256] [--rounds 5] \\
        [--steps 1] [--forward] [--last-row] [--load] [--gguf FILE] [--rss] [--profile N] \\
        [--json OUT.json]

docs/benchmarks.md keeps the results per CPU class."""

import argparse
import json
import os
import sys
import tempfile
import threading
import time

import numpy as np
import onnx

import host
import measure
from octet._command import format_table

ENGINES = ("ort", "octet")


def cache_layout(session):
    """{past input name: [kv_heads, head_dim]} of a KV-cache decoder session, and its
    vocabulary size."""
    layout = {}
    for arg in session.get_inputs():
        if arg.name.startswith("past_key_values."):
            layout[arg.name] = [arg.shape[1], arg.shape[3]]
    if not layout:
        raise SystemExit("error: the model has no past_key_values inputs (use a --cached form)")
    vocab = next(o.shape[-1] for o in session.get_outputs() if o.name == "logits")
    return layout, vocab


def feeds_for(layout, tokens, past, seed=0):
    layout, vocab = layout
    rng = np.random.default_rng(seed)
    feeds = {"input_ids": rng.integers(0, vocab, (1, tokens)).astype(np.int64),
             "attention_mask": np.ones((1, past + tokens), np.int64),
             "position_ids": np.arange(past, past + tokens, dtype=np.int64)[None]}
    for name, (heads, size) in layout.items():
        feeds[name] = rng.standard_normal((1, heads, past, size)).astype(np.float32)
    return feeds


def streamed_weight_bytes(path):
    """Initializer bytes a decode step reads: all but tables read through a Gather."""
    model = onnx.load(path, load_external_data=False)
    gathered = {n.input[0] for n in model.graph.node if n.op_type in ("Gather",
                                                                     "GatherBlockQuantized")}
    total = 0
    for t in model.graph.initializer:
        if t.name in gathered:
            continue
        if t.data_location == onnx.TensorProto.EXTERNAL:
            total += int({e.key: e.value for e in t.external_data}.get("length", 0))
        else:
            total += len(t.raw_data) or onnx.numpy_helper.to_array(t).nbytes
    return total


def memory_read_rate(threads, gib=1):
    """GB/s of numpy summing a buffer much larger than the caches, split over threads."""
    data = np.ones(gib << 27, np.uint64)  # gib GiB
    parts = np.array_split(data, threads)
    best = 0.0
    for _ in range(3):
        start = time.perf_counter()
        workers = [threading.Thread(target=np.sum, args=(p,)) for p in parts]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        best = max(best, data.nbytes / (time.perf_counter() - start) / 1e9)
    return best


def op_profile(session, fn, runs):
    """{op type: (kernel ms, nodes run) per run} of `runs` calls of fn, from the session's
    counters."""
    def totals():
        return {o["op"]: (o["seconds"], o["calls"]) for o in session.profile()["ops"]}
    session.set_profiling(True)
    before = totals()
    for _ in range(runs):
        fn()
    after = totals()
    session.set_profiling(False)
    per_run = {}
    for op, (seconds, calls) in after.items():
        seconds_before, calls_before = before.get(op, (0.0, 0))
        per_run[op] = (1e3 * (seconds - seconds_before) / runs, (calls - calls_before) / runs)
    return per_run


def ort_op_profile(path, threads, feeds, runs):
    """{op type: (kernel ms, nodes run) per run} of ONNX Runtime over `runs` calls of the
    model on feeds after one warm-up call, from its profiler (a session of its own, so the
    timed rounds run without it)."""
    with tempfile.TemporaryDirectory() as tmp:
        session = measure.ort_session(path, threads, profile_prefix=os.path.join(tmp, "ort"))
        for _ in range(runs + 1):
            session.run(None, feeds)
        with open(session.end_profiling()) as f:
            events = json.load(f)
    starts = sorted(e["ts"] for e in events if e.get("name") == "model_run")
    per_run = {}
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time") or \
                e["ts"] < starts[1]:
            continue
        ms, calls = per_run.get(e["args"]["op_name"], (0.0, 0))
        per_run[e["args"]["op_name"]] = (ms + e["dur"] / 1e3 / runs, calls + 1 / runs)
    return per_run


def held_cache_step(session, layout, context):
    """fn() running one decode step at `context` with octet holding the KV cache, or None
    when it cannot hold this model's."""
    import octet
    try:
        cache = session.new_kv_cache(reserve_rows=context)
    except octet.OctetError:
        return None
    prefill = feeds_for(layout, context - 1, 0, seed=1)
    session.run(["logits"], {n: v for n, v in prefill.items() if n not in cache.inputs},
                kv_cache=cache)
    step = {n: v for n, v in feeds_for(layout, 1, context - 1).items() if n not in cache.inputs}

    def run():
        cache.truncate(context - 1)
        return session.run(["logits"], step, kv_cache=cache)
    return run


def print_profile(label, path, phase, tokens, threads, ops, top):
    best = sorted(ops.items(), key=lambda item: -item[1][0])[:top]
    print("%s kernel ms per run, %s %s %d, %d thread(s): %s (all ops %.2f ms, %d nodes run)" % (
        label, os.path.basename(path), phase, tokens, threads,
        ", ".join("%s %.3f" % (op, ms) for op, (ms, _) in best),
        sum(ms for ms, _ in ops.values()), sum(c for _, c in ops.values())))


def bench_model(path, threads, args):
    sessions = {engine: measure.make_session(engine, path, threads) for engine in ENGINES}
    if args.forward:
        import octet
        sessions["octet-int8"] = octet.InferenceSession(path, threads=threads,
                                                        float_matmul="int8")
    layout = cache_layout(sessions["octet"])
    last_row = None
    if args.last_row:
        import octet
        last_row = octet.InferenceSession(path, threads=threads, last_row_outputs=["logits"])
    rows = []
    if args.load:
        # A fresh session per call (released, quickly, inside the timing).
        fns = {e: (lambda e=e: measure.make_session(e, path, threads)) for e in ENGINES}
        samples = measure.alternate(fns, rounds=args.rounds, warmup=1)
        for engine in fns:
            rows.append({"model": os.path.basename(path), "engine": engine, "threads": threads,
                         "phase": "load", "tokens": 0, "context": 0,
                         "load_ms": measure.summary([1e3 * s.wall for s in samples[engine]])})
    cases = [("prefill", p, 0) for p in args.prefill] + [("decode", 1, args.context - 1)]
    for phase, tokens, past in cases:
        feeds = feeds_for(layout, tokens, past)
        fns = {e: (lambda s=s: s.run(None, feeds)) for e, s in sessions.items()}
        held = held_cache_step(sessions["octet"], layout, args.context) \
            if phase == "decode" else None
        if held:
            fns["octet-kv"] = held
        if last_row and phase == "prefill":
            fns["octet-last"] = lambda: last_row.run(None, feeds)
        samples = measure.alternate(fns, rounds=args.rounds, warmup=1,
                                    calls=args.steps if phase == "decode" else 1)
        for engine in fns:
            walls = [1e3 * s.wall / tokens for s in samples[engine]]
            rows.append({"model": os.path.basename(path), "engine": engine, "threads": threads,
                         "phase": phase, "tokens": tokens, "context": past + tokens,
                         "ms_per_token": measure.summary(walls)})
        if args.profile:
            for engine in ("octet", "octet-kv"):
                if engine in fns:
                    ops = op_profile(sessions["octet"], fns[engine], args.rounds)
                    print_profile(engine, path, phase, tokens, threads, ops, args.profile)
            ops = ort_op_profile(path, threads, feeds, args.rounds)
            print_profile("ort", path, phase, tokens, threads, ops, args.profile)
    if args.rss:
        with tempfile.TemporaryDirectory() as tmp:
            feeds_path = os.path.join(tmp, "feeds.npz")
            np.savez(feeds_path, **feeds_for(layout, 1, args.context - 1))
            for row in rows:
                if row["phase"] == "decode" and row["engine"] in ENGINES:
                    row["peak_rss_mib"] = measure.peak_rss(row["engine"], path, threads,
                                                           feeds_path)["peak_kib"] / 1024
    return rows


def bench_llama_cpp(gguf, threads, args):
    try:
        import llama_cpp
    except ImportError:
        print("llama.cpp: llama_cpp is not installed (pip install llama-cpp-python==0.3.36, "
              "built from source)", file=sys.stderr)
        return []
    llm = llama_cpp.Llama(model_path=gguf, n_threads=threads, n_threads_batch=threads,
                          n_ctx=max(args.prefill + [args.context]) + 16, verbose=False)
    rng = np.random.default_rng(0)
    rows = []

    def timed(fn, tokens):
        walls = []
        for _ in range(args.rounds):
            walls.append(1e3 * fn() / tokens)
        return measure.summary(walls)

    for p in args.prefill:
        prompt = rng.integers(0, 1000, p).tolist()

        def prefill():
            llm.reset()
            start = time.perf_counter()
            llm.eval(prompt)
            return time.perf_counter() - start
        rows.append({"model": os.path.basename(gguf), "engine": "llama.cpp", "threads": threads,
                     "phase": "prefill", "tokens": p, "context": p,
                     "ms_per_token": timed(prefill, p)})
    history = rng.integers(0, 1000, args.context - 1).tolist()

    def decode():
        llm.n_tokens = args.context - 1  # drop the previous round's token: context stays fixed
        start = time.perf_counter()
        llm.eval([7])
        return time.perf_counter() - start
    llm.reset()
    llm.eval(history)
    rows.append({"model": os.path.basename(gguf), "engine": "llama.cpp", "threads": threads,
                 "phase": "decode", "tokens": 1, "context": args.context,
                 "ms_per_token": timed(decode, 1)})
    return rows


def print_load_table(rows):
    header = ["model", "threads", "engine", "min load ms", "median load ms", "ORT/engine"]
    table = []
    for row in rows:
        ort_row = next(r for r in rows if r["engine"] == "ort" and r["model"] == row["model"]
                       and r["threads"] == row["threads"])
        table.append([row["model"], row["threads"], row["engine"], "%.0f" % row["load_ms"]["min"],
                      "%.0f" % row["load_ms"]["median"],
                      "%.2f" % (ort_row["load_ms"]["min"] / row["load_ms"]["min"])])
    print(format_table(header, table))


def print_table(rows, weight_bytes, read_rates):
    header = ["model", "phase", "tokens", "threads", "engine", "min ms/tok", "median ms/tok",
              "ORT/engine", "weights GB/s", "of read rate", "peak RSS MiB"]
    loads = [r for r in rows if r["phase"] == "load"]
    if loads:
        print_load_table(loads)
    rows = [r for r in rows if r["phase"] != "load"]
    table = []
    for row in rows:
        ort_row = next((r for r in rows if r["engine"] == "ort" and r["model"] == row["model"]
                        and r["phase"] == row["phase"] and r["tokens"] == row["tokens"]
                        and r["threads"] == row["threads"]), None)
        ratio = "%.2f" % (ort_row["ms_per_token"]["min"] / row["ms_per_token"]["min"]) \
            if ort_row else ""
        rate = share = ""
        if row["phase"] == "decode" and row["model"] in weight_bytes:
            gbs = weight_bytes[row["model"]] / (row["ms_per_token"]["min"] * 1e6)
            rate, share = "%.1f" % gbs, "%.0f%%" % (100 * gbs / read_rates[row["threads"]])
        table.append([row["model"], row["phase"], row["tokens"], row["threads"], row["engine"],
                      "%.2f" % row["ms_per_token"]["min"], "%.2f" % row["ms_per_token"]["median"],
                      ratio, rate, share,
                      "%.0f" % row["peak_rss_mib"] if "peak_rss_mib" in row else ""])
    print(format_table(header, table))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", metavar="MODEL")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--prefill", default="32,256")
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1,
                        help="decode steps per engine and round, back to back as a generation "
                        "runs them (a round's time is their mean; 1: each engine's step comes "
                        "after the others', with the caches they left)")
    parser.add_argument("--forward", action="store_true",
                        help='also octet with float_matmul="int8" (engine octet-int8)')
    parser.add_argument("--last-row", action="store_true",
                        help='prefill also with the last position\'s logits only (engine '
                        'octet-last: last_row_outputs=["logits"], what octet generate runs)')
    parser.add_argument("--load", action="store_true",
                        help="also time session creation (load, rewrite, weight packing), "
                        "octet and ONNX Runtime in alternating rounds")
    parser.add_argument("--gguf", metavar="FILE")
    parser.add_argument("--rss", action="store_true")
    parser.add_argument("--profile", type=int, default=0, metavar="N",
                        help="print octet's and ONNX Runtime's N op types with the most kernel "
                             "time per phase, and the nodes run per step")
    parser.add_argument("--json", metavar="OUT")
    args = parser.parse_args()
    args.threads = [int(t) for t in args.threads.split(",")]
    args.prefill = [int(p) for p in args.prefill.split(",")]
    import octet
    print(host.describe(octet))
    def print_rates(when, rates):
        print("memory read rate %s (numpy sum over 1 GiB): " % when +
              ", ".join("%d thread(s) %.1f GB/s" % (t, r) for t, r in rates.items()))

    before = {t: memory_read_rate(t) for t in args.threads}
    print_rates("before the runs", before)
    rows, weight_bytes = [], {}
    for path in args.models:
        weight_bytes[os.path.basename(path)] = streamed_weight_bytes(path)
        for threads in args.threads:
            print("%s, %d thread(s)..." % (os.path.basename(path), threads), file=sys.stderr)
            rows += bench_model(path, threads, args)
    if args.gguf:
        for threads in args.threads:
            rows += bench_llama_cpp(args.gguf, threads, args)
    # A shared machine's read rate moves from minute to minute: the shares take the
    # higher of a measurement before and one after the runs.
    after = {t: memory_read_rate(t) for t in args.threads}
    print_rates("after the runs", after)
    read_rates = {t: max(before[t], after[t]) for t in args.threads}
    print_table(rows, weight_bytes, read_rates)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"host": host.describe(octet), "read_rate_gbs": read_rates,
                       "read_rate_before_gbs": before, "read_rate_after_gbs": after,
                       "weight_bytes": weight_bytes, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
