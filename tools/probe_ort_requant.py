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
    """Random scales rarely tell the orders apart, so each trial crafts them: b_scale[n] walks
    64 ulps either side of t * y_scale / a_scale for a target multiplier t in {0.5, 0.75, 1.5},
    so some columns hit t exactly in one order and miss it by an ulp in another; K=1 and b=1
    make acc = a - 128 exact, and acc * t lands on .5 ties."""
    rng = np.random.default_rng(1)
    totals = {k: 0 for k in MULTIPLIERS}
    count = 0
    a = np.arange(256, dtype=np.uint8).reshape(-1, 1)
    acc = a.astype(np.int64) - 128
    for trial in range(30):
        target = F32([0.5, 0.75, 1.5][trial % 3])
        a_scale = F32(rng.uniform(0.001, 0.1))
        y_scale = F32(rng.uniform(0.001, 0.1))
        base = F32(target * y_scale / a_scale)
        steps = np.arange(-64, 64)
        b_scale = (base.view(np.int32) + steps).astype(np.int32).view(F32)
        b = np.ones((1, b_scale.size), np.int8)
        y = run_op(a, b, a_scale, np.uint8(128), b_scale, y_scale, np.uint8(128)).astype(np.int64)
        for k, f in MULTIPLIERS.items():
            m = f(a_scale, b_scale, y_scale)[None, :]
            totals[k] += int((requant(acc, m, 128, 0, 255) == y).sum())
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
    """Multiplier 0.5 puts every odd accumulator exactly on a .5 tie; zero points at the type
    limits push half the outputs into saturation. (ORT's output type equals a's type.)"""
    for y_zp, dt, (qmin, qmax) in [(0, np.uint8, (0, 255)), (255, np.uint8, (0, 255)),
                                   (128, np.uint8, (0, 255)), (-128, np.int8, (-128, 127)),
                                   (127, np.int8, (-128, 127)), (0, np.int8, (-128, 127))]:
        a_zp = 128 if dt == np.uint8 else 0
        a = np.arange(qmin, qmax + 1).astype(dt).reshape(-1, 1)
        acc = 3 * (a.astype(np.int64) - a_zp)  # b = 3: acc * 0.5 spans [-192, 190.5]
        b = np.full((1, 1), 3, dt)
        y = qlinear_matmul(a, b, F32(0.5), dt(a_zp), F32(1.0), dt(0), F32(1.0), dt(y_zp),
                           level).astype(np.int64)
        half_even = requant(acc, F32(0.5), y_zp, qmin, qmax)
        half_away = np.clip(np.trunc(acc * 0.5 + np.sign(acc) * 0.5) + y_zp, qmin, qmax)
        print(f"ties {level} y_zp={y_zp} ({dt.__name__}): half-even matches "
              f"{int((half_even == y).sum())}/{y.size}, half-away matches "
              f"{int((half_away == y).sum())}/{y.size}")


def probe_overflow(level):
    """acc * multiplier beyond the int32 range: clamping in float before the conversion
    saturates to qmax (qmin for negative), a bare cvtps2dq gives INT32_MIN and would
    saturate both to qmin."""
    for dt in (np.uint8, np.int8):
        a = np.array([[np.iinfo(dt).max], [np.iinfo(dt).min]], dt)  # acc = +-127 * 127ish
        w = np.full((1, 1), 127, dt)
        mm = qlinear_matmul(a, w, F32(1.0), dt(0), F32(1.0), dt(0), F32(1e-30), dt(0), level)
        conv = qlinear_conv_1x1(a.reshape(1, 1, 1, 2), w.reshape(1, 1, 1, 1), F32(1.0), dt(0),
                                F32(1.0), dt(0), F32(1e-30), dt(0), level)
        print(f"overflow {level} {dt.__name__} a={a.reshape(-1).tolist()} w=127 multiplier=1e30:"
              f" QLinearMatMul -> {mm.reshape(-1).tolist()}, QLinearConv -> "
              f"{conv.reshape(-1).tolist()}")


def probe_bias_conversion(level):
    """Is the bias added as int32 before the float conversion? acc=1, bias=2^24+1 and a
    multiplier of 2^-25: int32 sum 2^24+2 converts exactly and gives 0.5+2^-24 -> 1;
    float(acc)+float(bias) gives 2^24 -> 0.5 -> 0 (tie to even)."""
    x = np.array([[[[1]]]], np.uint8)
    w = np.array([[[[1]]]], np.int8)
    bias = np.array([2 ** 24 + 1], np.int32)
    conv = qlinear_conv_1x1(x, w, F32(1.0), np.uint8(0), F32(1.0), np.int8(0), F32(2 ** 25),
                            np.uint8(0), level, bias=bias)
    print(f"bias {level}: QLinearConv acc=1 bias=2^24+1 multiplier=2^-25 -> "
          f"{int(conv.reshape(-1)[0])} (int32 add first: 1, float add: 0)")


