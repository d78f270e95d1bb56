"""octet against ONNX Runtime 1.31.1 on single QLinearConv nodes, in one process.

The shapes are bench/conv_bench.cc's (typical CNN layers, batch 1): u8 x, s8 weights
(zero point 0, per-channel scales), int32 bias, u8 output. Each model is built with
onnx.helper, run in both engines with the same inputs (outputs must be equal, bit for
bit, against ORT's exact form of the node: tools/ort_exact.py), then timed: the best of --repeats rounds of --loops session.run calls, the engines
taking turns round by round, as CPU time of this process (time.process_time) and wall
time. Both include each engine's per-run overhead. The machine is shared: compare the
columns of one run, not runs.

    .venv/bin/python tools/bench_conv_vs_ort.py [--threads 1] [--loops 20] [--repeats 5]

--shapes-from MODEL takes the shapes from a model's Conv / QLinearConv nodes instead
(distinct shapes, with how often each occurs; ONNX shape inference gives the sizes),
e.g. build/models/det-416.fp32.onnx, and ends with the count-weighted totals.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np
import octet
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper, shape_inference

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ort_exact  # noqa: E402

# name, in_channels, out_channels, group, size, kernel, stride, pad (as bench/conv_bench.cc);
# square images and kernels, symmetric pads
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


def shapes_from(path):
    """(name, c, m, group, size, kernel, stride, pad, count) for each distinct 2-D conv
    of the model at `path` (square, symmetric; anything else is refused)."""
    model = shape_inference.infer_shapes(onnx.load(path))
    dims = {
        v.name: [d.dim_value for d in v.type.tensor_type.shape.dim]
        for v in list(model.graph.value_info) + list(model.graph.input)
    }
    weights = {i.name: list(i.dims) for i in model.graph.initializer}
    counts = {}
    for node in model.graph.node:
        if node.op_type not in ("Conv", "QLinearConv"):
            continue
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        w = weights[node.input[1 if node.op_type == "Conv" else 3]]
        x = dims.get(node.input[0])
        if not x or len(x) != 4 or 0 in x:
            raise SystemExit(
                f"{node.name}: shape inference did not give the input's shape ({x}); "
                "try the model's float version (e.g. det-416.fp32.onnx)"
            )
        stride, pads = attrs.get("strides", [1, 1]), attrs.get("pads", [0, 0, 0, 0])
        if (
            len(w) != 4 or x[2] != x[3] or w[2] != w[3] or len(set(stride)) != 1
            or len(set(pads)) != 1 or set(attrs.get("dilations", [1, 1])) != {1}
            or attrs.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET")
        ):
            raise SystemExit(f"{node.name}: not a square, symmetric 2-D conv: {x} {w} {attrs}")
        group = attrs.get("group", 1)
        key = (w[1] * group, w[0], group, x[2], w[2], stride[0], pads[0])
        counts[key] = counts.get(key, 0) + 1
    out = []
    for (c, m, group, size, kernel, stride, pad), count in counts.items():
        kind = f"dw{kernel}x{kernel}" if group == c and group > 1 else f"conv{kernel}x{kernel}"
        name = f"{kind}{f's{stride}' if stride > 1 else ''}_{c}to{m}_{size}"
        out.append((name, c, m, group, size, kernel, stride, pad, count))
    return out


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
    parser.add_argument("--shapes-from", metavar="MODEL", help="benchmark this model's conv shapes")
    args = parser.parse_args()
    shapes = shapes_from(args.shapes_from) if args.shapes_from else [s + (1,) for s in SHAPES]
    rng = np.random.default_rng(0)
    print(f"threads={args.threads}; per run: best of {args.repeats} x {args.loops} runs")
    print(
        "| shape | count | GOP | octet CPU us | ORT CPU us | ORT/octet (CPU) "
        "| octet wall us | ORT wall us |"
    )
    print("|---|---|---|---|---|---|---|---|")
    totals = [0.0, 0.0]
    for name, c, m, group, size, kernel, stride, pad, count in shapes:
        if args.filter not in name:
            continue
        model = make_model(c, m, group, size, kernel, stride, pad, rng)
        options = ort.SessionOptions()
        options.intra_op_num_threads = args.threads
        options.inter_op_num_threads = 1
        # As tools/bench_models.py: ONNX Runtime's spinning workers would otherwise keep
        # the second core busy during octet's rounds.
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        ort_session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        octet_session = octet.InferenceSession(model, threads=args.threads)
        x = rng.integers(0, 256, size=(1, c, size, size), dtype=np.uint8)
        # The check runs ORT's exact form of the node (tools/ort_exact.py: without VNNI its
        # u8 x s8 kernel saturates); the timing runs the node as given, as a user would.
        exact_model, exact_feeds = ort_exact.for_ort(onnx.load_from_string(model), {"x": x})
        want = ort.InferenceSession(exact_model.SerializeToString(), options,
                                    providers=["CPUExecutionProvider"]).run(None, exact_feeds)[0]
        got = octet_session.run(None, {"x": x})[0]
        if not np.array_equal(want, got):
            raise SystemExit(f"{name}: octet differs from ONNX Runtime's exact form in "
                             f"{np.sum(want != got)} values")
        out = (size + 2 * pad - kernel) // stride + 1
        gop = 2.0 * m * out * out * (c // group) * kernel * kernel * 1e-9
        (octet_cpu, octet_wall), (ort_cpu, ort_wall) = best_times(
            [lambda: octet_session.run(None, {"x": x}), lambda: ort_session.run(None, {"x": x})],
            args.loops,
            args.repeats,
        )
        totals[0] += count * octet_cpu
        totals[1] += count * ort_cpu
        print(
            f"| {name} | {count} | {gop:.3f} | {octet_cpu * 1e6:.0f} | {ort_cpu * 1e6:.0f} | "
            f"{ort_cpu / octet_cpu:.2f}x | {octet_wall * 1e6:.0f} | {ort_wall * 1e6:.0f} |",
            flush=True,
        )
    print(
        f"| total (x count) | | | {totals[0] * 1e6:.0f} | {totals[1] * 1e6:.0f} | "
        f"{totals[1] / max(totals[0], 1e-12):.2f}x | | |"
    )


if __name__ == "__main__":
    main()
