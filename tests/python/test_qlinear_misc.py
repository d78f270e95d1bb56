"""com.microsoft QLinearConcat, QLinearSoftmax, QLinearSigmoid and QLinearLeakyRelu against
ONNX Runtime 1.31.1, bit for bit.

The element-wise ops see every byte (0..255 / -128..127) under many random and tie-heavy
parameter sets; Concat sees every byte on each input with copied, re-mapped and mixed inputs;
Softmax sees rows drawn from the full range (and constant, two-valued and one-hot rows) at
several lengths, axes and both `opset` conventions."""

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import octet
from test_qdq_fusion import DISABLED, TYPE_CODE, run_ort
from test_qlinear_ops import assert_same

MS = "com.microsoft"
DTYPES = pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["u8", "s8"])


def all_bytes(dtype):
    return (np.arange(256) + np.iinfo(dtype).min).astype(dtype)


def make_model(nodes, inputs, inits, out_code, out_shape=None):
    graph = helper.make_graph(nodes, "g", inputs,
                              [helper.make_tensor_value_info("Y", out_code, out_shape)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(MS, 1)], ir_version=10)
    return model.SerializeToString()


def scalar_inits(dtype, **named):
    """Initializers from name=value: names starting with 's' are float scales, others zero
    points of `dtype`."""
    return [numpy_helper.from_array(np.array(v, np.float32 if k.startswith("s") else dtype), k)
            for k, v in named.items()]


def run_both(model, feeds):
    ours = octet.InferenceSession(model, threads=1).run(None, feeds)[0]
    theirs = run_ort(model, feeds, DISABLED)[0]
    return ours, theirs


def random_params(rng, dtype, count):
    info = np.iinfo(dtype)
    return (rng.uniform(0.001, 0.3, size=count).astype(np.float32),
            rng.integers(info.min, info.max + 1, size=count))


# --- QLinearSigmoid, QLinearLeakyRelu --------------------------------------------------------

def unary_model(op, dtype, shape, xs, xz, ys, yz, attrs=None, omit_zeros=False):
    code = TYPE_CODE[np.dtype(dtype)]
    inits = scalar_inits(dtype, sx=xs, sy=ys, **({} if omit_zeros else {"zx": xz, "zy": yz}))
    node = helper.make_node(op, ["X", "sx", "" if omit_zeros else "zx", "sy",
                                 "" if omit_zeros else "zy"], ["Y"], domain=MS, **(attrs or {}))
    return make_model([node], [helper.make_tensor_value_info("X", code, shape)], inits, code)


@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu"])
@DTYPES
def test_unary_every_byte(op, dtype):
    rng = np.random.default_rng(11)
    x = all_bytes(dtype).reshape(4, 64)
    info = np.iinfo(dtype)
    for trial in range(40):
        (xs, ys), (xz, yz) = random_params(rng, dtype, 2)
        if op == "QLinearSigmoid" and trial % 2:  # sigmoid's usual output range [0, 1]
            ys, yz = np.float32(1 / 256 if trial % 4 == 1 else 1 / 255), info.min
        if trial % 5 == 0:  # power-of-two scales: many exact ties
            xs, ys = np.float32(2.0 ** -rng.integers(2, 7)), np.float32(2.0 ** -rng.integers(2, 9))
        if trial == 7:  # inputs beyond sigmoid's +-18 clamp
            xs = np.float32(0.5)
        attrs = {"alpha": float(rng.choice([0.01, 0.1, 0.2, -0.5, 1.7]))} \
            if op == "QLinearLeakyRelu" and trial % 3 else None
        model = unary_model(op, dtype, [4, 64], xs, xz, ys, yz, attrs)
        ours, theirs = run_both(model, {"X": x})
        assert_same(ours, theirs, "%s trial %d xs %r xz %d ys %r yz %d %s" % (
            op, trial, xs, xz, ys, yz, attrs))


