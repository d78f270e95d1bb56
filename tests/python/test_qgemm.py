"""com.microsoft QGemm (src/ops/qgemm.cc) against ONNX Runtime 1.31.1, bit for bit.

Single-node models built with onnx.helper, run by ONNX Runtime (CPU EP, ORT_DISABLE_ALL and
ORT_ENABLE_ALL) and by octet on 1 and 2 threads: the type pairs ORT's CPU kernels have
(u8 x u8 -> u8, u8 x s8 -> u8, s8 x s8 -> s8, each also with a float output), per-tensor and
per-column b_scale / b_zero_point, every C layout, transA / transB, alpha != 1, odd M/N/K with
K = 1 and M = 1, B as an initializer (prepacked by both) and as a graph input. Random scales
rarely tell float orders apart, so test_multiplier_order walks b_scale over the ulps around
rounding ties (as tools/probe_ort_requant.py does for QLinearMatMul). Finally a Gemm model
quantized by onnxruntime.quantization.quantize_static in QOperator form, and the refusal of a
y_zero_point without y_scale.
"""

import zlib

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType,
                                      quantize_static)

import octet
import ort_exact

F32 = np.float32
LEVELS = (ort.GraphOptimizationLevel.ORT_DISABLE_ALL, ort.GraphOptimizationLevel.ORT_ENABLE_ALL)
TYPE_PAIRS = {"u8u8": (np.uint8, np.uint8), "u8s8": (np.uint8, np.int8),
              "s8s8": (np.int8, np.int8)}
C_KINDS = ("none", "scalar", "column", "row_vector", "row", "full")
SHAPES = [(1, 1, 1), (3, 1, 5), (1, 7, 9), (5, 17, 3), (13, 33, 19), (37, 65, 29)]


def qgemm_model(a_info, inits, names, out_type, **attrs):
    node = helper.make_node("QGemm", names, ["y"], domain="com.microsoft", **attrs)
    graph = helper.make_graph([node], "qgemm", a_info,
                              [helper.make_tensor_value_info("y", out_type, None)],
                              [numpy_helper.from_array(np.asarray(v), k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("com.microsoft", 1)],
                             ir_version=10).SerializeToString()


def build(a, a_scale, a_zp, b, b_scale, b_zp, c=None, y_scale=None, y_zp=None, b_input=False,
          **attrs):
    """The model and its feeds: a (and b when b_input) are graph inputs, the rest initializers."""
    values = {"a_scale": a_scale, "a_zp": a_zp, "b": b, "b_scale": b_scale, "b_zp": b_zp,
              "c": c, "y_scale": y_scale, "y_zp": y_zp}
    names = ["a", "a_scale", "a_zp", "b", "b_scale", "b_zp", "c", "y_scale", "y_zp"]
    names = [n if n == "a" or values[n] is not None else "" for n in names]
    while names[-1] == "":
        names.pop()
    feeds = {"a": a}
    if b_input:
        feeds["b"] = values.pop("b")
    inits = {k: v for k, v in values.items() if v is not None}
    infos = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
             for k, v in feeds.items()]
    out_type = (helper.np_dtype_to_tensor_dtype(np.asarray(y_zp).dtype) if y_zp is not None
                else TensorProto.FLOAT)
    return qgemm_model(infos, inits, names, out_type, **attrs), feeds


def run_ort(model, feeds, level):
    """ORT's output; its exact u8 x u8 form where its u8 x s8 kernel saturates (no VNNI)."""
    model, feeds = ort_exact.for_ort(model, feeds)
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"]).run(
        None, feeds)[0]


def assert_bit_equal(ours, ref):
    assert ours.dtype == ref.dtype and ours.shape == ref.shape
    if ref.dtype == F32:
        ours, ref = ours.view(np.uint32), ref.view(np.uint32)
    mismatches = np.argwhere(ours != ref)
    assert mismatches.size == 0, (f"{len(mismatches)} of {ref.size} differ; first at "
                                  f"{mismatches[0].tolist()}: octet {ours[tuple(mismatches[0])]} "
                                  f"ORT {ref[tuple(mismatches[0])]}")


def check(model, feeds):
    ref = run_ort(model, feeds, LEVELS[0])
    assert_bit_equal(run_ort(model, feeds, LEVELS[1]), ref)  # the oracle agrees with itself
    for threads in (1, 2):
        assert_bit_equal(octet.InferenceSession(model, threads=threads).run(None, feeds)[0], ref)


def random_q(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, shape).astype(dtype)


def bias_for(rng, kind, m, n):
    shape = {"scalar": (), "column": (n,), "row_vector": (1, n), "row": (m, 1),
             "full": (m, n)}[kind]
    c = rng.integers(-5000, 5000, shape).astype(np.int32)
    if c.size > 1:
        c.flat[0] = np.iinfo(np.int32).max  # acc + C wraps in int32 (when acc > 0)
    return c


