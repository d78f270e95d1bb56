#!/usr/bin/env python3
"""Runs the bundled default model through octet and through ONNX Runtime and
says whether they agree.

    python tools/demo.py [--model M.onnx --input X.npy] [--threads N]

Exit status 0 when octet's output equals ONNX Runtime's (CPU EP, ORT_ENABLE_ALL)
bit for bit, 1 otherwise.
"""

import argparse
import os
import sys

import numpy as np
import onnxruntime as ort

import octet

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODELS = os.path.join(ROOT, "build", "models")


def run_ort(model_path, feeds):
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def show(label, outputs, names):
    for name, value in zip(names, outputs):
        flat = value.reshape(-1)
        print("  %-12s %s %s %s" % (label, name, value.dtype, list(value.shape)))
        print("  %-12s first values: %s" % ("", np.array2string(flat[:6], precision=5)))
        if value.ndim == 2:
            print("  %-12s argmax per row: %s" % ("", value.argmax(axis=1).tolist()))


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", default=os.path.join(MODELS, "default_mlp.int8.onnx"))
    parser.add_argument("--input", default=os.path.join(MODELS, "default_mlp.input.npy"),
                        help=".npy for the model's first input")
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()

    session = octet.InferenceSession(args.model, threads=args.threads)
    feeds = {session.get_inputs()[0].name: np.load(args.input)}
    names = [o.name for o in session.get_outputs()]
    print("model: %s" % args.model)
    print("input: %s %s %s" % (args.input, feeds[next(iter(feeds))].dtype,
                               list(feeds[next(iter(feeds))].shape)))
    ours = session.run(None, feeds)
    theirs = run_ort(args.model, feeds)
    show("octet", ours, names)
    show("onnxruntime", theirs, names)

    all_equal = True
    for name, a, b in zip(names, ours, theirs):
        equal = a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)
        all_equal &= equal
        line = "%s: %s" % (name, "bit-exact match" if equal else "DIFFERENT")
        if a.shape == b.shape and np.issubdtype(a.dtype, np.number):
            diff = np.abs(a.astype(np.float64) - b.astype(np.float64))
            line += ", max abs diff %.3g" % (diff.max() if diff.size else 0.0)
            if a.ndim == 2 and a.size:
                agree = int((a.argmax(axis=1) == b.argmax(axis=1)).sum())
                line += ", classes agree %d/%d" % (agree, a.shape[0])
        print(line)
    print("RESULT: octet %s onnxruntime %s" % ("matches" if all_equal else "does NOT match",
                                              ort.__version__))
    return 0 if all_equal else 1


if __name__ == "__main__":
    sys.exit(main())