@pytest.mark.parametrize("op", ["QLinearSigmoid", "QLinearLeakyRelu"])
def test_unary_omitted_zero_points(op):
    x = all_bytes(np.uint8)
    ours = octet.InferenceSession(unary_model(op, np.uint8, [256], 0.05, 0, 0.004, 0,
                                              omit_zeros=True)).run(None, {"X": x})[0]
    theirs = run_ort(unary_model(op, np.uint8, [256], 0.05, 0, 0.004, 0), {"X": x}, DISABLED)[0]
    assert_same(ours, theirs, op)


def test_unary_shapes():
    rng = np.random.default_rng(3)
    for shape in ([], [0, 3], [1], [3, 5, 7], [2, 1, 65]):
        x = rng.integers(0, 256, size=shape).astype(np.uint8)
        model = unary_model("QLinearSigmoid", np.uint8, shape, 0.07, 120, 1 / 256, 0)
        ours, theirs = run_both(model, {"X": x})
        assert_same(ours, theirs, "shape %s" % shape)


# --- QLinearConcat ---------------------------------------------------------------------------

def concat_model(dtype, shapes, axis, params, y_params):
    code = TYPE_CODE[np.dtype(dtype)]
    inits = scalar_inits(dtype, sy=y_params[0], zy=y_params[1])
    node_inputs, graph_inputs = ["sy", "zy"], []
    for i, (shape, (s, z)) in enumerate(zip(shapes, params)):
        inits += scalar_inits(dtype, **{"s%d" % i: s, "z%d" % i: z})
        node_inputs += ["X%d" % i, "s%d" % i, "z%d" % i]
        graph_inputs.append(helper.make_tensor_value_info("X%d" % i, code, shape))
    node = helper.make_node("QLinearConcat", node_inputs, ["Y"], domain=MS, axis=axis)
    return make_model([node], graph_inputs, inits, code)


@DTYPES
def test_concat_every_byte(dtype):
    """Three inputs holding all 256 bytes: one with the output's parameters (copied), two
    re-mapped through tables, over random and tie-heavy parameter sets."""
    rng = np.random.default_rng(5)
    x = all_bytes(dtype).reshape(1, 256, 1)
    for trial in range(30):
        scales, zeros = random_params(rng, dtype, 4)
        if trial % 4 == 0:
            scales = np.float32(2.0) ** -rng.integers(2, 9, size=4).astype(np.float32)
        params = [(scales[0], zeros[0]), (scales[3], zeros[3]), (scales[1], zeros[1])]
        if trial % 2:
            params[1] = (scales[3], zeros[1])  # same scale, other zero point: not a copy
        model = concat_model(dtype, [[1, 256, 1]] * 3, 1, params, (scales[3], zeros[3]))
        feeds = {"X%d" % i: x for i in range(3)}
        ours, theirs = run_both(model, feeds)
        assert_same(ours, theirs, "trial %d params %s y %s" % (trial, params,
                                                               (scales[3], zeros[3])))


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -3])
def test_concat_axes_and_shapes(axis):
    rng = np.random.default_rng(9)
    base = [2, 3, 4]
    shapes = []
    for extent in (1, 3, 0, 2):
        s = list(base)
        s[axis] = extent
        shapes.append(s)
    for dtype in (np.uint8, np.int8):
        scales, zeros = random_params(rng, dtype, 5)
        params = list(zip(scales[:4], zeros[:4]))
        model = concat_model(dtype, shapes, axis, params, (scales[4], zeros[4]))
        info = np.iinfo(dtype)
        feeds = {"X%d" % i: rng.integers(info.min, info.max + 1, size=s).astype(dtype)
                 for i, s in enumerate(shapes)}
        ours, theirs = run_both(model, feeds)
        assert_same(ours, theirs, "axis %d %s" % (axis, np.dtype(dtype).name))


def test_concat_mismatched_shapes_raise():
    model = concat_model(np.uint8, [[2, 3], [3, 3]], 1, [(0.1, 1), (0.1, 1)], (0.2, 3))
    with pytest.raises(octet.OctetError, match="QLinearConcat.*does not match"):
        octet.InferenceSession(model).run(None, {"X0": np.zeros((2, 3), np.uint8),
                                                 "X1": np.zeros((3, 3), np.uint8)})


# --- QLinearSoftmax --------------------------------------------------------------------------

