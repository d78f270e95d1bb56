"""Float and tensor operators (BERT and CNN families) against ONNX Runtime 1.31.1: one
single-node model per case, the same inputs to both, then exact comparison for data
movement, casts, comparisons, pooling maxima and everything else computed without
rounding; a stated tolerance for ops whose result depends on summation order or on a
transcendental function's last ulp (ONNX Runtime uses MLAS/Eigen approximations)."""

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import octet

IR_VERSION = 10  # readable by onnxruntime 1.31.1
RNG_SEED = 1234

# Tolerances (rtol, atol) and why.
EXACT = None
ULP = (2e-6, 1e-6)       # one transcendental (exp/log/tanh/erf/sqrt): ORT's vectorized
                         # approximations differ from libm in the last ulp or two
SUM = (1e-5, 1e-5)       # a sum/dot product: ORT adds in a different order (and with FMA)
MLAS_ACT = (2e-5, 2e-6)  # MLAS's Sigmoid/Tanh/Erf polynomials are a few ulp from libm


def tensor_type(array):
    return helper.np_dtype_to_tensor_dtype(array.dtype)


def make_model(node, inputs, outputs, opset, initializers=(), ms_opset=None):
    """inputs: {name: array} fed at run time; outputs: {name: TensorProto type}."""
    graph = helper.make_graph(
        [node], "case",
        [helper.make_tensor_value_info(n, tensor_type(a), a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs.items()],
        list(initializers))
    imports = [helper.make_opsetid("", opset)]
    if ms_opset:
        imports.append(helper.make_opsetid("com.microsoft", ms_opset))
    return helper.make_model(graph, opset_imports=imports, ir_version=IR_VERSION)


def run_both(model, feeds):
    data = model.SerializeToString()
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    actual = octet.InferenceSession(data).run(None, feeds)
    return expected, actual


def compare(expected, actual, tolerance):
    assert len(expected) == len(actual)
    for e, a in zip(expected, actual):
        assert a.dtype == e.dtype, f"dtype {a.dtype} != {e.dtype}"
        assert a.shape == e.shape, f"shape {a.shape} != {e.shape}"
        if tolerance is None:
            if e.dtype.kind == "f":
                np.testing.assert_array_equal(a.view(f"u{e.itemsize}"), e.view(f"u{e.itemsize}"))
            else:
                np.testing.assert_array_equal(a, e)
        else:
            np.testing.assert_allclose(a, e, rtol=tolerance[0], atol=tolerance[1])


def check(op, inputs, outputs, opset, tolerance, attrs=None, initializers=None, domain="",
          ms_opset=None, input_names=None):
    """One node `op` reading `inputs` (run-time feeds) and `initializers` (constants)."""
    initializers = initializers or {}
    names = input_names or list(inputs) + list(initializers)
    node = helper.make_node(op, names, list(outputs), domain=domain or None, **(attrs or {}))
    inits = [numpy_helper.from_array(v, n) for n, v in initializers.items()]
    model = make_model(node, inputs, outputs, opset, inits, ms_opset)
    expected, actual = run_both(model, inputs)
    compare(expected, actual, tolerance)


def rand(*shape, low=-3.0, high=3.0, seed=0):
    return np.random.default_rng(RNG_SEED + seed).uniform(low, high, shape).astype(np.float32)


F = TensorProto.FLOAT
B = TensorProto.BOOL
I64 = TensorProto.INT64

# ---- element-wise ----------------------------------------------------------

UNARY = [  # op, opset, tolerance, attrs, input range
    ("Sqrt", 13, EXACT, {}, (0.0, 9.0)),  # IEEE sqrt is correctly rounded everywhere
    ("Exp", 13, ULP, {}, (-10.0, 10.0)),
    ("Log", 13, ULP, {}, (0.01, 100.0)),
    ("Reciprocal", 13, EXACT, {}, (0.5, 4.0)),
    ("Neg", 13, EXACT, {}, (-3.0, 3.0)),
    ("Abs", 13, EXACT, {}, (-3.0, 3.0)),
    ("Floor", 13, EXACT, {}, (-3.0, 3.0)),
    ("Ceil", 13, EXACT, {}, (-3.0, 3.0)),
    ("Tanh", 13, MLAS_ACT, {}, (-5.0, 5.0)),
    ("Sigmoid", 13, MLAS_ACT, {}, (-8.0, 8.0)),
    ("Erf", 13, MLAS_ACT, {}, (-3.0, 3.0)),
    ("Sin", 7, ULP, {}, (-10.0, 10.0)),
    ("Cos", 7, ULP, {}, (-10.0, 10.0)),
    ("HardSigmoid", 6, EXACT, {"alpha": 0.25, "beta": 0.4}, (-5.0, 5.0)),
    ("HardSwish", 14, ULP, {}, (-5.0, 5.0)),  # ORT computes x*(x*(1/6)+0.5): 1-ulp apart
    ("LeakyRelu", 16, EXACT, {"alpha": 0.1}, (-5.0, 5.0)),
    ("Relu", 14, EXACT, {}, (-5.0, 5.0)),
    ("Gelu", 20, MLAS_ACT, {}, (-5.0, 5.0)),
    ("Gelu", 20, MLAS_ACT, {"approximate": "tanh"}, (-5.0, 5.0)),
]


@pytest.mark.parametrize("op,opset,tol,attrs,bounds", UNARY,
                         ids=[f"{u[0]}-{u[1]}-{i}" for i, u in enumerate(UNARY)])
def test_unary(op, opset, tol, attrs, bounds):
    x = rand(3, 5, 7, low=bounds[0], high=bounds[1])
    check(op, {"x": x}, {"y": F}, opset, tol, attrs)


def test_neg_abs_int():
    x = np.array([-5, 0, 7, np.iinfo(np.int64).min + 1], dtype=np.int64)
    check("Neg", {"x": x}, {"y": I64}, 13, EXACT)
    check("Abs", {"x": x.astype(np.int32)}, {"y": TensorProto.INT32}, 13, EXACT)


def test_ms_gelu_fastgelu():
    x = rand(2, 4, 8)
    check("Gelu", {"x": x}, {"y": F}, 17, MLAS_ACT, domain="com.microsoft", ms_opset=1)
    check("FastGelu", {"x": x}, {"y": F}, 17, MLAS_ACT, domain="com.microsoft", ms_opset=1,
          initializers={"bias": rand(8, seed=1)})


@pytest.mark.parametrize("a_shape,b_shape", [((2, 3, 4), (4,)), ((3, 1), (1, 5)), ((4,), ())])
def test_pow(a_shape, b_shape):
    a = rand(*a_shape, low=0.1, high=3.0)
    check("Pow", {"a": a}, {"y": F}, 15, ULP,
          initializers={"b": np.full(b_shape, 2.0, np.float32)})  # exporters' x^2: exact
    check("Pow", {"a": a, "b": rand(*b_shape, low=-2, high=2, seed=3)}, {"y": F}, 15, ULP)
    check("Pow", {"a": a}, {"y": F}, 15, ULP, initializers={"b": np.array(3, np.int64)})
    integers = (np.arange(int(np.prod(b_shape))) % 5 - 2).reshape(b_shape).astype(np.int32)
    check("Pow", {"a": a}, {"y": F}, 15, ULP, initializers={"b": integers})


# ---- reductions, softmax, normalization, gemm ---------------------------------

@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin"])
@pytest.mark.parametrize("opset", [13, 18])
@pytest.mark.parametrize("axes,keepdims", [([-1], 1), ([0, 2], 0), (None, 1), ([1], 0)])
def test_reduce(op, opset, axes, keepdims):
    x = rand(3, 4, 5)
    tol = EXACT if op in ("ReduceMax", "ReduceMin") else SUM
    axes_input = opset >= 18 or (op == "ReduceSum" and opset >= 13)
    attrs = {"keepdims": keepdims}
    inits = {}
    names = None
    if axes is not None and axes_input:
        inits = {"axes": np.array(axes, np.int64)}
    elif axes is not None:
        attrs["axes"] = axes
    check(op, {"x": x}, {"y": F}, opset, tol, attrs, inits, input_names=names)


def test_reduce_int_and_noop():
    x = np.random.default_rng(0).integers(-100, 100, (3, 4)).astype(np.int64)
    check("ReduceSum", {"x": x}, {"y": I64}, 13, EXACT, {"keepdims": 0},
          {"axes": np.array([1], np.int64)})
    check("ReduceMax", {"x": x}, {"y": I64}, 13, EXACT, {"axes": [0]})
    check("ReduceSum", {"x": rand(2, 3)}, {"y": F}, 13, EXACT, {"noop_with_empty_axes": 1})


@pytest.mark.parametrize("opset,axis", [(11, 1), (11, 0), (13, -1), (13, 1), (1, 2)])
def test_softmax(opset, axis):
    check("Softmax", {"x": rand(2, 3, 6, low=-8, high=8)}, {"y": F}, opset, SUM, {"axis": axis})


@pytest.mark.parametrize("axis", [-1, 1])
def test_layer_normalization(axis):
    x = rand(2, 5, 8)
    norm = x.shape[axis:] if axis >= 0 else x.shape[axis:]
    check("LayerNormalization", {"x": x}, {"y": F}, 17, SUM, {"axis": axis, "epsilon": 1e-12},
          {"scale": rand(*norm, seed=1), "bias": rand(*norm, seed=2)})
    check("LayerNormalization", {"x": x}, {"y": F}, 17, SUM, {"axis": axis},
          {"scale": rand(*norm, seed=1)})


def test_layer_normalization_decomposed():
    """The form older exporters emit: ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div."""
    x = rand(2, 4, 16)
    nodes = [
        helper.make_node("ReduceMean", ["x"], ["mean"], axes=[-1]),
        helper.make_node("Sub", ["x", "mean"], ["d"]),
        helper.make_node("Pow", ["d", "two"], ["d2"]),
        helper.make_node("ReduceMean", ["d2"], ["var"], axes=[-1]),
        helper.make_node("Add", ["var", "eps"], ["ve"]),
        helper.make_node("Sqrt", ["ve"], ["std"]),
        helper.make_node("Div", ["d", "std"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "ln", [helper.make_tensor_value_info("x", F, x.shape)],
        [helper.make_tensor_value_info("y", F, None)],
        [numpy_helper.from_array(np.array(2, np.float32), "two"),
         numpy_helper.from_array(np.array(1e-5, np.float32), "eps")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                              ir_version=IR_VERSION)
    expected, actual = run_both(model, {"x": x})
    compare(expected, actual, SUM)


@pytest.mark.parametrize("trans_a,trans_b", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("c_shape", [None, (5,), (3, 1), (3, 5), ()])
def test_gemm(trans_a, trans_b, c_shape):
    a = rand(4, 3) if trans_a else rand(3, 4)
    b = rand(5, 4, seed=1) if trans_b else rand(4, 5, seed=1)
    inits = {"b": b}
    if c_shape is not None:
        inits["c"] = rand(*c_shape, seed=2)
    check("Gemm", {"a": a}, {"y": F}, 13, SUM,
          {"transA": trans_a, "transB": trans_b, "alpha": 0.5, "beta": 2.0}, inits)


def test_gemm_runtime_b():
    check("Gemm", {"a": rand(6, 7), "b": rand(7, 9, seed=1)}, {"y": F}, 11, SUM)


# ---- data movement and integer plumbing (exact) -------------------------------

@pytest.mark.parametrize("start,end", [(None, None), (1, None), (-2, None), (0, -1), (2, 10)])
def test_shape(start, end):
    attrs = {k: v for k, v in (("start", start), ("end", end)) if v is not None}
    check("Shape", {"x": rand(2, 3, 4, 5)}, {"y": I64}, 15, EXACT, attrs)


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int8, np.uint8, np.bool_])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_concat(dtype, axis):
    rng = np.random.default_rng(0)
    shapes = [(2, 3, 4), (2, 3, 4)]
    shapes[0] = tuple(s + 1 if i == axis % 3 else s for i, s in enumerate(shapes[0]))
    arrays = [(rng.integers(0, 3, s)).astype(dtype) for s in shapes]
    check("Concat", {"a": arrays[0], "b": arrays[1]},
          {"y": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))}, 13, EXACT, {"axis": axis})


def test_concat_split_over_threads():
    """A KV cache's Concat, large enough that the threads share the copy, is the plain
    concatenation on every thread count."""
    rng = np.random.default_rng(1)
    past = rng.standard_normal((1, 3, 255, 64)).astype(np.float32)
    new = rng.standard_normal((1, 3, 1, 64)).astype(np.float32)
    node = helper.make_node("Concat", ["past", "new"], ["y"], axis=2)
    model = make_model(node, {"past": past, "new": new}, {"y": F}, 13, [])
    for threads in (1, 2, 3):
        got = octet.InferenceSession(model.SerializeToString(), threads=threads).run(
            None, {"past": past, "new": new})[0]
        assert got.tobytes() == np.concatenate([past, new], axis=2).tobytes()


CAST_TYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int32, np.int64,
              np.bool_]


