"""Finds ONNX Runtime 1.31.1's float order for requantizing int32 accumulators.

Runs single-node QLinearMatMul / QLinearConv models in onnxruntime (CPU EP,
ORT_DISABLE_ALL and ORT_ENABLE_ALL) with crafted scales and values, and counts
how many outputs each candidate formula predicts exactly. docs/int8.md
("Integer matmul and convolution") records the result.

    .venv/bin/python tools/probe_ort_requant.py
"""

import numpy as np
import onnxruntime as ort
from onnx import helper, numpy_helper

LEVELS = {"DISABLE_ALL": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
          "ENABLE_ALL": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
F32 = np.float32


def run_model(nodes, inputs, initializers, out_name, feeds, level):
    out_type = helper.np_dtype_to_tensor_dtype(initializers["y_zp"].dtype)
    out = helper.make_tensor_value_info(out_name, out_type, None)
    graph = helper.make_graph(nodes, "probe", inputs, [out],
                              [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    opts = ort.SessionOptions()
    opts.graph_optimization_level = LEVELS[level]
    sess = ort.InferenceSession(model.SerializeToString(), opts,
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)[0]


def qlinear_matmul(a, b, a_scale, a_zp, b_scale, b_zp, y_scale, y_zp, level):
    """a is fed as a graph input, everything else is an initializer."""
    inits = {"a_scale": a_scale, "a_zp": a_zp, "b": b, "b_scale": b_scale, "b_zp": b_zp,
             "y_scale": y_scale, "y_zp": y_zp}
    node = helper.make_node("QLinearMatMul", ["a", "a_scale", "a_zp", "b", "b_scale", "b_zp",
                                              "y_scale", "y_zp"], ["y"])
    a_info = helper.make_tensor_value_info("a", helper.np_dtype_to_tensor_dtype(a.dtype), a.shape)
    return run_model([node], [a_info], inits, "y", {"a": a}, level)


def qlinear_conv_1x1(x, w, x_scale, x_zp, w_scale, w_zp, y_scale, y_zp, level, bias=None,
                     group=1):
    """x: [1, C, 1, W]; w: [Cout, C/group, 1, 1]."""
    inits = {"x_scale": x_scale, "x_zp": x_zp, "w": w, "w_scale": w_scale, "w_zp": w_zp,
             "y_scale": y_scale, "y_zp": y_zp}
    names = ["x", "x_scale", "x_zp", "w", "w_scale", "w_zp", "y_scale", "y_zp"]
    if bias is not None:
        inits["bias"] = bias
        names.append("bias")
    node = helper.make_node("QLinearConv", names, ["y"], group=group)
    x_info = helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype), x.shape)
    return run_model([node], [x_info], inits, "y", {"x": x}, level)


def requant(acc, multiplier, y_zp, qmin, qmax):
    """The candidate epilogue: float(acc) * m, clamp to [qmin-zp, qmax-zp], round half even, +zp."""
    v = acc.astype(F32) * multiplier
    v = np.minimum(np.maximum(v, F32(qmin - y_zp)), F32(qmax - y_zp))
    return (np.rint(v).astype(np.int64) + y_zp).astype(np.int64)


MULTIPLIERS = {
    "(a*b)/y": lambda a, b, y: (F32(a) * b) / F32(y),
    "a*(b/y)": lambda a, b, y: F32(a) * (b / F32(y)),
    "(a/y)*b": lambda a, b, y: (F32(a) / F32(y)) * b,
    "a*b*(1/y)": lambda a, b, y: (F32(a) * b) * (F32(1) / F32(y)),
    "double(a*b/y)": lambda a, b, y: (np.float64(a) * b.astype(np.float64) / np.float64(y)).astype(F32),
}


def score_multiplier_orders(run_op, label):
    """Per-column B scales give N multipliers per run; K=1 makes acc = (a-za)(b-zb) exact."""
    rng = np.random.default_rng(1)
    totals = {k: 0 for k in MULTIPLIERS}
    count = 0
    for trial in range(40):
        n = 256
        a_scale = F32(rng.uniform(0.001, 0.1))
        y_scale = F32(rng.uniform(0.001, 0.1))
        b_scale = rng.uniform(0.001, 0.1, n).astype(F32)
        a = rng.integers(0, 256, (64, 1), dtype=np.uint8)
        b = rng.integers(-128, 128, (1, n), dtype=np.int8)
        a_zp, y_zp = np.uint8(128), np.uint8(128)
        y = run_op(a, b, a_scale, a_zp, b_scale, y_scale, y_zp).astype(np.int64)
        acc = (a.astype(np.int64) - 128) * b.astype(np.int64)
        for k, f in MULTIPLIERS.items():
            totals[k] += int((requant(acc, f(a_scale, b_scale, y_scale)[None, :], 128, 0, 255) == y).sum())
        count += y.size
    print(f"{label}: outputs matching each multiplier order (of {count}):")
    for k, v in totals.items():
        print(f"    {k:16s} {v}")


def probe_matmul_order(level):
    def run_op(a, b, a_scale, a_zp, b_scale, y_scale, y_zp):
        return qlinear_matmul(a, b, a_scale, a_zp, b_scale, np.zeros(b.shape[1], np.int8),
                              y_scale, y_zp, level)
    score_multiplier_orders(run_op, f"QLinearMatMul {level}")


def probe_conv_order(level):
    def run_op(a, b, a_scale, a_zp, b_scale, y_scale, y_zp):
        # a [M,1] -> x [1,1,1,M]; b [1,N] -> w [N,1,1,1]; y [1,N,1,M] -> [M,N]
        x = a.reshape(1, 1, 1, -1)
        w = b.reshape(-1, 1, 1, 1)
        y = qlinear_conv_1x1(x, w, a_scale, a_zp, b_scale, np.zeros(w.shape[0], np.int8),
                             y_scale, y_zp, level)
        return y.reshape(w.shape[0], -1).T
    score_multiplier_orders(run_op, f"QLinearConv {level}")


def probe_ties_and_saturation(level):
    """Scales 0.5*1/1 put every odd accumulator exactly on a .5 tie."""
    acc_values = np.arange(-300, 301, dtype=np.int64)
    a = (acc_values + 128).clip(0, 255).astype(np.uint8)  # a - 128 in [-128, 127]
    acc = a.astype(np.int64) - 128
    for y_zp, dt, (qmin, qmax) in [(0, np.uint8, (0, 255)), (255, np.uint8, (0, 255)),
                                   (128, np.uint8, (0, 255)), (-128, np.int8, (-128, 127)),
                                   (127, np.int8, (-128, 127)), (0, np.int8, (-128, 127))]:
        b = np.ones((1, 1), np.int8)
        y = qlinear_matmul(a.reshape(-1, 1), b, F32(0.5), np.uint8(128), F32(1.0), np.int8(0),
                           F32(1.0), dt(y_zp), level).reshape(-1).astype(np.int64)
        half_even = requant(acc, F32(0.5), y_zp, qmin, qmax)
        half_away = np.clip(np.trunc(acc * 0.5 + np.sign(acc) * 0.5) + y_zp, qmin, qmax)
        print(f"ties {level} y_zp={y_zp} ({dt.__name__}): half-even matches "
              f"{int((half_even == y).sum())}/{y.size}, half-away matches "
              f"{int((half_away == y).sum())}/{y.size}")


def probe_overflow(level):
    """acc * multiplier beyond int32: clamp-before-convert saturates to qmax, a bare
    cvtps2dq would give INT32_MIN and saturate to qmin."""
    a = np.array([[255], [0]], np.uint8)
    for name, run in [
        ("QLinearMatMul", lambda zp: qlinear_matmul(a, np.full((1, 1), 127, np.int8), F32(1.0),
                                                    np.uint8(0), F32(1.0), np.int8(0), F32(1e-30),
                                                    zp, level).reshape(-1)),
        ("QLinearConv", lambda zp: qlinear_conv_1x1(a.reshape(1, 1, 1, 2),
                                                    np.full((1, 1, 1, 1), 127, np.int8), F32(1.0),
                                                    np.uint8(0), F32(1.0), np.int8(0), F32(1e-30),
                                                    zp, level).reshape(-1))]:
        print(f"overflow {level} {name}: u8 zp=0 -> {run(np.uint8(0)).tolist()}, "
              f"s8 zp=0 -> {run(np.int8(0)).tolist()} (acc 32385 and 0, multiplier 1e30)")


def probe_bias_conversion(level):
    """Is the bias added as int32 before the float conversion? acc=1, bias=2^24+1 and a
    multiplier of 2^-25: int32 sum 2^24+2 converts exactly and gives 0.5+2^-24 -> 1;
    float(acc)+float(bias) gives 2^24 -> 0.5 -> 0 (tie to even)."""
    x = np.array([[[[1]]]], np.uint8)
    w = np.array([[[[1]]]], np.int8)
    bias = np.array([2 ** 24 + 1], np.int32)
    conv = qlinear_conv_1x1(x, w, F32(1.0), np.uint8(0), F32(1.0), np.int8(0), F32(2 ** 25),
                            np.int8(0), level, bias=bias)
    print(f"bias {level}: QLinearConv acc=1 bias=2^24+1 multiplier=2^-25 -> "
          f"{int(conv.reshape(-1)[0])} (int32 add first: 1, float add: 0)")


def main():
    for level in LEVELS:
        probe_matmul_order(level)
        probe_conv_order(level)
        probe_ties_and_saturation(level)
        probe_overflow(level)
        probe_bias_conversion(level)


if __name__ == "__main__":
    main()