def conv2d_acc(x, w, x_zp, w_zp, pad, group):
    """Exact int64 accumulators of a stride-1 2-D convolution, NCHW / OIHW."""
    n, c, h, wd = x.shape
    cout, cpg, kh, kw = w.shape
    xp = np.pad(x.astype(np.int64) - x_zp, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    wz = w.astype(np.int64) - np.asarray(w_zp, np.int64).reshape(-1, 1, 1, 1)
    oh, ow = h + 2 * pad - kh + 1, wd + 2 * pad - kw + 1
    out = np.zeros((n, cout, oh, ow), np.int64)
    opg = cout // group
    for o in range(cout):
        g = o // opg
        for i in range(kh):
            for j in range(kw):
                patch = xp[:, g * cpg:(g + 1) * cpg, i:i + oh, j:j + ow]
                out[:, o] += np.einsum("nchw,c->nhw", patch, wz[o, :, i, j])
    return out


def probe_conv_paths(level):
    """ORT picks different QLinearConv kernels by shape (symmetric u8s8 ConvSym, depthwise,
    generic im2col + GEMM): check the same epilogue holds on each, with random per-channel
    scales, a bias, and an overflowing channel (w_scale 1e30)."""
    rng = np.random.default_rng(7)
    cases = [("pointwise 32->32", 32, 32, 1, 1, 0), ("3x3 16->24 pad 1", 16, 24, 3, 1, 0),
             ("depthwise 32 3x3", 32, 32, 3, 32, 0), ("3x3 8->8 w_zp!=0", 8, 8, 3, 1, 3)]
    for name, c, cout, k, group, w_zp_value in cases:
        x = rng.integers(0, 256, (1, c, 9, 9), dtype=np.uint8)
        w = rng.integers(-128, 128, (cout, c // group, k, k), dtype=np.int8)
        w_scale = rng.uniform(0.001, 0.05, cout).astype(F32)
        w_scale[0] = F32(1e30)
        w_zp = np.full(cout, w_zp_value, np.int8)
        bias = rng.integers(-5000, 5000, cout).astype(np.int32)
        x_scale, y_scale, x_zp, y_zp = F32(0.02), F32(0.05), 131, 117
        inits = {"x_scale": x_scale, "x_zp": np.uint8(x_zp), "w": w, "w_scale": w_scale,
                 "w_zp": w_zp, "y_scale": y_scale, "y_zp": np.uint8(y_zp), "bias": bias}
        node = helper.make_node("QLinearConv", ["x", "x_scale", "x_zp", "w", "w_scale", "w_zp",
                                                "y_scale", "y_zp", "bias"], ["y"],
                                group=group, pads=[k // 2] * 4)
        x_info = helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(x.dtype),
                                               x.shape)
        y = run_model([node], [x_info], inits, "y", {"x": x}, level).astype(np.int64)
        acc = conv2d_acc(x, w, x_zp, w_zp, k // 2, group) + bias.reshape(1, -1, 1, 1)
        assert np.all(np.abs(acc) < 2 ** 31)
        m = ((x_scale * w_scale) / y_scale).reshape(1, -1, 1, 1)
        expected = requant(acc.astype(np.int32), m, y_zp, 0, 255)
        print(f"conv path {level} {name}: {int((expected == y).sum())}/{y.size} match "
              f"(a*b)/y with float clamp; channel 0 (multiplier overflows int32) "
              f"{'matches' if np.array_equal(expected[:, 0], y[:, 0]) else 'DIFFERS'}")


def probe_nan(level):
    """y_scale = 0 makes the multiplier inf: acc > 0 -> qmax, acc = 0 -> NaN -> qmin (the
    float clamp is max(v, lo) then min(v, hi), as maxps/minps treat NaN)."""
    for dt in (np.uint8, np.int8):
        a = np.array([[1], [0]], dt)
        y = qlinear_matmul(a, np.ones((1, 1), dt), F32(1.0), dt(0), F32(1.0), dt(0), F32(0.0),
                           dt(5), level)
        print(f"nan {level} {dt.__name__}: y_scale=0, y_zp=5, acc [1, 0] -> {y.reshape(-1).tolist()}")


def emit_order_test_case():
    """Prints a QLinearMatMul case (ORT's output included) on which every other multiplier
    order gives a different answer; tests/unit/integer_matmul_test.cc holds it."""
    rng = np.random.default_rng(3)
    a = np.array([[129], [131], [125], [133], [127], [121]], np.uint8)  # acc = a - 128, odd
    acc = a.astype(np.int64) - 128
    while True:
        a_scale, y_scale = F32(rng.uniform(0.001, 0.1)), F32(rng.uniform(0.001, 0.1))
        base = F32(0.5 * y_scale / a_scale)
        b_scale = (base.view(np.int32) + np.arange(-8, 8)).astype(np.int32).view(F32)
        outputs = {k: requant(acc, f(a_scale, b_scale, y_scale)[None, :], 128, 0, 255)
                   for k, f in MULTIPLIERS.items()}
        if all(np.any(v != outputs["(a*b)/y"]) for k, v in outputs.items() if k != "(a*b)/y"):
            break
    b = np.ones((1, b_scale.size), np.int8)
    y = qlinear_matmul(a, b, a_scale, np.uint8(128), b_scale, np.zeros(b.shape[1], np.int8),
                       y_scale, np.uint8(128), "ENABLE_ALL")
    print("order test case: a_scale", float(a_scale).hex(), "y_scale", float(y_scale).hex())
    print("  b_scale", ", ".join(float(v).hex() for v in b_scale))
    print("  a", a.reshape(-1).tolist())
    print("  y", y.reshape(-1).tolist())


def main():
    for level in LEVELS:
        probe_matmul_order(level)
        probe_conv_order(level)
        probe_ties_and_saturation(level)
        probe_overflow(level)
        probe_bias_conversion(level)
        probe_conv_paths(level)
        probe_nan(level)
    emit_order_test_case()


if __name__ == "__main__":
    main()
