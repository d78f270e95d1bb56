"""Two octet sessions of one KV-cache decoder, interleaved: a rewrite A/B.

The environment settings read at session creation (OCTET_QDQ_SIBLINGS=0, OCTET_QDQ_LOOKUP=0,
...) make the control session; the other is created without them. Decode: each session
holds its KV cache (InferenceSession.new_kv_cache) at --context - 1 positions and runs one
new token per step, truncated back before each; a round runs --steps steps of each session
in turn (every other round the other first), so a load burst on a shared machine hits both.
With --prefill N, rounds of one N-token prompt each (an empty cache) follow. The table gives
min and median ms over all rounds and control / default (above 1: the default session is
faster). The two sessions' logits must be the same bytes, since a rewrite does not change
them; the script stops with an error if they are not.

    .venv/bin/python tools/ab_llm.py build/models/smollm2-135m.cached.nbits_b32_acc4.onnx \\
        --control OCTET_QDQ_SIBLINGS=0 [--threads 1,2] [--context 256] [--rounds 20] \\
        [--steps 10] [--prefill 256]

docs/benchmarks.md keeps the results per CPU class."""

import argparse
import os
import statistics
import time

import bench_llm
import host


def make_session(path, threads, settings):
    import octet
    saved = {name: os.environ.get(name) for name in settings}
    os.environ.update(settings)
    try:
        session = octet.InferenceSession(path, threads=threads)
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name)
            else:
                os.environ[name] = value
    return session


def decode_step(session, context):
    step = bench_llm.held_cache_step(session, bench_llm.cache_layout(session), context)
    if step is None:
        raise SystemExit("error: octet cannot hold this model's KV cache")
    return step


def prompt_run(session, tokens):
    feeds = bench_llm.feeds_for(bench_llm.cache_layout(session), tokens, 0)
    return lambda: session.run(["logits"], feeds)


def compare(label, runs, rounds, calls, what):
    """Interleaved rounds of runs {name: fn}: prints min / median ms and the ratio."""
    logits = {name: fn()[0] for name, fn in runs.items()}
    if logits[label].tobytes() != logits["default"].tobytes():
        raise SystemExit("error: the two sessions' logits differ")
    times = {name: [] for name in runs}
    for r in range(rounds):
        for name in (list(runs) if r % 2 == 0 else list(runs)[::-1]):
            for _ in range(calls):
                start = time.perf_counter()
                runs[name]()
                times[name].append(1e3 * (time.perf_counter() - start))
    for name, t in times.items():
        print("%s, %s: min %.3f median %.3f ms" % (what, name, min(t), statistics.median(t)))
    print("  %s / default: min %.3f median %.3f" % (
        label, min(times[label]) / min(times["default"]),
        statistics.median(times[label]) / statistics.median(times["default"])))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("model")
    parser.add_argument("--control", action="append", required=True, metavar="NAME=VALUE",
                        help="an environment setting of the control session (repeatable)")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--context", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--prefill", type=int, default=0, metavar="TOKENS")
    args = parser.parse_args()
    settings = dict(s.split("=", 1) for s in args.control)
    label = " ".join(args.control)
    import octet
    print(host.describe(octet))
    for threads in [int(t) for t in args.threads.split(",")]:
        sessions = {label: make_session(args.model, threads, settings),
                    "default": make_session(args.model, threads, {})}
        what = "%s, %d thread(s)" % (os.path.basename(args.model), threads)
        compare(label, {n: decode_step(s, args.context) for n, s in sessions.items()},
                args.rounds, args.steps, "%s, decode at context %d, per step" % (what, args.context))
        if args.prefill:
            compare(label, {n: prompt_run(s, args.prefill) for n, s in sessions.items()},
                    args.rounds, 1, "%s, prefill of %d tokens" % (what, args.prefill))


if __name__ == "__main__":
    main()
