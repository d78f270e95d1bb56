"""com.microsoft QLinearGlobalAveragePool and QLinearAveragePool against ONNX Runtime 1.31.1,
bit for bit, on 1 and 2 threads.

Global pooling: random NCHW / channels_last shapes of rank 3 to 5 with random and tie-heavy
(power-of-two) parameters, constant inputs at both ends of the range, exact rounding ties,
int32 wrap-around of the sum and MLAS's refusals. Windowed pooling: random 1-D/2-D/3-D
geometries (pads, strides, ceil_mode, count_include_pad, auto_pad, kernels larger than the
input) in both layouts, a sweep of 1-D output sizes, the kernel-covers-the-input case ORT runs
as a global pool, saturation (including ORT's x86 float -> int32 conversion of averages too
large for int32) and the nodes ORT refuses, which octet must refuse too."""

import warnings

import numpy as np
import pytest
from onnx import helper, numpy_helper

import octet
from test_qdq_fusion import DISABLED, TYPE_CODE, run_ort
from test_qlinear_ops import assert_same

MS = "com.microsoft"
DTYPES = pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["u8", "s8"])
LAYOUTS = pytest.mark.parametrize("channels_last", [0, 1], ids=["nchw", "nhwc"])


def pool_model(op, dtype, shape, xs, xz, ys, yz, omit=(), **attrs):
    """One pooling node on input X of `shape`; `omit` names zero points left out."""
    code = TYPE_CODE[np.dtype(dtype)]
    inits = [numpy_helper.from_array(np.array(xs, np.float32), "xs"),
             numpy_helper.from_array(np.array(ys, np.float32), "ys")]
    names = ["X", "xs", "xz", "ys", "yz"]
    for i, (name, value) in ((2, ("xz", xz)), (4, ("yz", yz))):
        if name in omit:
            names[i] = ""
        else:
            inits.append(numpy_helper.from_array(np.array(value, dtype), name))
    while names[-1] == "":
        names.pop()
    node = helper.make_node(op, names, ["Y"], domain=MS, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", code, shape)],
                              [helper.make_tensor_value_info("Y", code, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13),
                                                    helper.make_opsetid(MS, 1)], ir_version=10)
    return model.SerializeToString()


