"""Times octet alone on one benchmark model: the A/B half of the kernel work.

The models are the ones the ORT comparisons build: a QLinearConv of
tools/bench_conv_vs_ort.py or a single-node matmul case of tools/bench_vs_ort.py.
Prints the best of --rounds rounds of --runs session.run calls as CPU time of this
process. To compare two builds, run this alternately with PYTHONPATH set to each
build's module (a package folder holding octet/ and its _octet*.so); the machine is
shared, so compare rounds of the same minutes, not runs of different hours. For
`perf record`, raise --runs: start-up is a fraction of a second.

    .venv/bin/python tools/time_octet.py conv 48 96 104 3 2     # C M size kernel stride
    .venv/bin/python tools/time_octet.py matmul qdq_s8 512      # kind M [K N]
"""

from __future__ import annotations

import argparse

import numpy as np
import octet

import bench_conv_vs_ort
import bench_vs_ort
import measure  # octet bench's timer and rounds (python/octet/measure.py)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--runs", type=int, default=30, help="session.run calls per round")
    parser.add_argument("--rounds", type=int, default=7)
    sub = parser.add_subparsers(dest="what", required=True)
    conv = sub.add_parser("conv", help="a QLinearConv (u8 x, s8 per-channel weights, u8 y)")
    for name in ("channels", "out_channels", "size", "kernel", "stride"):
        conv.add_argument(name, type=int)
    conv.add_argument("--group", type=int, default=1)
    matmul = sub.add_parser("matmul", help="a tools/bench_vs_ort.py case")
    matmul.add_argument("kind", choices=bench_vs_ort.KINDS)
    matmul.add_argument("m", type=int)
    matmul.add_argument("k", type=int, nargs="?", default=1024)
    matmul.add_argument("n", type=int, nargs="?", default=1024)
    args = parser.parse_args()

    rng = np.random.default_rng(0)
    if args.what == "conv":
        model = bench_conv_vs_ort.make_model(args.channels, args.out_channels, args.group,
                                             args.size, args.kernel, args.stride,
                                             args.kernel // 2, rng)
        feeds = {"x": rng.integers(0, 256, size=(1, args.channels, args.size, args.size),
                                   dtype=np.uint8)}
        label = (f"conv{args.kernel}x{args.kernel}{f's{args.stride}' if args.stride > 1 else ''}"
                 f"_{args.channels}to{args.out_channels}_{args.size}")
    else:
        case = bench_vs_ort.Case(args.kind, args.m, args.k, args.n, rng)
        model, feeds = case.model, case.feeds
        label = f"{args.kind} {args.m}x{args.k}x{args.n}"
    session = octet.InferenceSession(model, threads=args.threads)
    samples = measure.alternate({"octet": lambda: session.run(None, feeds)}, rounds=args.rounds,
                                warmup=3, calls=args.runs)
    best = min(s.cpu for s in samples["octet"])
    print(f"{label} threads={args.threads}: {best * 1e6:.0f} us (octet: {octet.__file__})")


if __name__ == "__main__":
    main()
