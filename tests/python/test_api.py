"""octet's Python API: metadata and results against onnxruntime and numpy, dtype
plumbing for every tensor type, and a clear octet.OctetError for each bad input."""

import ctypes
import mmap
import pathlib

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import octet
import ort_exact

IR_VERSION = 10  # readable by onnxruntime 1.31.1


def make_model(nodes, inputs, outputs, initializers=(), opset=21):
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=IR_VERSION)


def ort_session(model):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


WEIGHT = np.arange(-6, 6, dtype=np.float32).reshape(3, 4) / 4
BIAS = np.array([0.5, -1, 0, 2], dtype=np.float32)


@pytest.fixture(scope="module")
def mlp_model():
    """out = Relu(x @ W + b) with a symbolic batch; sq = z * z with an unknown dim."""
    nodes = [
        helper.make_node("MatMul", ["x", "W"], ["mm"]),
        helper.make_node("Add", ["mm", "b"], ["pre"]),
        helper.make_node("Relu", ["pre"], ["out"]),
        helper.make_node("Mul", ["z", "z"], ["sq"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3]),
              helper.make_tensor_value_info("z", TensorProto.FLOAT, [None, 2])]
    outputs = [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", 4]),
               helper.make_tensor_value_info("sq", TensorProto.FLOAT, [None, 2])]
    inits = [numpy_helper.from_array(WEIGHT, "W"), numpy_helper.from_array(BIAS, "b")]
    return make_model(nodes, inputs, outputs, inits)


@pytest.fixture(scope="module")
def mlp_path(mlp_model, tmp_path_factory):
    path = tmp_path_factory.mktemp("models") / "mlp.onnx"
    onnx.save(mlp_model, str(path))
    return path


def feeds():
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((5, 3)).astype(np.float32),
            "z": rng.standard_normal((2, 2)).astype(np.float32)}


def test_metadata_matches_onnxruntime(mlp_model, mlp_path):
    ours = octet.InferenceSession(str(mlp_path))
    theirs = ort_session(mlp_model)
    for mine, ref in [(ours.get_inputs(), theirs.get_inputs()),
                      (ours.get_outputs(), theirs.get_outputs())]:
        assert [a.name for a in mine] == [a.name for a in ref]
        assert [a.shape for a in mine] == [a.shape for a in ref]
        assert [a.type for a in mine] == [a.type for a in ref]
    assert ours.get_inputs()[0].shape == ["batch", 3]
    assert ours.get_inputs()[1].shape == [None, 2]
    assert ours.get_inputs()[0].type == "tensor(float)"


def test_run_matches_numpy_and_onnxruntime(mlp_model, mlp_path):
    f = feeds()
    out, sq = octet.InferenceSession(mlp_path).run(None, f)  # os.PathLike accepted
    np.testing.assert_array_equal(sq, f["z"] * f["z"])
    reference = np.maximum(f["x"].astype(np.float64) @ WEIGHT + BIAS, 0)
    np.testing.assert_allclose(out, reference, rtol=1e-6, atol=1e-6)
    ort_out, ort_sq = ort_session(mlp_model).run(None, f)
    assert out.dtype == np.float32 and out.shape == ort_out.shape == (5, 4)
    np.testing.assert_allclose(out, ort_out, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(sq, ort_sq)


def test_bytes_output_names_threads_and_noncontiguous(mlp_model, mlp_path):
    f = feeds()
    (expected_sq, expected_out) = octet.InferenceSession(mlp_path).run(["sq", "out"], f)
    session = octet.InferenceSession(mlp_model.SerializeToString(), threads=2)
    sq, out = session.run(["sq", "out"], f)
    np.testing.assert_array_equal(out, expected_out)
    np.testing.assert_array_equal(sq, expected_sq)
    # A transposed (Fortran-ordered) view and a strided slice are copied to C order.
    x_t = np.asfortranarray(f["x"])
    z_strided = np.repeat(f["z"], 2, axis=1)[:, ::2]
    assert not x_t.flags.c_contiguous and not z_strided.flags.c_contiguous
    out2, sq2 = session.run(None, {"x": x_t, "z": z_strided})
    np.testing.assert_array_equal(out2, expected_out)
    np.testing.assert_array_equal(sq2, expected_sq)


def dq_model(elem_type, shape):
    zero = numpy_helper.from_array(np.zeros((), helper.tensor_dtype_to_np_dtype(elem_type)), "zp")
    zero.data_type = elem_type
    nodes = [helper.make_node("DequantizeLinear", ["x", "scale", "zp"], ["y"])]
    return make_model(
        nodes, [helper.make_tensor_value_info("x", elem_type, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(np.array(0.5, np.float32), "scale"), zero])


def q_model(elem_type, shape):
    zero = helper.make_tensor("zp", elem_type, [], [0])
    nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["y"])]
    return make_model(
        nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", elem_type, shape)],
        [numpy_helper.from_array(np.array(0.5, np.float32), "scale"), zero])