@pytest.mark.parametrize("src", CAST_TYPES, ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("dst", CAST_TYPES, ids=lambda t: np.dtype(t).name)
def test_cast(src, dst):
    values = np.array([0, 1, -1, 2.5, -2.5, 3.99, -3.99, 100.7, 127, 0.49], np.float64)
    if np.dtype(src).kind in "ub":
        values = np.abs(values)
    x = values.astype(src)
    check("Cast", {"x": x}, {"y": helper.np_dtype_to_tensor_dtype(np.dtype(dst))}, 13, EXACT,
          {"to": helper.np_dtype_to_tensor_dtype(np.dtype(dst))})


@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32, np.uint8])
def test_where(dtype):
    rng = np.random.default_rng(1)
    cond = rng.integers(0, 2, (3, 1, 4)).astype(bool)
    x = rng.integers(-9, 9, (2, 4)).astype(dtype)
    y = rng.integers(-9, 9, (1,)).astype(dtype)
    check("Where", {"c": cond, "x": x, "y": y},
          {"z": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))}, 16, EXACT)


@pytest.mark.parametrize("op", ["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual"])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32])
def test_compare(op, dtype):
    rng = np.random.default_rng(2)
    a = rng.integers(-3, 3, (2, 3, 4)).astype(dtype)
    b = rng.integers(-3, 3, (3, 1)).astype(dtype)
    check(op, {"a": a, "b": b}, {"y": B}, 16, EXACT)