@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "M%dK%dN%d" % s)
@pytest.mark.parametrize("output", ["float", "quantized", "float_y_scale"])
@pytest.mark.parametrize("types", TYPE_PAIRS, ids=str)
def test_qgemm_matches_onnxruntime(types, output, shape):
    ta, tb = TYPE_PAIRS[types]
    m, k, n = shape
    rng = np.random.default_rng(zlib.crc32(f"{types} {output} {shape}".encode()))
    variant = 0
    for c_kind in C_KINDS:
        for trans_a in (0, 1):
            for trans_b in (0, 1):
                variant += 1
                per_column = variant % 3 != 0
                alpha = float(rng.uniform(0.2, 3.0)) if variant % 2 else 1.0
                a = random_q(rng, ta, (k, m) if trans_a else (m, k))
                b = random_q(rng, tb, (n, k) if trans_b else (k, n))
                params = n if per_column else 1
                b_scale = rng.uniform(0.001, 0.05, params).astype(F32)
                b_zp = random_q(rng, tb, params)
                if not per_column:
                    b_scale, b_zp = b_scale.reshape(()), b_zp.reshape(())
                a_scale = F32(rng.uniform(0.001, 0.05))
                y_scale = F32(alpha * a_scale * 0.03 * 40 * np.sqrt(k)) if output != "float" \
                    else None
                y_zp = random_q(rng, ta, ()) if output == "quantized" else None
                c = None if c_kind == "none" else bias_for(rng, c_kind, m, n)
                model, feeds = build(a, a_scale, random_q(rng, ta, ()), b, b_scale, b_zp, c,
                                     y_scale, y_zp, b_input=variant % 4 == 1, alpha=alpha,
                                     transA=trans_a, transB=trans_b)
                check(model, feeds)


@pytest.mark.parametrize("types", TYPE_PAIRS, ids=str)
def test_large_product_runs_split_over_threads(types):
    """Large enough for octet to split the product and the epilogue over 2 threads."""
    ta, tb = TYPE_PAIRS[types]
    rng = np.random.default_rng(9)
    m, k, n = 130, 300, 260
    for output in ("float", "quantized"):
        model, feeds = build(random_q(rng, ta, (k, m)), F32(0.02), random_q(rng, ta, ()),
                             random_q(rng, tb, (n, k)), rng.uniform(0.001, 0.01, n).astype(F32),
                             random_q(rng, tb, n), bias_for(rng, "full", m, n),
                             F32(2.5) if output == "quantized" else None,
                             random_q(rng, ta, ()) if output == "quantized" else None,
                             alpha=0.7, transA=1, transB=1)
        check(model, feeds)


@pytest.mark.parametrize("output", ["float", "quantized"])
def test_multiplier_order(output):
    """ORT multiplies in float32 as (alpha * a_scale) * b_scale[n], then divides by y_scale.
    b_scale walks 128 ulps around t * y_scale / (alpha * a_scale) (t = 0.5, 0.75, 1.5), so the
    quantized products land next to .5 ties; K = 1 and B = 1 make acc = a - 128 exact. Other
    orders ((alpha * (a * b)) / y, alpha * ((a * b) / y), alpha applied after the epilogue)
    each miss hundreds of these outputs (and about a third of the float ones)."""
    rng = np.random.default_rng(1)
    a = np.arange(256, dtype=np.uint8).reshape(-1, 1)
    for trial in range(6):
        target = F32([0.5, 0.75, 1.5][trial % 3])
        alpha = F32(rng.uniform(0.3, 3.0))
        a_scale = F32(rng.uniform(0.001, 0.1))
        y_scale = F32(rng.uniform(0.001, 0.1))
        base = F32(target * y_scale / a_scale / alpha)
        b_scale = (base.view(np.int32) + np.arange(-64, 64)).astype(np.int32).view(F32)
        quantized = output == "quantized"
        model, feeds = build(a, a_scale, np.uint8(128), np.ones((1, 128), np.int8), b_scale,
                             np.zeros(128, np.int8), None, y_scale if quantized else None,
                             np.uint8(128) if quantized else None, alpha=float(alpha))
        check(model, feeds)


class _Reader(CalibrationDataReader):
    def __init__(self, batches):
        self._batches = iter(batches)

    def get_next(self):
        return next(self._batches, None)


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_quantize_static_qoperator_gemm(per_channel, tmp_path):
    """A float Gemm quantized by quantize_static (QOperator, u8 activations, s8 weights):
    QuantizeLinear -> QGemm (transB=1, int32 C) -> DequantizeLinear, equal to ORT."""
    rng = np.random.default_rng(4)
    k, n = 48, 24
    inits = [numpy_helper.from_array(rng.standard_normal((n, k)).astype(F32) * 0.2, "w"),
             numpy_helper.from_array(rng.standard_normal(n).astype(F32), "bias")]
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["x", "w", "bias"], ["y"], transB=1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [5, n])], inits)
    float_path, q_path = tmp_path / "float.onnx", tmp_path / "qop.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)],
                                ir_version=10), float_path)
    calibration = [{"x": rng.standard_normal((5, k)).astype(F32)} for _ in range(4)]
    quantize_static(str(float_path), str(q_path), _Reader(calibration),
                    quant_format=QuantFormat.QOperator, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, per_channel=per_channel)
    model = q_path.read_bytes()
    assert [node.op_type for node in onnx.load_from_string(model).graph.node].count("QGemm") == 1
    check(model, {"x": (rng.standard_normal((5, k)) * 1.5).astype(F32)})


def test_y_zero_point_without_y_scale_is_refused():
    """ORT writes its int32 product into the 8-bit output buffer here; octet refuses at load."""
    model, _ = build(np.zeros((2, 3), np.uint8), F32(0.1), np.uint8(0), np.zeros((3, 2), np.int8),
                     F32(0.1), np.int8(0), y_zp=np.uint8(3))
    with pytest.raises(octet.OctetError, match="y_zero_point is given without y_scale"):
        octet.InferenceSession(model)