def softmax_model(dtype, shape, xs, xz, ys, yz, opset, axis=None, static_shape=True):
    code = TYPE_CODE[np.dtype(dtype)]
    attrs = {"opset": opset}
    if axis is not None:
        attrs["axis"] = axis
    node = helper.make_node("QLinearSoftmax", ["X", "sx", "zx", "sy", "zy"], ["Y"], domain=MS,
                            **attrs)
    in_shape = shape if static_shape else ["d%d" % i for i in range(len(shape))]
    return make_model([node], [helper.make_tensor_value_info("X", code, in_shape)],
                      scalar_inits(dtype, sx=xs, zx=xz, sy=ys, zy=yz), code)


def softmax_rows(rng, dtype, rows, length):
    """Random rows over the full range, plus constant, two-valued and one-hot rows."""
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, size=(rows, length))
    x[0] = info.max
    x[1] = info.min
    x[2] = rng.choice([info.min, info.max], size=length)
    x[3] = info.min
    x[3, length // 2] = info.max
    x[4] = rng.integers(info.max - 8, info.max + 1, size=length)  # close values: many ties
    return x.astype(dtype)


@pytest.mark.parametrize("length", [1, 2, 7, 16, 128, 1000])
@DTYPES
def test_softmax_rows(dtype, length):
    rng = np.random.default_rng(length)
    info = np.iinfo(dtype)
    x = softmax_rows(rng, dtype, 24, length)
    for trial in range(12):
        xs = np.float32(rng.uniform(0.005, 0.5)) if trial % 3 else np.float32(
            2.0 ** -rng.integers(1, 7))
        xz = rng.integers(info.min, info.max + 1)
        # The quantizer's output parameters (1/256 with the type's minimum) and others.
        ys, yz = [(1 / 256, info.min), (1 / 255, info.min), (1 / 256, 0), (0.003, 5),
                  (0.02, info.min + 3), (1 / 128, -20 if info.min < 0 else 20)][trial % 6]
        model = softmax_model(dtype, [24, length], xs, xz, ys, yz, opset=13)
        ours, theirs = run_both(model, {"X": x})
        assert_same(ours, theirs, "length %d trial %d xs %r ys %r yz %d" % (length, trial, xs,
                                                                           ys, yz))


@pytest.mark.parametrize("opset,axis", [(13, 0), (13, 1), (13, -1), (13, None), (11, 1),
                                        (11, 2), (11, 0), (11, None), (12, -1)])
@DTYPES
def test_softmax_axes(dtype, opset, axis):
    rng = np.random.default_rng(17)
    info = np.iinfo(dtype)
    shape = [3, 5, 6]
    x = rng.integers(info.min, info.max + 1, size=shape).astype(dtype)
    for static_shape in (True, False):
        model = softmax_model(dtype, shape, 0.08, 3, 1 / 256, info.min, opset, axis,
                              static_shape)
        ours, theirs = run_both(model, {"X": x})
        assert_same(ours, theirs, "opset %d axis %s static %s" % (opset, axis, static_shape))


def test_softmax_attention_shape_threads():
    """MiniLM's attention softmax shape, run on 2 threads (results must not depend on it)."""
    rng = np.random.default_rng(23)
    x = rng.integers(0, 256, size=(2, 12, 128, 128)).astype(np.uint8)
    model = softmax_model(np.uint8, list(x.shape), 0.11, 0, 1 / 256, 0, opset=13)
    ours = octet.InferenceSession(model, threads=2).run(None, {"X": x})[0]
    assert_same(ours, run_ort(model, {"X": x}, DISABLED)[0], "attention")


def test_softmax_requires_opset_attribute():
    code = TensorProto.UINT8
    node = helper.make_node("QLinearSoftmax", ["X", "sx", "zx", "sy", "zy"], ["Y"], domain=MS)
    model = make_model([node], [helper.make_tensor_value_info("X", code, [2, 3])],
                       scalar_inits(np.uint8, sx=0.1, zx=0, sy=1 / 256, zy=0), code)
    with pytest.raises(octet.OctetError, match="QLinearSoftmax.*opset"):
        octet.InferenceSession(model).run(None, {"X": np.zeros((2, 3), np.uint8)})