def test_logic():
    rng = np.random.default_rng(3)
    a = rng.integers(0, 2, (3, 4)).astype(bool)
    b = rng.integers(0, 2, (4,)).astype(bool)
    for op in ("And", "Or", "Xor"):
        check(op, {"a": a, "b": b}, {"y": B}, 13, EXACT)
    check("Not", {"a": a}, {"y": B}, 13, EXACT)
    check("Equal", {"a": a, "b": b}, {"y": B}, 13, EXACT)


@pytest.mark.parametrize("shape,target", [((3, 1), (2, 3, 4)), ((1,), (5,)), ((2, 3), (1, 1)),
                                          ((4, 1, 2), (3, 1)), ((1, 3, 1, 7, 5), (1, 3, 3, 7, 5)),
                                          ((2, 0, 3), (2, 2, 0, 3)), ((1, 1), (4, 1, 6))])
def test_expand(shape, target):
    x = np.arange(np.prod(shape), dtype=np.int64).reshape(shape)
    check("Expand", {"x": x}, {"y": I64}, 13, EXACT,
          initializers={"shape": np.array(target, np.int64)})


def test_constant_of_shape_and_constant():
    value = numpy_helper.from_array(np.array([7], np.int64))
    check("ConstantOfShape", {"s": np.array([2, 3], np.int64)}, {"y": I64}, 20, EXACT,
          {"value": value})
    check("ConstantOfShape", {"s": np.array([4], np.int64)}, {"y": F}, 20, EXACT)
    for attr, value, out_type in [("value_float", 1.5, F), ("value_floats", [1.0, -2.0], F),
                                  ("value_int", 3, I64), ("value_ints", [4, 5, 6], I64),
                                  ("value", numpy_helper.from_array(rand(2, 2)), F)]:
        check("Constant", {}, {"y": out_type}, 13, EXACT, {attr: value})


