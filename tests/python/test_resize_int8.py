"""Resize on 8-bit data against ONNX Runtime 1.31.1, bit for bit. ONNX Runtime's quantizer
leaves Resize on the uint8 tensor in QOperator models (QuantizeLinear -> Resize ->
QLinearConv; the YOLO-style detector's 2x nearest upsampling is one), and its CPU kernel
handles int8/uint8 (and int32) data. Nearest only copies elements, so octet must match
exactly; linear Resize of 8-bit data (ONNX Runtime rounds its float or fixed-point
interpolation in ways of its own) is refused with a clear error."""

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import octet

IR_VERSION = 10  # readable by onnxruntime 1.31.1

COORDS = ["asymmetric", "half_pixel", "align_corners", "pytorch_half_pixel",
          "tf_half_pixel_for_nn"]
NEAREST_MODES = ["floor", "round_prefer_floor", "round_prefer_ceil", "ceil"]
# (scales, sizes): the detector's 2x upsampling, odd and fractional up/down scales, sizes.
RESIZES = [([1, 1, 2, 2], None), ([1, 1, 0.5, 0.75], None), ([1, 1, 1.7, 2.4], None),
           ([1, 1, 3, 1], None), (None, [1, 3, 5, 3]), (None, [1, 3, 13, 17])]
DTYPES = [np.uint8, np.int8]


def model_bytes(x, attrs, opset, scales=None, sizes=None):
    inputs = ["x", "roi", "scales"] if opset >= 11 else ["x", "scales"]
    inits = [numpy_helper.from_array(np.array(scales or [], np.float32), "scales")]
    if opset >= 11:
        inits.append(numpy_helper.from_array(np.array([], np.float32), "roi"))
    if sizes is not None:
        inputs.append("sizes")
        inits.append(numpy_helper.from_array(np.array(sizes, np.int64), "sizes"))
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    graph = helper.make_graph(
        [helper.make_node("Resize", inputs, ["y"], **attrs)], "resize",
        [helper.make_tensor_value_info("x", elem, x.shape)],
        [helper.make_tensor_value_info("y", elem, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=IR_VERSION).SerializeToString()


def full_range(dtype, shape, seed=0):
    info = np.iinfo(dtype)
    return np.random.default_rng(seed).integers(info.min, info.max, shape, endpoint=True,
                                                dtype=dtype)


def assert_same_as_ort(data, x):
    expected = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})
    actual = octet.InferenceSession(data).run(None, {"x": x})
    assert actual[0].dtype == expected[0].dtype
    assert actual[0].shape == expected[0].shape
    np.testing.assert_array_equal(actual[0], expected[0])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("scales,sizes", RESIZES)
@pytest.mark.parametrize("nearest_mode", NEAREST_MODES)
@pytest.mark.parametrize("coord", COORDS)
def test_nearest_matches_ort(coord, nearest_mode, scales, sizes, dtype):
    x = full_range(dtype, (1, 3, 6, 7))
    attrs = {"mode": "nearest", "coordinate_transformation_mode": coord,
             "nearest_mode": nearest_mode}
    assert_same_as_ort(model_bytes(x, attrs, 13, scales, sizes), x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_detector_upsample_shape(dtype):
    """The detector's node: asymmetric + floor, 2x on H and W of a [1, C, 13, 13] map, with a
    channel count large enough that octet splits the copy over threads."""
    x = full_range(dtype, (1, 192, 13, 13), seed=1)
    attrs = {"mode": "nearest", "coordinate_transformation_mode": "asymmetric",
             "nearest_mode": "floor"}
    assert_same_as_ort(model_bytes(x, attrs, 13, [1, 1, 2, 2]), x)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("opset", [10, 11, 18, 19])
def test_nearest_other_opsets(opset, dtype):
    """Opset 10 (scales only, asymmetric / simple rounding), 11 (defaults), 18 (axes) and
    19 (half_pixel_symmetric)."""
    x = full_range(dtype, (2, 3, 5, 4), seed=2)
    if opset == 10:
        for scales in ([1, 1, 2, 3], [1, 1, 0.5, 0.5], [1, 2, 1.5, 2.5]):
            assert_same_as_ort(model_bytes(x, {"mode": "nearest"}, 10, scales), x)
    elif opset == 18:
        assert_same_as_ort(model_bytes(x, {"mode": "nearest", "axes": [2, 3]}, 18, [2.5, 0.5]), x)
    elif opset == 19:
        attrs = {"mode": "nearest", "coordinate_transformation_mode": "half_pixel_symmetric"}
        assert_same_as_ort(model_bytes(x, attrs, 19, [1, 1, 1.5, 0.6]), x)
    else:
        assert_same_as_ort(model_bytes(x, {"mode": "nearest"}, 11, [1, 1, 2, 2]), x)


@pytest.mark.parametrize("dtype", DTYPES)
def test_linear_is_refused_clearly(dtype):
    x = full_range(dtype, (1, 1, 4, 4))
    data = model_bytes(x, {"mode": "linear"}, 13, [1, 1, 2, 2])
    ort.InferenceSession(data, providers=["CPUExecutionProvider"])  # ORT takes it
    with pytest.raises(octet.OctetError, match=r"linear Resize of u?int8 data is not supported"):
        octet.InferenceSession(data)