QUANT_TYPES = [
    (TensorProto.INT8, np.int8), (TensorProto.UINT8, np.uint8), (TensorProto.INT16, np.int16),
    (TensorProto.UINT16, np.uint16), (TensorProto.INT4, ml_dtypes.int4),
    (TensorProto.UINT4, ml_dtypes.uint4),
    (TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn),
    (TensorProto.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz),
    (TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2),
    (TensorProto.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz),
]


@pytest.mark.parametrize("elem_type,np_type", QUANT_TYPES,
                         ids=[helper.tensor_dtype_to_string(t) for t, _ in QUANT_TYPES])
def test_quantized_dtypes_round_trip(elem_type, np_type):
    """ml_dtypes in and out, checked against ONNX's reference evaluator (onnxruntime's
    Python binding cannot pass int4 / float8 arrays)."""
    values = np.array([[-3.0, -1.5, 0.0], [0.5, 2.0, 3.5]], np.float32)
    if "uint" in np.dtype(np_type).name:
        values = np.abs(values)
    # Input of this dtype -> float.
    x = values.astype(np_type)
    model = dq_model(elem_type, [2, 3])
    session = octet.InferenceSession(model.SerializeToString())
    assert session.get_inputs()[0].type == ort_session(model).get_inputs()[0].type
    (ours,) = session.run(None, {"x": x})
    (expected,) = ReferenceEvaluator(model).run(None, {"x": x})
    assert ours.dtype == np.float32
    np.testing.assert_array_equal(ours, expected)
    # float -> output of this dtype: the same numpy (ml_dtypes) dtype and values.
    model = q_model(elem_type, [2, 3])
    (ours,) = octet.InferenceSession(model.SerializeToString()).run(None, {"x": values})
    (expected,) = ReferenceEvaluator(model).run(None, {"x": values})
    assert ours.dtype == expected.dtype == np.dtype(np_type)
    np.testing.assert_array_equal(ours.astype(np.float32), expected.astype(np.float32))


def expect_error(fn, *needles):
    with pytest.raises(octet.OctetError) as info:
        fn()
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    return message


def test_error_is_a_runtime_error():
    assert issubclass(octet.OctetError, RuntimeError)


def test_bad_feeds_raise_clear_errors(mlp_path):
    session = octet.InferenceSession(mlp_path)
    f = feeds()
    expect_error(lambda: session.run(None, {**f, "nope": f["x"]}), "unknown input name 'nope'",
                 "x, z")
    expect_error(lambda: session.run(None, {"x": f["x"].astype(np.float64), "z": f["z"]}),
                 "input 'x'", "tensor(float)", "float64")
    expect_error(lambda: session.run(None, {"x": f["x"][0], "z": f["z"]}), "input 'x'", "rank 2")
    expect_error(lambda: session.run(None, {"x": f["x"][:, :2].copy(), "z": f["z"]}),
                 "input 'x'", "dimension 1")
    expect_error(lambda: session.run(None, {"x": f["x"]}), "input 'z'", "not fed")
    expect_error(lambda: session.run(["nope"], f), "unknown output name 'nope'")