def test_identity():
    check("Identity", {"x": rand(3, 4)}, {"y": F}, 16, EXACT)


@pytest.mark.parametrize("dtype,start,limit,delta", [
    (np.int64, 0, 10, 3), (np.int64, 10, -3, -2), (np.int32, 5, 5, 1),
    (np.float32, 0.5, 3.7, 0.3), (np.float32, 1.0, -2.0, -0.25)])
def test_range(dtype, start, limit, delta):
    check("Range", {"a": np.array(start, dtype), "b": np.array(limit, dtype),
                    "c": np.array(delta, dtype)},
          {"y": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))}, 11, EXACT)


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_split(opset):
    x = rand(4, 6, 3)
    outs = {"o1": F, "o2": F, "o3": F}
    if opset >= 13:
        check("Split", {"x": x}, outs, opset, EXACT, {"axis": 1},
              {"split": np.array([1, 2, 3], np.int64)})
    else:
        check("Split", {"x": x}, outs, opset, EXACT, {"axis": -2, "split": [1, 2, 3]})
    if opset >= 18:
        check("Split", {"x": rand(7, 2)}, outs, opset, EXACT, {"num_outputs": 3})
    else:
        check("Split", {"x": x}, outs, opset, EXACT, {"axis": 1})  # equal parts


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads", [[0, 1, 2, 1, 2, 0], [1, 0, 1, 1, 1, 1], [0, -1, 1, 0, 1, -1]])
def test_pad(mode, pads):
    x = rand(2, 4, 5)
    inits = {"pads": np.array(pads, np.int64)}
    if mode == "constant":
        inits["value"] = np.array(1.25, np.float32)
    check("Pad", {"x": x}, {"y": F}, 19, EXACT, {"mode": mode}, inits)