def check_against_ort(model, x, what):
    """octet on 1 and 2 threads equals ORT; when ORT refuses, octet must refuse too."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = run_ort(model, {"X": x}, DISABLED)[0]
    except Exception as e:  # noqa: BLE001 - any ORT failure means octet must refuse
        with pytest.raises(octet.OctetError):
            octet.InferenceSession(model, threads=1).run(None, {"X": x})
        return "refused: " + str(e).splitlines()[0][-80:]
    for threads in (1, 2):
        ours = octet.InferenceSession(model, threads=threads).run(None, {"X": x})[0]
        assert_same(ours, theirs, "%s threads %d" % (what, threads))
    return "ran"


def random_params(rng, dtype, trial):
    info = np.iinfo(dtype)
    if trial % 4 == 0:  # power-of-two scales: averages land exactly on rounding ties
        xs, ys = np.float32(2.0) ** -rng.integers(0, 6, size=2).astype(np.float32)
    else:
        xs, ys = rng.uniform(0.002, 0.5, size=2).astype(np.float32)
    xz, yz = rng.integers(info.min, info.max + 1, size=2)
    return xs, int(xz), ys, int(yz)


def random_input(rng, dtype, shape, trial):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, size=shape).astype(dtype)
    if trial % 6 == 1:
        x[...] = info.max
    elif trial % 6 == 2:
        x[...] = info.min
    elif trial % 6 == 3:  # few distinct values: many exact ties
        x = rng.choice([info.min, 0, 1, 2, info.max], size=shape).astype(dtype)
    return x


def layout_shape(n, c, spatial, channels_last):
    return [n] + spatial + [c] if channels_last else [n, c] + spatial


# --- QLinearGlobalAveragePool ----------------------------------------------------------------

@LAYOUTS
@DTYPES
def test_global_random(dtype, channels_last):
    rng = np.random.default_rng(7 + channels_last + 2 * (dtype == np.int8))
    for trial in range(60):
        spatial = [int(v) for v in rng.integers(1, 12, size=trial % 3 + 1)]
        shape = layout_shape(int(rng.integers(1, 4)), int(rng.integers(1, 40)), spatial,
                             channels_last)
        xs, xz, ys, yz = random_params(rng, dtype, trial)
        model = pool_model("QLinearGlobalAveragePool", dtype, shape, xs, xz, ys, yz,
                           channels_last=channels_last)
        x = random_input(rng, dtype, shape, trial)
        check_against_ort(model, x, "trial %d shape %s params %r" % (trial, shape,
                                                                     (xs, xz, ys, yz)))


@DTYPES
def test_global_ties_and_saturation(dtype):
    """Two pixels per channel with unit scales: every odd sum is a tie (half to even), and
    output zero points near both ends saturate."""
    info = np.iinfo(dtype)
    values = np.arange(info.min, info.max + 1)
    x = np.stack([values, np.roll(values, 1)], axis=-1).reshape(1, 256, 1, 2).astype(dtype)
    for xz, yz in ((0, 0), (info.min, info.max), (info.max, info.min), (3, -3 if info.min else 7)):
        for ys in (1.0, 0.5, 2.0, 0.25):
            model = pool_model("QLinearGlobalAveragePool", dtype, list(x.shape), 1.0, xz, ys, yz)
            assert check_against_ort(model, x, "xz %d ys %r yz %d" % (xz, ys, yz)) == "ran"


def test_global_large_image_and_wraparound():
    """The int32 sum wraps past 2^31 (255 * 8.5M pixels) and a large image on 2 threads."""
    n = 8_500_000
    x = np.full([1, 2, n], 255, np.uint8)
    x[0, 1] = 200
    model = pool_model("QLinearGlobalAveragePool", np.uint8, list(x.shape), 1.0, 0, 4.0 / n, 0)
    assert check_against_ort(model, x, "wrap nchw") == "ran"
    model = pool_model("QLinearGlobalAveragePool", np.uint8, [1, n, 2], 1.0, 0, 4.0 / n, 0,
                       channels_last=1)
    assert check_against_ort(model, np.ascontiguousarray(np.moveaxis(x, 1, 2)),
                             "wrap nhwc") == "ran"
    rng = np.random.default_rng(3)
    x = rng.integers(-128, 128, size=[4, 56, 56, 96]).astype(np.int8)
    model = pool_model("QLinearGlobalAveragePool", np.int8, list(x.shape), 0.05, -3, 0.01, 9,
                       channels_last=1)
    assert check_against_ort(model, x, "large nhwc") == "ran"


@pytest.mark.parametrize("case", ["scale_too_large", "scale_too_small", "negative_scale",
                                  "zero_y_scale", "empty_image", "empty_batch_bad_scale",
                                  "too_many_pixels", "rank_2"])
def test_global_refusals(case):
    """Where MLAS or ORT refuses, octet refuses too (check_against_ort asserts ORT fails)."""
    shape, xs, ys = [1, 2, 3, 3], 0.5, 0.25
    if case == "scale_too_large":
        xs = 256.0 * 9 * ys
    elif case == "scale_too_small":
        xs = 2.0 ** -33 * 9 * ys
    elif case == "negative_scale":
        xs = -0.5
    elif case == "zero_y_scale":
        ys = 0.0
    elif case == "empty_image":
        shape = [1, 2, 0, 3]
    elif case == "empty_batch_bad_scale":
        shape, xs = [0, 2, 3, 3], 1000.0
    elif case == "too_many_pixels":
        shape = [1, 1, 1 << 24]
    else:
        shape = [2, 3]
    model = pool_model("QLinearGlobalAveragePool", np.uint8, shape, xs, 0, ys, 0)
    assert check_against_ort(model, np.ones(shape, np.uint8), case).startswith("refused")


def test_global_edge_shapes_run():
    """Empty batch or channels, NaN multiplier (passes MLAS's check, gives qmin), a scale just
    under 256 and exactly 2^-32."""
    cases = [([0, 3, 4, 4], 0.1, 0.1), ([1, 0, 4, 4], 0.1, 0.1), ([1, 2, 2, 2], np.nan, 1.0),
             ([1, 2, 1, 1], 255.9, 1.0), ([1, 2, 1, 1], 2.0 ** -32, 1.0)]
    for shape, xs, ys in cases:
        x = np.full(shape, 200, np.uint8)
        model = pool_model("QLinearGlobalAveragePool", np.uint8, shape, xs, 3, ys, 5)
        assert check_against_ort(model, x, "shape %s xs %r" % (shape, xs)) == "ran"


@pytest.mark.parametrize("omit", [("xz",), ("yz",)], ids=["x_zero_point", "y_zero_point"])
def test_global_requires_zero_points(omit):
    model = pool_model("QLinearGlobalAveragePool", np.uint8, [1, 2, 3, 3], 0.1, 0, 0.1, 0,
                       omit=omit)
    assert check_against_ort(model, np.ones([1, 2, 3, 3], np.uint8), "omit").startswith("refused")
    name = "x_zero_point" if omit == ("xz",) else "y_zero_point"
    with pytest.raises(octet.OctetError, match="QLinearGlobalAveragePool.*" + name):
        octet.InferenceSession(model)


@DTYPES
def test_average_omitted_y_zero_point_is_zero(dtype):
    rng = np.random.default_rng(4)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, size=[2, 3, 5, 5]).astype(dtype)
    for kernel in ([2, 3], [5, 5]):  # windowed and ORT's global path
        model = pool_model("QLinearAveragePool", dtype, list(x.shape), 0.1, 5, 0.05, 0,
                           omit=("yz",), kernel_shape=kernel)
        assert check_against_ort(model, x, "kernel %s" % kernel) == "ran"


# --- QLinearAveragePool ----------------------------------------------------------------------

def random_geometry(rng, dims, trial):
    spatial = [int(v) for v in rng.integers(1, 10, size=dims)]
    kernel = [int(rng.integers(1, min(s + 2, 5) + 1)) for s in spatial]  # may exceed the input
    attrs = {"kernel_shape": kernel}
    if trial % 3:
        attrs["pads"] = [int(rng.integers(0, k)) for k in kernel * 2]
    if trial % 5:
        attrs["strides"] = [int(v) for v in rng.integers(1, 4, size=dims)]
    if rng.integers(0, 2) or trial % 7 == 0:
        attrs["ceil_mode"] = int(rng.integers(0, 2))
    if rng.integers(0, 2) or trial % 7 == 1:
        attrs["count_include_pad"] = int(rng.integers(0, 2))
    if trial % 9 == 0:
        attrs["auto_pad"] = ["VALID", "SAME_UPPER", "SAME_LOWER"][trial // 9 % 3]
    if trial % 13 == 5:  # the kernel covers the input: ORT's global path
        attrs = {"kernel_shape": spatial, "strides": attrs.get("strides", [1] * dims)}
    return spatial, attrs


@pytest.mark.parametrize("dims", [1, 2, 3])
@LAYOUTS
@DTYPES
def test_average_random(dtype, channels_last, dims):
    rng = np.random.default_rng(100 * dims + 10 * channels_last + (dtype == np.int8))
    outcomes = []
    for trial in range(70 if dims < 3 else 40):
        spatial, attrs = random_geometry(rng, dims, trial)
        shape = layout_shape(int(rng.integers(1, 3)), int(rng.integers(1, 20)), spatial,
                             channels_last)
        xs, xz, ys, yz = random_params(rng, dtype, trial)
        model = pool_model("QLinearAveragePool", dtype, shape, xs, xz, ys, yz,
                           channels_last=channels_last, **attrs)
        x = random_input(rng, dtype, shape, trial)
        what = "trial %d shape %s %s params %r" % (trial, shape, attrs, (xs, xz, ys, yz))
        if channels_last and empty_nhwc_output(model, x, shape, (xs, xz, ys, yz), attrs):
            outcomes.append("empty")
            continue
        outcomes.append(check_against_ort(model, x, what))
    assert outcomes.count("ran") > len(outcomes) * 3 // 4, outcomes


def empty_nhwc_output(model, x, shape, params, attrs):
    """ORT's channels_last kernel divides by zero (SIGFPE, the process dies) when an output
    spatial dim is 0 and the batch is not empty; its NCHW kernel returns the empty tensor, and
    so does octet in both layouts. Returns True (after checking octet) in that case, without
    running ORT's NHWC kernel."""
    twin = pool_model("QLinearAveragePool", x.dtype, [shape[0], shape[-1]] + shape[1:-1],
                      *params, **attrs)
    try:
        expected = run_ort(twin, {"X": np.ascontiguousarray(np.moveaxis(x, -1, 1))}, DISABLED)[0]
    except Exception:  # noqa: BLE001 - ORT refuses the NCHW twin: check_against_ort covers it
        return False
    if expected.size or not shape[0]:
        return False
    ours = octet.InferenceSession(model).run(None, {"X": x})[0]
    assert ours.shape == np.moveaxis(expected, 1, -1).shape
    return True


def test_average_output_size_sweep():
    """Every small 1-D geometry: output size (or refusal) and values equal ORT's."""
    rng = np.random.default_rng(1)
    for n in range(1, 8):
        x = rng.integers(0, 256, size=[1, 3, n]).astype(np.uint8)
        for k in range(1, 5):
            for s in range(1, 4):
                for ceil in (0, 1):
                    variants = [{"auto_pad": ap} for ap in ("VALID", "SAME_UPPER", "SAME_LOWER")]
                    variants += [{"pads": [b, e]} for b in range(k) for e in range(k)]
                    for v in variants:
                        attrs = dict(kernel_shape=[k], strides=[s], ceil_mode=ceil,
                                     count_include_pad=(n + k + s) % 2, **v)
                        model = pool_model("QLinearAveragePool", np.uint8, [1, 3, n], 0.3, 7,
                                           0.1, 11, **attrs)
                        check_against_ort(model, x, "n %d %s" % (n, attrs))


@DTYPES
def test_average_ties_and_saturation(dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(5)
    x = rng.integers(info.min, info.max + 1, size=[2, 5, 6, 6]).astype(dtype)
    cases = [(1.0, 0, 1.0, 0), (0.5, 1, 1.0, info.max), (0.5, -1 if info.min else 1, 1.0, info.min),
             (1000.0, 0, 1e-5, 0),  # averages past int32: x86 conversion gives qmin
             (1000.0, info.max, 1e-5, 3),  # ... and very negative ones
             (np.inf, 0, 0.1, 7), (np.nan, 0, 0.1, 7), (0.1, 0, 0.0, 7), (0.1, 0, -0.5, 7)]
    for xs, xz, ys, yz in cases:
        for attrs in ({"kernel_shape": [2, 2]}, {"kernel_shape": [3, 2], "pads": [1, 1, 2, 0],
                                                   "strides": [2, 1], "count_include_pad": 1}):
            model = pool_model("QLinearAveragePool", dtype, list(x.shape), xs, xz, ys, yz,
                               **attrs)
            assert check_against_ort(model, x, "params %r %s" % ((xs, xz, ys, yz), attrs)) == "ran"


def test_average_global_path():
    """Kernel = input, no pads (strides and ceil_mode ignored): ORT's integer global path,
    including its refusal of an out-of-range multiplier."""
    rng = np.random.default_rng(9)
    x = rng.integers(0, 256, size=[2, 3, 4, 5]).astype(np.uint8)
    for attrs in ({"strides": [3, 3]}, {"ceil_mode": 1, "strides": [2, 7]},
                  {"auto_pad": "VALID", "pads": [1, 1, 1, 1]}, {"count_include_pad": 1}):
        model = pool_model("QLinearAveragePool", np.uint8, list(x.shape), 0.1, 3, 0.03, 7,
                           kernel_shape=[4, 5], **attrs)
        assert check_against_ort(model, x, str(attrs)) == "ran"
    model = pool_model("QLinearAveragePool", np.uint8, list(x.shape), 1000.0, 3, 0.03, 7,
                       kernel_shape=[4, 5])
    assert check_against_ort(model, x, "bad multiplier").startswith("refused")
    x6 = rng.integers(0, 256, size=[1, 2, 2, 3, 2, 2]).astype(np.uint8)  # 4 spatial dims
    model = pool_model("QLinearAveragePool", np.uint8, list(x6.shape), 0.1, 3, 0.03, 7,
                       kernel_shape=[2, 3, 2, 2])
    assert check_against_ort(model, x6, "4-D global") == "ran"


def test_average_threads_large():
    rng = np.random.default_rng(11)
    for channels_last in (0, 1):
        shape = layout_shape(2, 64, [28, 28], channels_last)
        x = rng.integers(0, 256, size=shape).astype(np.uint8)
        model = pool_model("QLinearAveragePool", np.uint8, shape, 0.02, 128, 0.015, 120,
                           kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
                           channels_last=channels_last)
        assert check_against_ort(model, x, "large %d" % channels_last) == "ran"


@pytest.mark.parametrize("case,attrs,omit,match", [
    ("omitted x_zero_point", {}, ("xz",), "x_zero_point"),
    ("omitted x_zero_points", {}, ("xz", "yz"), "x_zero_point"),
    ("pad equal to kernel", {"pads": [2, 0, 0, 0]}, (), "pads"),
    ("negative pad", {"pads": [-1, 0, 0, 0]}, (), "pads"),
    ("dilations", {"dilations": [1, 1]}, (), "dilations"),
    ("zero stride", {"strides": [0, 1]}, (), "strides"),
    ("short strides", {"strides": [1]}, (), "strides"),
    ("unknown auto_pad", {"auto_pad": "FOO"}, (), "auto_pad"),
])
def test_average_refused_at_load(case, attrs, omit, match):
    """Nodes ORT 1.31.1 cannot load: octet refuses them when the session is created."""
    model = pool_model("QLinearAveragePool", np.uint8, [1, 1, 4, 4], 0.1, 0, 0.1, 0, omit=omit,
                       kernel_shape=[2, 2], **attrs)
    x = np.zeros([1, 1, 4, 4], np.uint8)
    assert check_against_ort(model, x, case).startswith("refused")
    with pytest.raises(octet.OctetError, match="QLinearAveragePool.*" + match):
        octet.InferenceSession(model)


@pytest.mark.parametrize("case", ["negative output size", "empty spatial dim",
                                  "4 spatial dims", "rank mismatch"])
def test_average_refused_at_run(case):
    shape, attrs = [1, 1, 2, 2], {"kernel_shape": [4, 1]}
    if case == "empty spatial dim":
        shape, attrs = [1, 2, 0, 4], {"kernel_shape": [1, 2]}
    elif case == "4 spatial dims":
        shape, attrs = [1, 1, 2, 2, 2, 2], {"kernel_shape": [1, 1, 1, 1]}
    elif case == "rank mismatch":
        shape, attrs = [1, 1, 4, 4], {"kernel_shape": [2]}
    model = pool_model("QLinearAveragePool", np.uint8, shape, 0.1, 0, 0.1, 0, **attrs)
    assert check_against_ort(model, np.zeros(shape, np.uint8), case).startswith("refused")
