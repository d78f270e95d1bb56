"""Alternates two or more Google Benchmark binaries round by round: a build A/B.

Each round runs every binary once on the same --benchmark_filter (in turn, so a
load burst on the shared machine hits all of them; every other round in reverse
order); the table gives each
benchmark's minimum CPU time per binary over the rounds and the ratio of the
first binary's time to each other's (above 1: the other is faster). A binary
may be given as a shell-like line with environment settings first, to compare
two paths of one binary.

    .venv/bin/python tools/ab_bench.py --rounds 4 \\
        --filter 'BM_QLinearConv/shape:(1[1-9]|[23][0-9]|4[0-5])/threads:1$' \\
        /tmp/base/conv_bench build/gemm/conv_bench
    .venv/bin/python tools/ab_bench.py --filter 'int8:1/cold:0' \\
        'OCTET_ISA=avx512 build/release/nbits_bench' \\
        'OCTET_ISA=avx512vnni build/release/nbits_bench'
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess


def run_once(binary: str, bench_filter: str, min_time: str) -> dict[str, float]:
    words = shlex.split(binary)
    settings = {}
    while len(words) > 1 and "=" in words[0] and not words[0].startswith(("/", ".")):
        name, value = words.pop(0).split("=", 1)
        settings[name] = value
    out = subprocess.run(
        words + [f"--benchmark_filter={bench_filter}", "--benchmark_format=json",
                 f"--benchmark_min_time={min_time}"],
        check=True, capture_output=True, text=True, env={**os.environ, **settings}).stdout
    times = {}
    for bench in json.loads(out)["benchmarks"]:
        if bench.get("run_type", "iteration") != "iteration":
            continue
        scale = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6}[bench["time_unit"]]
        times[bench["name"]] = bench["cpu_time"] * scale
    return times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--filter", required=True, help="--benchmark_filter for every binary")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--min-time", default="0.2", help="--benchmark_min_time per run")
    parser.add_argument("binaries", nargs="+", help="the first is the base of the ratios")
    args = parser.parse_args()
    if len(args.binaries) < 2:
        parser.error("give at least two binaries")

    best: list[dict[str, float]] = [{} for _ in args.binaries]
    for round_index in range(args.rounds):
        # Every other round runs the binaries in reverse, so neither always runs first.
        order = list(enumerate(args.binaries))
        if round_index % 2:
            order.reverse()
        for i, binary in order:
            for name, t in run_once(binary, args.filter, args.min_time).items():
                best[i][name] = min(best[i].get(name, float("inf")), t)
        print(f"round {round_index + 1}/{args.rounds} done", flush=True)

    names = [n for n in best[0] if all(n in b for b in best[1:])]
    if not names:
        raise SystemExit(f"no benchmark matched {args.filter!r} in every binary")
    header = ["benchmark"] + [f"#{i} us" for i in range(len(args.binaries))]
    header += [f"#0/#{i}" for i in range(1, len(args.binaries))]
    print(" | ".join(header))
    totals = [0.0] * len(args.binaries)
    for name in names:
        row = [name] + [f"{b[name]:.1f}" for b in best]
        row += [f"{best[0][name] / b[name]:.3f}" for b in best[1:]]
        print(" | ".join(row))
        for i, b in enumerate(best):
            totals[i] += b[name]
    total_row = ["total"] + [f"{t:.1f}" for t in totals]
    total_row += [f"{totals[0] / t:.3f}" for t in totals[1:]]
    print(" | ".join(total_row))
    for i, binary in enumerate(args.binaries):
        print(f"#{i}: {binary}")


if __name__ == "__main__":
    main()