def test_pad_opset2_and_axes():
    check("Pad", {"x": rand(3, 4)}, {"y": F}, 2, EXACT, {"pads": [1, 2, 0, 1], "value": -1.0})
    check("Pad", {"x": rand(3, 4, 2).astype(np.float32)}, {"y": F}, 18, EXACT, {"mode": "edge"},
          {"pads": np.array([1, 2, 3, 0], np.int64), "cv": np.array(0, np.float32),
           "axes": np.array([0, -1], np.int64)})


# ---- CNN --------------------------------------------------------------------

CONV_CASES = [  # x shape, w shape, attrs
    ((1, 3, 9, 9), (4, 3, 3, 3), {}),
    ((2, 4, 8, 7), (6, 2, 3, 2), {"group": 2, "pads": [1, 0, 1, 1], "strides": [2, 1]}),
    ((1, 6, 8, 8), (6, 1, 3, 3), {"group": 6, "pads": [1, 1, 1, 1]}),  # depthwise
    ((1, 3, 10, 10), (5, 3, 3, 3), {"dilations": [2, 2], "pads": [2, 1, 2, 2]}),
    ((1, 3, 10, 11), (5, 3, 4, 4), {"strides": [2, 3], "auto_pad": "SAME_LOWER"}),
    ((1, 3, 10, 11), (5, 3, 2, 3), {"auto_pad": "VALID", "strides": [3, 2]}),
    ((1, 8, 5, 5), (16, 8, 1, 1), {}),  # pointwise
    ((2, 4, 20), (3, 4, 5), {"pads": [2, 1], "strides": [2]}),  # 1-D
    ((1, 2, 4, 5, 6), (3, 2, 2, 3, 2), {"pads": [1, 0, 1, 0, 1, 1]}),  # 3-D
]


@pytest.mark.parametrize("x_shape,w_shape,attrs", CONV_CASES, ids=[str(i) for i in range(9)])
@pytest.mark.parametrize("bias", [False, True])
def test_conv(x_shape, w_shape, attrs, bias):
    inits = {"w": rand(*w_shape, seed=1)}
    if bias:
        inits["b"] = rand(w_shape[0], seed=2)
    check("Conv", {"x": rand(*x_shape)}, {"y": F}, 11, SUM, attrs, inits)


