"""octet against ONNX Runtime 1.31.1 on single QLinearConv nodes, in one process.

The shapes are bench/conv_bench.cc's (typical CNN layers, batch 1): u8 x, s8 weights
(zero point 0, per-channel scales), int32 bias, u8 output. Each model is built with
onnx.helper, run in both engines with the same inputs (outputs must be equal, bit for
bit), then timed: the best of --repeats rounds of --loops session.run calls, the engines
taking turns round by round, as CPU time of this process (time.process_time) and wall
time. Both include each engine's per-run overhead. The machine is shared: compare the
columns of one run, not runs.

    .venv/bin/python tools/bench_conv_vs_ort.py [--threads 1] [--loops 20] [--repeats 5]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import octet
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

# name, in_channels, out_channels, group, size, kernel, stride, pad (as bench/conv_bench.cc)
SHAPES = [
    ("stem3x3s2_3to32_224", 3, 32, 1, 224, 3, 2, 1),
    ("conv3x3_64to64_56", 64, 64, 1, 56, 3, 1, 1),
    ("conv3x3_128to128_28", 128, 128, 1, 28, 3, 1, 1),
    ("conv3x3_256to256_14", 256, 256, 1, 14, 3, 1, 1),
    ("conv3x3s2_128to256_28", 128, 256, 1, 28, 3, 2, 1),
    ("conv1x1_64to256_56", 64, 256, 1, 56, 1, 1, 0),
    ("conv1x1_256to64_56", 256, 64, 1, 56, 1, 1, 0),
    ("conv1x1_1024to256_14", 1024, 256, 1, 14, 1, 1, 0),
    ("dw3x3_32_112", 32, 32, 32, 112, 3, 1, 1),
    ("dw3x3s2_144_56", 144, 144, 144, 56, 3, 2, 1),
    ("dw3x3_576_14", 576, 576, 576, 14, 3, 1, 1),
]


def make_model(c, m, group, size, kernel, stride, pad, rng):
    w = rng.integers(-128, 128, size=(m, c // group, kernel, kernel), dtype=np.int8)
    w_scale = rng.uniform(0.002, 0.02, size=m).astype(np.float32)
    bias = rng.integers(-5000, 5000, size=m, dtype=np.int32)
    inits = [
        numpy_helper.from_array(np.array(0.05, np.float32), "x_scale"),
        numpy_helper.from_array(np.array(119, np.uint8), "x_zero"),
        numpy_helper.from_array(w, "w"),
        numpy_helper.from_array(w_scale, "w_scale"),
        numpy_helper.from_array(np.zeros(m, np.int8), "w_zero"),
        numpy_helper.from_array(np.array(0.5, np.float32), "y_scale"),
        numpy_helper.from_array(np.array(128, np.uint8), "y_zero"),
        numpy_helper.from_array(bias, "bias"),
    ]
    node = helper.make_node(
        "QLinearConv",
        ["x", "x_scale", "x_zero", "w", "w_scale", "w_zero", "y_scale", "y_zero", "bias"],
        ["y"],
        group=group,
        kernel_shape=[kernel, kernel],
        strides=[stride, stride],
        pads=[pad] * 4,
    )
    out = (size + 2 * pad - kernel) // stride + 1
    graph = helper.make_graph(
        [node],
        "conv",
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, c, size, size])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, [1, m, out, out])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 10)])
    model.ir_version = 8
    return model.SerializeToString()


def best_times(runs, loops, repeats):
    """Best (CPU, wall) seconds per call of each function in `runs`. The engines take
    turns round by round, so a burst of load from other processes hits both alike."""
    best = [[float("inf"), float("inf")] for _ in runs]
    for _ in range(repeats):
        for run, b in zip(runs, best):
            c0, w0 = time.process_time(), time.perf_counter()
            for _ in range(loops):
                run()
            b[0] = min(b[0], (time.process_time() - c0) / loops)
            b[1] = min(b[1], (time.perf_counter() - w0) / loops)
    return best


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--loops", type=int, default=20)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--filter", default="")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"threads={args.threads}; per run: best of {args.repeats} x {args.loops} runs")
    print("| shape | GOP | octet CPU us | ORT CPU us | ORT/octet (CPU) | octet wall us | ORT wall us |")
    print("|---|---|---|---|---|---|---|")
    for name, c, m, group, size, kernel, stride, pad in SHAPES:
        if args.filter not in name:
            continue
        model = make_model(c, m, group, size, kernel, stride, pad, rng)
        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        options.inter_op_num_threads = 1
        ort_session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        octet_session = octet.InferenceSession(model, threads=args.threads)
        x = rng.integers(0, 256, size=(1, c, size, size), dtype=np.uint8)
        want = ort_session.run(None, {"x": x})[0]
        got = octet_session.run(None, {"x": x})[0]
        if not np.array_equal(want, got):
            raise SystemExit(f"{name}: octet differs from ONNX Runtime in {np.sum(want != got)} values")
        out = (size + 2 * pad - kernel) // stride + 1
        gop = 2.0 * m * out * out * (c // group) * kernel * kernel * 1e-9
        (octet_cpu, octet_wall), (ort_cpu, ort_wall) = best_times(
            [lambda: octet_session.run(None, {"x": x}), lambda: ort_session.run(None, {"x": x})],
            args.loops,
            args.repeats,
        )
        print(
            f"| {name} | {gop:.3f} | {octet_cpu * 1e6:.0f} | {ort_cpu * 1e6:.0f} | "
            f"{ort_cpu / octet_cpu:.2f}x | {octet_wall * 1e6:.0f} | {ort_wall * 1e6:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