def test_bad_models_raise_clear_errors(mlp_model, tmp_path):
    data = mlp_model.SerializeToString()
    truncated = tmp_path / "truncated.onnx"
    truncated.write_bytes(data[: len(data) // 2])
    expect_error(lambda: octet.InferenceSession(str(truncated)))
    expect_error(lambda: octet.InferenceSession(data[: len(data) // 3]))
    expect_error(lambda: octet.InferenceSession(str(tmp_path / "missing.onnx")), "missing.onnx")
    unknown = make_model([helper.make_node("FooBar", ["x"], ["y"], name="foo")],
                         [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                         [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    expect_error(lambda: octet.InferenceSession(unknown.SerializeToString()), "FooBar",
                 "ai.onnx", "opset 21")


def test_outputs_are_the_callers_own_arrays():
    """Outputs may be handed over without a copy; one that shares bytes with an initializer,
    an input or another output must still be a private copy the caller can write to."""
    weights = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = make_model(
        [helper.make_node("Identity", ["w"], ["w_out"]),
         helper.make_node("Identity", ["x"], ["x_out"]),
         helper.make_node("Add", ["x", "w"], ["sum"]),
         helper.make_node("Identity", ["sum"], ["sum_again"]),
         helper.make_node("Mul", ["x", "w"], ["product"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, [2, 3])
         for name in ("w_out", "x_out", "sum", "sum_again", "product")],
        [numpy_helper.from_array(weights, "w")])
    session = octet.InferenceSession(model.SerializeToString())
    x = np.ones((2, 3), np.float32)
    for _ in range(2):  # the second run must not see the first run's writes
        w_out, x_out, total, total_again, product = session.run(None, {"x": x})
        np.testing.assert_array_equal(w_out, weights)
        np.testing.assert_array_equal(x_out, x)
        np.testing.assert_array_equal(total, x + weights)
        np.testing.assert_array_equal(total_again, x + weights)
        np.testing.assert_array_equal(product, x * weights)
        for array in (w_out, x_out, total, total_again, product):
            assert array.flags.writeable
            array[...] = -7
        np.testing.assert_array_equal(x, np.ones((2, 3), np.float32))


def _readable_in_place(array):
    """octet_module.cc's ReadableInPlace: the bytes from the end of the array to the end of
    the 64-byte line after its last one lie in the page of its last byte and are zero."""
    begin, nbytes = array.ctypes.data, array.nbytes
    end, padded_end = begin + nbytes, begin + (nbytes + 63) // 64 * 64 + 64
    if begin % array.itemsize or (end - 1) // mmap.PAGESIZE != (padded_end - 1) // mmap.PAGESIZE:
        return False
    return ctypes.string_at(end, padded_end - end) == bytes(padded_end - end)


def test_feeds_read_in_place_or_copied_give_the_same_results():
    """Large feeds whose tail bytes allow it are read in place, others copied (data right
    after the array, as in a slice of a bigger buffer): the same bytes either way and
    ONNX Runtime's values, the feed never written, and an output that is the feed a
    private copy."""
    model = make_model(
        [helper.make_node("Identity", ["x"], ["x_out"]),
         helper.make_node("ReduceSum", ["x", "axes"], ["sums"], keepdims=0),
         helper.make_node("Softmax", ["x"], ["probs"], axis=-1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 1001])],
        [helper.make_tensor_value_info("x_out", TensorProto.FLOAT, [None, 1001]),
         helper.make_tensor_value_info("sums", TensorProto.FLOAT, [None]),
         helper.make_tensor_value_info("probs", TensorProto.FLOAT, [None, 1001])],
        [numpy_helper.from_array(np.array([1], np.int64), "axes")])
    session = octet.InferenceSession(model.SerializeToString())
    values = np.random.default_rng(3).standard_normal((300, 1001)).astype(np.float32)
    mapped = mmap.mmap(-1, values.nbytes + 4096)  # zero-filled pages: zeros after the array
    standalone = np.frombuffer(mapped, np.float32, count=values.size).reshape(values.shape)
    standalone[...] = values
    followed = bytearray(values.tobytes() + b"\xff" * 256)
    sliced = np.frombuffer(followed, np.float32, count=values.size).reshape(values.shape)
    assert _readable_in_place(standalone) and not _readable_in_place(sliced)
    want = ort_session(model).run(None, {"x": values})
    first = None
    for x in (standalone, sliced):
        got = session.run(None, {"x": x})
        if first is None:
            first = [g.copy() for g in got]
        for g, f, w in zip(got, first, want):
            np.testing.assert_array_equal(g, f)
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-4)  # float sums: any order
        got[0][...] = -1  # the Identity output is the caller's own array
        np.testing.assert_array_equal(x, values)


def _guarded(values):
    """A read-only copy of `values` whose last byte is followed by an inaccessible page,
    so reading one byte past it kills the process."""
    page = mmap.PAGESIZE
    data_pages = max(1, -(-values.nbytes // page))
    mapped = mmap.mmap(-1, (data_pages + 1) * page)
    base = ctypes.addressof(ctypes.c_char.from_buffer(mapped))
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mprotect.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    assert libc.mprotect(base + data_pages * page, page, 0) == 0, ctypes.get_errno()  # PROT_NONE
    offset = data_pages * page - values.nbytes
    array = np.frombuffer(mapped, values.dtype, count=values.size, offset=offset)
    array = array.reshape(values.shape)
    array[...] = values
    return array


def _qdq_matmul(x_type, k):
    """DQ(x) and DQ(W) -> MatMul -> Q, which octet runs as one integer node."""
    w = np.random.default_rng(k).integers(-128, 128, (k, 40), dtype=np.int8)
    zero = np.array(-3 if x_type == TensorProto.INT8 else 130,
                    np.int8 if x_type == TensorProto.INT8 else np.uint8)
    return make_model(
        [helper.make_node("DequantizeLinear", ["x", "xs", "xz"], ["xf"]),
         helper.make_node("DequantizeLinear", ["w", "ws"], ["wf"]),
         helper.make_node("MatMul", ["xf", "wf"], ["yf"]),
         helper.make_node("QuantizeLinear", ["yf", "ys", "xz"], ["y"])],
        [helper.make_tensor_value_info("x", x_type, [None, k])],
        [helper.make_tensor_value_info("y", x_type, [None, 40])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(zero, "xz"),
         numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
         numpy_helper.from_array(np.array(0.01, np.float32), "ws"),
         numpy_helper.from_array(np.array(0.4, np.float32), "ys")])


def _qlinear_conv(c, m, group, kernel, stride, x_type):
    rng = np.random.default_rng(c * 100 + kernel)
    w = rng.integers(-128, 128, (m, c // group, kernel, kernel), dtype=np.int8)
    x_zero = np.array(7, np.int8) if x_type == TensorProto.INT8 else np.array(119, np.uint8)
    return make_model(
        [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "xz", "b"],
                          ["y"], group=group, kernel_shape=[kernel, kernel],
                          strides=[stride, stride], pads=[kernel // 2] * 4)],
        [helper.make_tensor_value_info("x", x_type, [1, c, None, None])],
        [helper.make_tensor_value_info("y", x_type, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(x_zero, "xz"),
         numpy_helper.from_array(np.array(0.05, np.float32), "xs"),
         numpy_helper.from_array(rng.uniform(0.002, 0.02, m).astype(np.float32), "ws"),
         numpy_helper.from_array(np.zeros(m, np.int8), "wz"),
         numpy_helper.from_array(np.array(0.5, np.float32), "ys"),
         numpy_helper.from_array(rng.integers(-5000, 5000, m, dtype=np.int32), "b")], opset=13)


def _random_8bit(rng, shape, onnx_type):
    return rng.integers(-128, 128, shape, dtype=np.int8).view(
        np.int8 if onnx_type == TensorProto.INT8 else np.uint8)


def _bounded_reader_case(case, rng):
    """(model, x) for test_feeds_ending_at_an_unreadable_page."""
    s8, u8 = TensorProto.INT8, TensorProto.UINT8
    if case == "qdq_s8_k64":
        return _qdq_matmul(s8, 64), _random_8bit(rng, (37, 64), s8)
    if case == "qdq_u8_k63":
        return _qdq_matmul(u8, 63), _random_8bit(rng, (37, 63), u8)
    if case == "qlinearmatmul_k5":
        b = rng.integers(-128, 128, (5, 9), dtype=np.int8)
        model = make_model(
            [helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "az"],
                              ["y"])],
            [helper.make_tensor_value_info("a", u8, [None, 5])],
            [helper.make_tensor_value_info("y", u8, None)],
            [numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.array(131, np.uint8), "az"),
             numpy_helper.from_array(np.array(0.03, np.float32), "as"),
             numpy_helper.from_array(np.array(0.02, np.float32), "bs"),
             numpy_helper.from_array(np.array(-2, np.int8), "bz"),
             numpy_helper.from_array(np.array(0.05, np.float32), "ys")])
        return model, _random_8bit(rng, (11, 5), u8)
    if case == "quantize_linear":
        model = make_model(
            [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"])],
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
            [helper.make_tensor_value_info("y", s8, None)],
            [numpy_helper.from_array(np.array(0.1, np.float32), "s"),
             numpy_helper.from_array(np.array(3, np.int8), "z")])
        return model, rng.uniform(-15, 15, 1001).astype(np.float32)
    if case == "concat":  # a KV cache's past tensor and the new position's
        model = make_model([helper.make_node("Concat", ["x", "new"], ["y"], axis=2)],
                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, None, 7])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                           [numpy_helper.from_array(
                               rng.standard_normal((1, 3, 1, 7)).astype(np.float32), "new")])
        return model, rng.standard_normal((1, 3, 5, 7)).astype(np.float32)
    if case == "softmax":
        model = make_model([helper.make_node("Softmax", ["x"], ["y"])],
                           [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 77])],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        return model, rng.standard_normal((13, 77)).astype(np.float32)
    # QLinearConv: (in channels, out channels, group, kernel, stride, x type), reaching
    # the NHWC indirect tile (3x3), the GEMM path (1x1) and the depthwise kernel.
    c, m, group, kernel, stride, x_type = {
        "conv3x3s2_24to48": (24, 48, 1, 3, 2, u8), "conv1x1_40to24": (40, 24, 1, 1, 1, u8),
        "dwconv3x3_32": (32, 32, 32, 3, 1, u8), "conv3x3_s8_13to20": (13, 20, 1, 3, 1, s8),
    }[case]
    return _qlinear_conv(c, m, group, kernel, stride, x_type), _random_8bit(rng, (1, c, 19, 23),
                                                                          x_type)


@pytest.mark.parametrize("case", [
    "qdq_s8_k64", "qdq_u8_k63", "qlinearmatmul_k5", "conv3x3s2_24to48", "conv1x1_40to24",
    "dwconv3x3_32", "conv3x3_s8_13to20", "quantize_linear", "concat", "softmax"])
def test_feeds_ending_at_an_unreadable_page(case):
    """Inputs read only by kernels that read no byte past a tensor's end (the integer
    GEMM and convolution, QuantizeLinear of float32, Concat; ops/registry.h
    ReadsOnlyInputBytes) are read in place whatever follows them: here an inaccessible
    page, so a read past the end would kill the process. Other inputs (Softmax) are copied first. Results
    equal octet's on an ordinary array and ONNX Runtime's (which runs the int8 QDQ group
    in float: within 1 LSB there)."""
    model, x = _bounded_reader_case(case, np.random.default_rng(5))
    session = octet.InferenceSession(model.SerializeToString())
    name = session.get_inputs()[0].name
    assert session._session.inputs_read_in_place() == ([] if case == "softmax" else [name])
    guarded = _guarded(x)
    assert not _readable_in_place(guarded)  # octet's own padding check would copy it
    got = session.run(None, {name: guarded})[0]
    np.testing.assert_array_equal(got, session.run(None, {name: x.copy()})[0])
    ort_model, ort_feeds = ort_exact.for_ort(model, {name: x})  # exact u8 x s8 on any CPU
    want = ort_session(ort_model).run(None, ort_feeds)[0]
    if case == "softmax":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
    elif case == "qdq_s8_k64":
        assert np.abs(got.astype(np.int32) - want).max() <= 1
    else:
        np.testing.assert_array_equal(got, want)


def test_an_input_with_any_other_reader_is_not_read_in_place():
    """x feeds QuantizeLinear (reads only x's bytes) and Relu (may read past them): the
    session must not mark x, and a guarded x is copied first; y is the graph input
    itself, returned as an output, so it is not marked either."""
    model = make_model(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
         helper.make_node("Relu", ["x"], ["r"]),
         helper.make_node("QuantizeLinear", ["y", "s", "z"], ["qy"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None]),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
        [helper.make_tensor_value_info("q", TensorProto.INT8, None),
         helper.make_tensor_value_info("r", TensorProto.FLOAT, None),
         helper.make_tensor_value_info("qy", TensorProto.INT8, None),
         helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(np.array(0.1, np.float32), "s"),
         numpy_helper.from_array(np.array(3, np.int8), "z")])
    session = octet.InferenceSession(model.SerializeToString())
    assert session._session.inputs_read_in_place() == []
    x = np.random.default_rng(2).uniform(-15, 15, 333).astype(np.float32)
    got = session.run(None, {"x": _guarded(x), "y": _guarded(x)})
    want = ort_session(model).run(None, {"x": x, "y": x})
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)


def test_constant_nodes_run_once_and_change_no_bits():
    """A LayerNormalization whose scale and bias are DequantizeLinear of int8 constants (as
    ORT's quantizer writes them), one of them through a Mul: a session folds those nodes
    (no DequantizeLinear or Mul runs), one that keeps its intermediates runs them; both
    give the same bits, near ONNX Runtime's (its LayerNormalization sums in another
    order)."""
    rng = np.random.default_rng(7)
    x = rng.standard_normal((3, 16)).astype(np.float32)
    q = lambda name, values: numpy_helper.from_array(np.array(values, np.int8), name)
    f = lambda name, values: numpy_helper.from_array(np.array(values, np.float32), name)
    model = make_model(
        [helper.make_node("DequantizeLinear", ["gamma_q", "g_scale", "g_zero"], ["gamma"]),
         helper.make_node("DequantizeLinear", ["beta_q", "b_scale"], ["beta_half"]),
         helper.make_node("Mul", ["beta_half", "two"], ["beta"]),
         helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["y"], axis=-1)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 16])],
        [q("gamma_q", rng.integers(-128, 128, 16)), f("g_scale", 0.013), q("g_zero", 3),
         q("beta_q", rng.integers(-128, 128, 16)), f("b_scale", 0.007), f("two", 2.0)])
    runs = {}
    for keep in (False, True):
        session = octet.InferenceSession(model.SerializeToString(), keep_intermediates=keep)
        session.set_profiling(True)
        runs[keep] = session.run(["y"], {"x": x})[0]
        ops = {o["op"] for o in session.profile()["ops"]}
        assert ("ai.onnx.DequantizeLinear" in ops) == keep and ("ai.onnx.Mul" in ops) == keep
    np.testing.assert_array_equal(runs[False], runs[True])
    np.testing.assert_allclose(runs[False], ort_session(model).run(None, {"x": x})[0],
                               rtol=1e-5, atol=1e-6)