POOL_CASES = [  # x shape, attrs
    ((1, 2, 7, 7), {"kernel_shape": [3, 3]}),
    ((1, 2, 7, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ((1, 2, 7, 8), {"kernel_shape": [3, 2], "strides": [2, 2], "ceil_mode": 1}),
    ((1, 2, 8, 8), {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1],
                    "ceil_mode": 1}),
    ((2, 3, 9, 9), {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ((1, 2, 11), {"kernel_shape": [4], "strides": [3], "pads": [2, 1]}),
]


@pytest.mark.parametrize("x_shape,attrs", POOL_CASES, ids=[str(i) for i in range(6)])
def test_max_pool(x_shape, attrs):
    check("MaxPool", {"x": rand(*x_shape)}, {"y": F}, 12, EXACT, attrs)
    if "auto_pad" not in attrs:
        check("MaxPool", {"x": rand(*x_shape)}, {"y": F}, 12, EXACT,
              dict(attrs, dilations=[2] * len(attrs["kernel_shape"])))
    check("MaxPool", {"x": rand(*x_shape)}, {"y": F, "i": I64}, 12, EXACT, attrs)
    xi = np.random.default_rng(4).integers(-128, 127, x_shape).astype(np.int8)
    check("MaxPool", {"x": xi}, {"y": TensorProto.INT8}, 12, EXACT, attrs)


@pytest.mark.parametrize("x_shape,attrs", POOL_CASES, ids=[str(i) for i in range(6)])
@pytest.mark.parametrize("count_include_pad", [0, 1])
def test_average_pool(x_shape, attrs, count_include_pad):
    # Integer-valued inputs: every partial sum is exact, so only the division rounds.
    x = np.random.default_rng(5).integers(-8, 8, x_shape).astype(np.float32)
    check("AveragePool", {"x": x}, {"y": F}, 19, ULP,
          dict(attrs, count_include_pad=count_include_pad))


def test_global_pools():
    x = rand(2, 3, 5, 6)
    check("GlobalAveragePool", {"x": x}, {"y": F}, 1, SUM)
    check("GlobalMaxPool", {"x": x}, {"y": F}, 1, EXACT)


@pytest.mark.parametrize("opset", [9, 15])
def test_batch_normalization(opset):
    c = 4
    inits = {"s": rand(c, seed=1), "b": rand(c, seed=2), "m": rand(c, seed=3),
             "v": rand(c, low=0.1, high=2, seed=4)}
    check("BatchNormalization", {"x": rand(2, c, 3, 5)}, {"y": F}, opset, SUM,
          {"epsilon": 1e-3}, inits)


RESIZE_COORDS = ["half_pixel", "asymmetric", "align_corners", "pytorch_half_pixel"]


@pytest.mark.parametrize("coord", RESIZE_COORDS)
@pytest.mark.parametrize("mode,nearest_mode", [("nearest", "round_prefer_floor"),
                                               ("nearest", "floor"), ("nearest", "ceil"),
                                               ("nearest", "round_prefer_ceil"),
                                               ("linear", None)])
@pytest.mark.parametrize("scales,sizes", [([1, 1, 2, 2], None), ([1, 1, 0.5, 0.75], None),
                                          ([1, 1, 1.7, 2.4], None), (None, [1, 2, 5, 3]),
                                          (None, [1, 2, 9, 13])])
def test_resize(coord, mode, nearest_mode, scales, sizes):
    x = rand(1, 2, 6, 5)
    attrs = {"mode": mode, "coordinate_transformation_mode": coord}
    if nearest_mode:
        attrs["nearest_mode"] = nearest_mode
    inits = {"roi": np.array([], np.float32),
             "scales": np.array(scales or [], np.float32)}
    if sizes:
        inits["sizes"] = np.array(sizes, np.int64)
    tol = EXACT if mode == "nearest" else ULP
    check("Resize", {"x": x}, {"y": F}, 13, tol, attrs, inits)


@pytest.mark.parametrize("nearest_mode", ["round_prefer_floor", "floor", "ceil",
                                          "round_prefer_ceil"])
def test_resize_tf_half_pixel_for_nn(nearest_mode):
    """Nearest only (the mode is for it). An axis with scale 1 maps every index to itself,
    as in ONNX Runtime; octet once read the neighbouring channel there with ceil rounding."""
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "tf_half_pixel_for_nn",
             "nearest_mode": nearest_mode}
    for scales in ([1, 1, 2, 2], [1, 1, 1, 0.5], [1, 1, 0.5, 1.7]):
        inits = {"roi": np.array([], np.float32), "scales": np.array(scales, np.float32)}
        check("Resize", {"x": rand(1, 3, 6, 5)}, {"y": F}, 13, EXACT, attrs, inits)


def test_resize_opset10_and_axes():
    x = rand(1, 2, 4, 6)
    for scales in ([1, 1, 2, 3], [1, 1, 0.5, 0.5]):
        check("Resize", {"x": x}, {"y": F}, 10, EXACT, {"mode": "nearest"},
              {"scales": np.array(scales, np.float32)})
    check("Resize", {"x": x}, {"y": F}, 18, ULP, {"mode": "linear", "axes": [2, 3]},
          {"roi": np.array([], np.float32), "scales": np.array([2, 1.5], np.float32)})


# ---- random shapes --------------------------------------------------------------

@pytest.mark.parametrize("seed", range(8))
def test_random_shapes(seed):
    rng = np.random.default_rng(100 + seed)
    rank = int(rng.integers(1, 5))
    a_shape = tuple(int(d) for d in rng.integers(1, 5, rank))
    b_shape = tuple(d if rng.random() < 0.6 else 1 for d in a_shape[int(rng.integers(0, rank)):])
    a, b = rand(*a_shape, seed=seed), rand(*b_shape, seed=seed + 50)
    check("Pow", {"a": np.abs(a) + 0.1, "b": b}, {"y": F}, 15, ULP)
    check("Less", {"a": a, "b": b}, {"y": B}, 13, EXACT)
    check("Where", {"c": a > 0, "x": a, "y": b}, {"z": F}, 16, EXACT)
    axis = int(rng.integers(-rank, rank))
    check("Softmax", {"x": a}, {"y": F}, 13, SUM, {"axis": axis})
    check("Concat", {"a": a, "b": a}, {"y": F}, 13, EXACT, {"axis": axis})
    check("ReduceMean", {"x": a}, {"y": F}, 18, SUM, {"keepdims": int(rng.integers(0, 2))},
          {"axes": np.array([axis], np.int64)})
    pads = rng.integers(0, 3, 2 * rank).astype(np.int64)
    check("Pad", {"x": a}, {"y": F}, 13, EXACT, {"mode": "edge"}, {"pads": pads})


# ---- errors -------------------------------------------------------------------

def octet_error(op, inputs, outputs, opset, attrs=None, initializers=None):
    initializers = initializers or {}
    node = helper.make_node(op, list(inputs) + list(initializers), list(outputs), **(attrs or {}))
    inits = [numpy_helper.from_array(v, n) for n, v in initializers.items()]
    model = make_model(node, inputs, outputs, opset, inits)
    with pytest.raises(octet.OctetError) as info:
        octet.InferenceSession(model.SerializeToString()).run(None, inputs)
    return str(info.value)


def test_errors():
    assert "axis" in octet_error("Softmax", {"x": rand(2, 3)}, {"y": F}, 13, {"axis": 3})
    assert "do not broadcast" in octet_error("Pow", {"a": rand(2, 3), "b": rand(4)}, {"y": F}, 15)
    assert "mode" in octet_error("Resize", {"x": rand(1, 1, 2, 2)}, {"y": F}, 13,
                                 {"mode": "cubic"},
                                 {"roi": np.array([], np.float32),
                                  "scales": np.array([1, 1, 2, 2], np.float32)})
    assert "group" in octet_error("Conv", {"x": rand(1, 4, 5, 5)}, {"y": F}, 11, {"group": 3},
                                  {"w": rand(3, 2, 3, 3)})
    assert "reflect" in octet_error("Pad", {"x": rand(2, 2)}, {"y": F}, 13, {"mode": "reflect"},
                                    {"pads": np.array([0, 2, 0, 0], np.int64)})


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_integer_binary(op, dtype):
    rng = np.random.default_rng(6)
    a = rng.integers(-50, 50, (3, 4)).astype(dtype)
    b = rng.integers(1, 9, (4,)).astype(dtype) * rng.choice([-1, 1], (4,)).astype(dtype)
    check(op, {"a": a, "b": b}, {"y": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))}, 14,
          EXACT)


