#!/usr/bin/env python3
"""Creates, runs and destroys octet sessions many times and checks that the process's
resident memory stays flat (docs/reliability.md, "Leaks and soak").

    .venv/bin/python tools/soak.py [--iterations 10000] [--threads-max 2] [--max-growth-mib 8]

Each iteration takes the next model of a fixed rotation from build/fuzz/models (written by
tools/fuzz_seeds.py, run first when missing): QDQ and QOperator MLPs and CNNs, the tiny
MiniLM in its four quantized forms, and small models of the shape-driven ops. It makes a
session from the model's bytes (1 or 2 threads, alternating), runs it on fresh random
feeds, sometimes on feeds it must refuse (a wrong dtype, a shape beyond max_tensor_bytes),
and drops it. RSS (/proc/self/statm) is sampled every 1% of the iterations. After the first
10% (warm-up: allocator pools, octet's buffer cache, numpy) the samples must stay within
--max-growth-mib of their minimum; the script prints the samples' summary and exits 1
otherwise.
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "build", "fuzz", "models")
ROTATION = ["mlp.qdq_pc", "mlp.qop", "mlp.dynamic", "cnn.qdq_pc", "cnn.qop", "qlinear_conv",
            "ms_qlinear_binary", "qdq_lookup", "tiny_minilm.qdq_pc", "tiny_minilm.qdq_pt",
            "tiny_minilm.qop", "tiny_minilm.dynamic", "expand", "float_nn"]
NUMPY = {"tensor(float)": np.float32, "tensor(uint8)": np.uint8, "tensor(int8)": np.int8,
         "tensor(int64)": np.int64, "tensor(bool)": np.bool_}


def rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / (1 << 20)


def feeds_for(session, rng):
    """Random feeds with every symbolic dim 8 (large enough for the CNNs' windows; MiniLM ids 0
    and 1)."""
    feeds = {}
    for arg in session.get_inputs():
        shape = [d if isinstance(d, int) else 8 for d in arg.shape]
        dtype = NUMPY[arg.type]
        if dtype == np.float32:
            feeds[arg.name] = rng.standard_normal(shape).astype(np.float32)
        elif dtype == np.int64:
            feeds[arg.name] = rng.integers(0, 2, shape).astype(np.int64)
        elif dtype == np.bool_:
            feeds[arg.name] = rng.integers(0, 2, shape).astype(np.bool_)
        else:
            feeds[arg.name] = rng.integers(0, 256, shape).astype(dtype)
    return feeds


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=10000)
    parser.add_argument("--max-growth-mib", type=float, default=8.0,
                        help="allowed RSS growth after warm-up (default 8 MiB)")
    args = parser.parse_args()
    if not all(os.path.exists(os.path.join(MODELS, m + ".onnx")) for m in ROTATION):
        subprocess.run([sys.executable, os.path.join(ROOT, "tools", "fuzz_seeds.py")], check=True)
    import octet

    models = [open(os.path.join(MODELS, m + ".onnx"), "rb").read() for m in ROTATION]
    rng = np.random.default_rng(10000)
    every = max(1, args.iterations // 100)
    samples, refused, runs = [], 0, 0
    start = time.time()
    for i in range(args.iterations):
        session = octet.InferenceSession(models[i % len(models)], threads=1 + i % 2,
                                         max_tensor_bytes=1 << 24)
        feeds = feeds_for(session, rng)
        if ROTATION[i % len(models)] == "expand":
            feeds["shape"] = np.array([1 << 16, 1 << 16] if i % 3 == 0 else [3, 4], np.int64)
        if i % 7 == 3:  # a feed of the wrong dtype
            name = next(iter(feeds))
            feeds[name] = feeds[name].astype(np.float64)
        try:
            session.run(None, feeds)
            runs += 1
        except octet.OctetError:
            refused += 1
        del session
        if (i + 1) % every == 0:
            samples.append(rss_mib())
    seconds = time.time() - start
    settled = samples[len(samples) // 10:]
    growth = max(settled) - min(settled)
    print("soak: %d sessions created, run and destroyed in %.0f s (%d runs, %d refused feeds); "
          "RSS after warm-up %.1f .. %.1f MiB (growth %.1f MiB, allowed %.1f); first sample "
          "%.1f MiB, last %.1f MiB" % (args.iterations, seconds, runs, refused, min(settled),
                                       max(settled), growth, args.max_growth_mib, samples[0],
                                       samples[-1]))
    if growth > args.max_growth_mib:
        print("soak: FAILED: RSS grew by %.1f MiB after warm-up" % growth)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