@pytest.mark.parametrize("opset", [6, 11, 13])
@pytest.mark.parametrize("bounds", [(-1.0, 2.0), (None, 0.5), (-0.25, None), (None, None)])
def test_clip(opset, bounds):
    x = rand(3, 7)
    x[0, 0] = np.nan
    lo, hi = bounds
    if opset < 11:
        attrs = {k: v for k, v in (("min", lo), ("max", hi)) if v is not None}
        check("Clip", {"x": x}, {"y": F}, opset, EXACT, attrs=attrs)
    else:
        inits = {n: np.array(v, np.float32) for n, v in (("lo", lo), ("hi", hi)) if v is not None}
        names = ["x", "lo" if lo is not None else "", "hi" if hi is not None else ""]
        check("Clip", {"x": x}, {"y": F}, opset, EXACT, initializers=inits, input_names=names)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64])
def test_clip_integer(dtype):
    x = np.arange(-60, 60, 7).astype(dtype) if np.issubdtype(dtype, np.signedinteger) \
        else np.arange(0, 250, 13).astype(dtype)
    inits = {"lo": np.array(3, dtype), "hi": np.array(40, dtype)}
    check("Clip", {"x": x}, {"y": helper.np_dtype_to_tensor_dtype(np.dtype(dtype))}, 13, EXACT,
          initializers=inits)


# ---- selection: ArgMax / ArgMin / TopK / Trilu ---------------------------------

def ties(*shape, seed=0):
    """Small integers as floats: many equal values, so tie rules are exercised."""
    return np.random.default_rng(RNG_SEED + seed).integers(-3, 4, shape).astype(np.float32)


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("axis,keepdims,last", [(0, 1, 0), (-1, 0, 0), (1, 1, 1), (2, 0, 1)])
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.int32, np.uint8])
def test_arg_extremum(op, axis, keepdims, last, dtype):
    x = ties(4, 6, 5).astype(dtype) if dtype != np.uint8 else (ties(4, 6, 5) + 3).astype(dtype)
    check(op, {"x": x}, {"y": I64}, 13, EXACT,
          {"axis": axis, "keepdims": keepdims, "select_last_index": last})


@pytest.mark.parametrize("op", ["ArgMax", "ArgMin"])
@pytest.mark.parametrize("last", [0, 1])
def test_arg_extremum_nan(op, last):
    """ONNX Runtime's rule: a NaN is never taken over a number; a leading NaN is kept."""
    x = np.array([[1, np.nan, 3, np.nan, -1], [np.nan, 2, 2, 0, 5], [4, 4, np.nan, 4, 0]],
                 np.float32)
    check(op, {"x": x}, {"y": I64}, 13, EXACT, {"axis": 1, "keepdims": 0, "select_last_index": last})


def test_argmax_logits_row():
    x = rand(1, 1, 5000, seed=4)  # an LM head's last row: one maximum among many
    check("ArgMax", {"x": x}, {"y": I64}, 13, EXACT, {"axis": -1, "keepdims": 0})


@pytest.mark.parametrize("k,axis,largest", [(1, -1, 1), (3, -1, 0), (6, 1, 1), (0, 0, 1),
                                            (4, 0, 0)])
@pytest.mark.parametrize("make", [rand, ties], ids=["distinct", "ties"])
def test_topk(k, axis, largest, make):
    x = make(4, 6, 7, seed=5)
    check("TopK", {"x": x}, {"values": F, "indices": I64}, 11, EXACT,
          {"axis": axis, "largest": largest}, initializers={"k": np.array([k], np.int64)})


def test_topk_opset1_attribute_and_int():
    check("TopK", {"x": rand(3, 9, seed=6)}, {"values": F, "indices": I64}, 1, EXACT, {"k": 4})
    x = ties(3, 9, seed=7).astype(np.int64)
    check("TopK", {"x": x}, {"values": I64, "indices": I64}, 11, EXACT,
          initializers={"k": np.array([5], np.int64)})


def test_topk_k_too_large_is_an_error():
    node = helper.make_node("TopK", ["x", "k"], ["v", "i"])
    x = rand(2, 3)
    model = make_model(node, {"x": x}, {"v": F, "i": I64}, 11,
                       [numpy_helper.from_array(np.array([4], np.int64), "k")])
    with pytest.raises(octet.OctetError, match="k = 4 is outside"):
        octet.InferenceSession(model.SerializeToString()).run(None, {"x": x})


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, 0, 2, -1, -7, 9])
@pytest.mark.parametrize("shape", [(5, 5), (2, 3, 7), (6, 2), (0, 4)])
def test_trilu(upper, k, shape):
    inits = {} if k is None else {"k": np.array(k, np.int64)}
    check("Trilu", {"x": rand(*shape, seed=8)}, {"y": F}, 14, EXACT, {"upper": upper},
          initializers=inits)


def test_trilu_bool_mask():
    """The causal-mask idiom: Trilu over a bool matrix of ones."""
    check("Trilu", {"x": np.ones((4, 4), np.bool_)}, {"y": B}, 14, EXACT, {"upper": 0})
