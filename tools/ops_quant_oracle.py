"""Operator oracle: octet against ONNX Runtime 1.31.1, bit for bit.

Generates deterministic (seeded) single-node or tiny ONNX models with inputs for every
quantization operator of issue 2, runs each through ONNX Runtime's CPU EP at
ORT_ENABLE_ALL and ORT_DISABLE_ALL and through octet, and requires octet's outputs to
equal both, bit for bit. Where ONNX Runtime is itself not exact, the case carries a
`deviation` (the arithmetic reason and the exact number of LSBs allowed); where ONNX
Runtime departs from the ONNX spec, a `spec_deviation` names the elements (by the value of
x / scale) that are compared with onnx.reference.ReferenceEvaluator instead; there is no
blanket tolerance. Where octet refuses a case by design, `octet_refuses` holds the error
message it must give (tallied as "refused (by design)", not as passed).

Models, inputs and ONNX Runtime's outputs are cached in build/oracle_cache/<key>.pkl,
key = sha256(generator version, onnxruntime version, case spec); a re-run only runs
octet. Each cache entry records the machine (CPU model and ISA flags, from cpuid) ORT ran
on and the form of the model it ran: ORT's u8 x s8 kernels saturate on x86 without VNNI,
so on such a machine the u8 x s8 cases (flagged `vnni_exact_only`) are given to ORT in
their exact u8 x u8 form (tools/ort_exact.py: int8 weight + 128 as uint8, zero point +
128) while octet runs the case as generated.

    .venv/bin/python tools/ops_quant_oracle.py [--filter SUBSTR] [--list] [--threads N]
"""

from __future__ import annotations

import argparse
import ctypes
import dataclasses
import hashlib
import json
import math
import os
import pickle
import sys
from collections import Counter, defaultdict
from pathlib import Path

import ml_dtypes
import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
import ort_exact  # noqa: E402

GENERATOR_VERSION = "2"
REPO_ROOT = Path(__file__).resolve().parents[1]
CACHE_DIR = Path(os.environ.get("OCTET_ORACLE_CACHE", REPO_ROOT / "build" / "oracle_cache"))
LEVELS = ("ENABLE_ALL", "DISABLE_ALL")

# ---------------------------------------------------------------------------------------
# Element types


@dataclasses.dataclass(frozen=True)
class ElemType:
    name: str
    onnx: int
    numpy: np.dtype
    qmin: int | None = None  # integer types only
    qmax: int | None = None

    @property
    def is_int(self) -> bool:
        return self.qmin is not None

    @property
    def is_4bit(self) -> bool:
        return self.name in ("int4", "uint4")

    @property
    def is_float8(self) -> bool:
        return self.name.startswith("float8")


def _elem(name, onnx_type, numpy_type, qmin=None, qmax=None):
    return ElemType(name, onnx_type, np.dtype(numpy_type), qmin, qmax)


TYPES = {t.name: t for t in [
    _elem("float32", TensorProto.FLOAT, np.float32),
    _elem("float16", TensorProto.FLOAT16, np.float16),
    _elem("bfloat16", TensorProto.BFLOAT16, ml_dtypes.bfloat16),
    _elem("int8", TensorProto.INT8, np.int8, -128, 127),
    _elem("uint8", TensorProto.UINT8, np.uint8, 0, 255),
    _elem("int16", TensorProto.INT16, np.int16, -32768, 32767),
    _elem("uint16", TensorProto.UINT16, np.uint16, 0, 65535),
    _elem("int32", TensorProto.INT32, np.int32, -2**31, 2**31 - 1),
    _elem("int4", TensorProto.INT4, ml_dtypes.int4, -8, 7),
    _elem("uint4", TensorProto.UINT4, ml_dtypes.uint4, 0, 15),
    _elem("float8e4m3fn", TensorProto.FLOAT8E4M3FN, ml_dtypes.float8_e4m3fn),
    _elem("float8e4m3fnuz", TensorProto.FLOAT8E4M3FNUZ, ml_dtypes.float8_e4m3fnuz),
    _elem("float8e5m2", TensorProto.FLOAT8E5M2, ml_dtypes.float8_e5m2),
    _elem("float8e5m2fnuz", TensorProto.FLOAT8E5M2FNUZ, ml_dtypes.float8_e5m2fnuz),
]}
TYPE_BY_ONNX = {t.onnx: t for t in TYPES.values()}
TYPE_BY_NUMPY = {t.numpy: t for t in TYPES.values()}


def raw_bytes(array: np.ndarray) -> bytes:
    """ONNX raw_data layout: little-endian, 4-bit types packed two per byte, low first."""
    elem = TYPE_BY_NUMPY[array.dtype]
    if not elem.is_4bit:
        return np.ascontiguousarray(array).tobytes()
    nibbles = array.astype(np.int8).reshape(-1).view(np.uint8) & 0x0F
    if nibbles.size % 2:
        nibbles = np.append(nibbles, np.uint8(0))
    return (nibbles[0::2] | (nibbles[1::2] << 4)).astype(np.uint8).tobytes()


def from_raw_bytes(data: bytes, elem: ElemType, shape) -> np.ndarray:
    count = math.prod(shape)
    if not elem.is_4bit:
        return np.frombuffer(data, dtype=elem.numpy, count=count).reshape(shape).copy()
    packed = np.frombuffer(data, dtype=np.uint8)
    nibbles = np.stack([packed & 0x0F, packed >> 4], axis=-1).reshape(-1)[:count]
    values = nibbles.astype(np.int8)
    if elem.name == "int4":
        values = np.where(values > 7, values - 16, values).astype(np.int8)
    return values.astype(elem.numpy).reshape(shape)


def bit_pattern(array: np.ndarray) -> np.ndarray:
    """Integers that are equal exactly when the elements are bitwise equal."""
    array = np.asarray(array)
    if array.dtype.name in ("int4", "uint4"):
        return array.astype(np.int16)
    if array.dtype.kind in "iub":
        return array
    return array.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[array.dtype.itemsize])


def lsb_distance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """|a - b| in steps of the quantized type (integer outputs only)."""
    return np.abs(a.astype(np.int64) - b.astype(np.int64))


# ---------------------------------------------------------------------------------------
# Model construction


def make_model(nodes, inputs, outputs, initializers, opsets) -> bytes:
    """inputs: [(name, type, shape)]; outputs: [(name, type)]; initializers: {name: array}."""
    graph = helper.make_graph(
        nodes, "oracle",
        [helper.make_tensor_value_info(n, TYPES[t].onnx, list(s)) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, TYPES[t].onnx, None) for n, t in outputs],
        [helper.make_tensor(name, TYPE_BY_NUMPY[a.dtype].onnx, list(a.shape), raw_bytes(a),
                            raw=True) for name, a in initializers.items()])
    opset_imports = [helper.make_opsetid(domain, version) for domain, version in opsets.items()]
    model = helper.make_model(graph, opset_imports=opset_imports, producer_name="octet-oracle")
    onnx_opset = opsets.get("", 21)
    model.ir_version = helper.find_min_ir_version_for([helper.make_opsetid("", onnx_opset)])
    model.ir_version = max(model.ir_version, 10)  # int4/uint4 need IR 10
    return model.SerializeToString()


@dataclasses.dataclass
class Built:
    model: bytes
    feeds: dict[str, np.ndarray]
    outputs: list[tuple[str, str]]  # (name, element type)


def _rng(spec) -> np.random.Generator:
    return np.random.default_rng(spec["seed"])


def _cast(values: np.ndarray, type_name: str) -> np.ndarray:
    """Integers saturate; floats round (overflow to inf is intended for float16 data)."""
    elem = TYPES[type_name]
    if elem.is_int:
        return np.clip(np.asarray(values), elem.qmin, elem.qmax).astype(np.int64).astype(
            elem.numpy)
    with np.errstate(over="ignore"):
        return np.asarray(values, dtype=np.float64).astype(np.float32).astype(elem.numpy)


def _random_ints(rng, type_name, shape, low=None, high=None):
    elem = TYPES[type_name]
    low = elem.qmin if low is None else low
    high = elem.qmax if high is None else high
    return rng.integers(low, high, size=shape, endpoint=True).astype(elem.numpy)


def _zero_point(rng, kind, type_name, shape):
    """kind: omit | zero | min | max | random | mixed (random with both limits present)."""
    elem = TYPES[type_name]
    if kind == "omit":
        return None
    if elem.is_float8 or kind == "zero":
        return np.zeros(shape, elem.numpy)
    if kind == "min":
        return np.full(shape, elem.qmin).astype(elem.numpy)
    if kind == "max":
        return np.full(shape, elem.qmax).astype(elem.numpy)
    values = rng.integers(elem.qmin, elem.qmax, size=shape, endpoint=True)
    if kind == "mixed" and values.size >= 2:
        flat = values.reshape(-1)
        flat[0], flat[-1] = elem.qmin, elem.qmax
    return values.astype(elem.numpy)


def _scales(rng, kind, type_name, shape):
    """pow2: exact powers of two (divisions are exact); random: log-uniform in [1e-3, 1]."""
    if kind == "pow2":
        values = np.exp2(rng.integers(-8, 3, size=shape).astype(np.float64))
    else:
        values = np.exp(rng.uniform(math.log(1e-3), 0.0, size=shape))
    return _cast(values, type_name)


# ---- QuantizeLinear / DequantizeLinear (ai.onnx and com.microsoft) ----------------------


def _param_shape(spec):
    shape = spec["shape"]
    gran = spec["gran"]
    if gran == "tensor":
        return []
    if gran == "tensor1d":
        return [1]
    axis = spec.get("axis", 1) % len(shape)
    if gran == "axis":
        return [shape[axis]]
    result = list(shape)
    result[axis] = -(-shape[axis] // spec["block"])
    return result


def _expand_param(param: np.ndarray, spec) -> np.ndarray:
    """Broadcasts a scale / zero point to the data's shape, in float64 or int64."""
    shape = spec["shape"]
    wide = param.astype(np.float64) if param.dtype.kind == "f" or param.dtype.name in (
        "bfloat16",) else param.astype(np.int64)
    if spec["gran"] in ("tensor", "tensor1d"):
        return np.broadcast_to(wide.reshape([]), shape) if wide.size == 1 else wide
    axis = spec.get("axis", 1) % len(shape)
    if spec["gran"] == "axis":
        view = [1] * len(shape)
        view[axis] = shape[axis]
        return np.broadcast_to(wide.reshape(view), shape)
    repeated = np.repeat(wide, spec["block"], axis=axis)
    return np.take(repeated, np.arange(shape[axis]), axis=axis)


def _float8_grid(type_name):
    """Finite values of a float8 type, sorted, as float64."""
    codes = np.arange(256, dtype=np.uint8).view(TYPES[type_name].numpy).astype(np.float64)
    return np.unique(codes[np.isfinite(codes)])


def _quantize_inputs(rng, spec, scale, zero):
    """Float data whose x / scale lands where the case wants it, built in float64."""
    shape = spec["shape"]
    qtype = TYPES[spec["qtype"]]
    ftype = spec["ftype"]
    s = _expand_param(scale, spec)
    count = math.prod(shape)
    kind = spec["values"]
    if qtype.is_float8:
        grid = _float8_grid(qtype.name)
        big = grid.max()
        mids = (grid[:-1] + grid[1:]) / 2
        pool = np.concatenate([grid, mids, -mids, [big * 1.25, -big * 1.25, big * 4, -big * 4,
                                                   np.inf, -np.inf, np.nan, -0.0]])
        if kind == "specials":
            q = rng.choice(pool, size=count)
        elif kind == "overflow":
            # steps of max/64 from just below the largest finite value to 2.5x past it, each
            # with its float32 neighbours: ORT's saturate=0 handling is not monotonic there
            steps = big * (1 + np.arange(-8, 97) / 64)
            steps = np.concatenate([steps, np.nextafter(steps.astype(np.float32), np.inf),
                                    np.nextafter(steps.astype(np.float32), 0)])
            q = np.resize(np.concatenate([steps, -steps]), count)
        else:  # random: log-uniform magnitudes across the whole range and beyond
            q = np.exp2(rng.uniform(math.log2(grid[grid > 0].min()) - 2,
                                    math.log2(big) + 2, size=count))
            q *= rng.choice([-1.0, 1.0], size=count)
        x = q.reshape(shape) * s
    else:
        z = np.zeros(shape) if zero is None else _expand_param(zero, spec)
        low, high = qtype.qmin - z, qtype.qmax - z
        if kind == "ties":
            limit = 1000 if ftype == "float16" else None  # (k + 0.5) must fit fp16's mantissa
            lo = np.maximum(low - 2, -limit) if limit else low - 2
            hi = np.minimum(high + 2, limit) if limit else high + 2
            q = np.floor(lo + rng.uniform(size=shape) * (hi - lo + 1)) + 0.5
        elif kind == "saturate":
            q = rng.choice([-1.0, 1.0], size=shape) * np.exp2(rng.uniform(0, 40, size=shape))
            q += np.where(q > 0, high, low)
        else:  # random across the whole range, with a margin that saturates on both sides
            q = low - 4 + rng.uniform(size=shape) * (high - low + 8)
        x = q * s
        flat = x.reshape(-1)
        if flat.size >= 4:
            flat[:2] = [0.0, -0.0]
    if ftype == "float16":
        x = np.clip(x, -65504, 65504) if qtype.is_int else x
    elif ftype == "float32" and qtype.is_int:
        x = np.clip(x, -3e38, 3e38)
    return _cast(x, ftype)


def _dequantize_inputs(rng, spec):
    qtype = TYPES[spec["qtype"]]
    shape = spec["shape"]
    if qtype.is_float8:
        codes = rng.integers(0, 256, size=shape).astype(np.uint8)
        flat = codes.reshape(-1)
        flat[:min(256, flat.size)] = np.arange(min(256, flat.size), dtype=np.uint8)
        return codes.view(qtype.numpy)
    values = _random_ints(rng, qtype.name, shape)
    flat = values.reshape(-1)
    if flat.size >= 2:
        flat[0], flat[1] = qtype.qmin, qtype.qmax
    return values


def build_qdq(spec) -> Built:
    rng = _rng(spec)
    op, domain, opset = spec["op"], spec.get("domain", ""), spec["opset"]
    stype = spec.get("stype", spec["ftype"])
    pshape = _param_shape(spec)
    scale = _scales(rng, spec.get("scale", "random"), stype, pshape)
    zero = _zero_point(rng, spec.get("zp", "random"), spec["qtype"], pshape)
    # per-tensor parameters may be scalars or 1-element vectors, independently
    if "scale_shape" in spec:
        scale = scale.reshape(spec["scale_shape"])
    if "zp_shape" in spec and zero is not None:
        zero = zero.reshape(spec["zp_shape"])
    if op == "QuantizeLinear":
        x = _quantize_inputs(rng, spec, scale, zero)
        out_type = spec["qtype"]
    else:
        x = _dequantize_inputs(rng, spec)
        out_type = spec.get("output_dtype", stype)
    attrs = {}
    if spec["gran"] in ("axis", "block") and "axis" in spec:
        attrs["axis"] = spec["axis"]
    if spec["gran"] == "block":
        attrs["block_size"] = spec["block"]
    if spec.get("saturate") is not None:
        attrs["saturate"] = spec["saturate"]
    if spec.get("output_dtype"):
        attrs["output_dtype"] = TYPES[spec["output_dtype"]].onnx
    names = ["x", "scale"] + (["zero_point"] if zero is not None else [])
    node = helper.make_node(op, names, ["y"], domain=domain, **attrs)
    inits = {"scale": scale}
    if zero is not None:
        inits["zero_point"] = zero
    opsets = {"": opset} if not domain else {"": 21, domain: 1}
    feeds = {"x": x}
    if spec.get("x_const"):
        inits["x"] = x
        feeds = {}
    inputs = [("x", TYPE_BY_NUMPY[x.dtype].name, x.shape)] if feeds else []
    return Built(make_model([node], inputs, [("y", out_type)], inits, opsets), feeds,
                 [("y", out_type)])


# ---- DynamicQuantizeLinear ----------------------------------------------------------------


def build_dynamic_quantize(spec) -> Built:
    rng = _rng(spec)
    shape = spec["shape"]
    kind = spec["values"]
    count = math.prod(shape)
    if kind == "zeros":
        x = np.zeros(count)
    elif kind == "positive":
        x = rng.uniform(0.25, 7.0, count)
    elif kind == "negative":
        x = -rng.uniform(0.25, 7.0, count)
    elif kind in ("ties", "zp_tie"):
        # range = 255 * s exactly, so scale == s and x / scale == k + 0.5
        s = 2.0 ** int(rng.integers(-6, 2))
        a = int(rng.integers(1, 254))
        low = -(a + 0.5) * s if kind == "zp_tie" else -a * s
        k = rng.integers(-a, 254 - a, size=count)
        x = (k + 0.5) * s
        x[0], x[-1] = low, low + 255 * s
    elif kind == "wide":
        x = rng.choice([-1.0, 1.0], count) * np.exp2(rng.uniform(-20, 30, count))
    elif kind == "tiny":
        x = rng.normal(0, 1e-30, count)
    else:  # random
        x = rng.normal(float(rng.uniform(-2, 2)), float(rng.uniform(0.1, 10)), count)
    x = x.reshape(shape).astype(np.float32)
    node = helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "y_scale", "y_zero_point"])
    outputs = [("y", "uint8"), ("y_scale", "float32"), ("y_zero_point", "uint8")]
    return Built(make_model([node], [("x", "float32", shape)], outputs, {}, {"": 11}),
                 {"x": x}, outputs)


# ---- MatMulInteger / QLinearMatMul ------------------------------------------------------


def _matrix_values(rng, type_name, shape, kind):
    """full: the whole range with limits present; small: |v| <= 15 around the zero point."""
    elem = TYPES[type_name]
    if kind == "small":
        centre = 0 if elem.qmin < 0 else 128
        values = _random_ints(rng, type_name, shape, centre - 15, centre + 15)
    elif kind == "limits":
        values = rng.choice([elem.qmin, elem.qmax], size=shape).astype(elem.numpy)
    else:
        values = _random_ints(rng, type_name, shape)
    flat = values.reshape(-1)
    if kind == "full" and flat.size >= 2:
        flat[0], flat[-1] = elem.qmin, elem.qmax
    return values


def build_matmul_integer(spec) -> Built:
    rng = _rng(spec)
    a = _matrix_values(rng, spec["a_type"], spec["a_shape"], spec["values"])
    b = _matrix_values(rng, spec["b_type"], spec["b_shape"], spec["values"])
    a_zp = _zero_point(rng, spec["a_zp"], spec["a_type"], [])
    b_kind = spec["b_zp"]
    per_column = b_kind == "per_column"
    b_zp = _zero_point(rng, "mixed" if per_column else b_kind, spec["b_type"],
                       [spec["b_shape"][-1]] if per_column else [])
    inits, feeds = {}, {"A": a}
    (inits if spec.get("b_const", True) else feeds)["B"] = b
    names = ["A", "B"]
    for name, zp in (("a_zero_point", a_zp), ("b_zero_point", b_zp)):
        names.append(name if zp is not None else "")  # "" marks an omitted optional input
        if zp is not None:
            inits[name] = zp
    while names[-1] == "":
        names.pop()
    node = helper.make_node("MatMulInteger", names, ["Y"])
    inputs = [(n, TYPE_BY_NUMPY[v.dtype].name, v.shape) for n, v in feeds.items()]
    return Built(make_model([node], inputs, [("Y", "int32")], inits, {"": 10}), feeds,
                 [("Y", "int32")])


def _output_scale(a_scale, b_scale, k, spread):
    """An output scale that puts typical results across the int8 range (spread < 1
    saturates more)."""
    typical = float(np.max(a_scale.astype(np.float64))) * float(
        np.max(b_scale.astype(np.float64))) * math.sqrt(max(k, 1)) * 60.0 * 60.0
    return typical / (60.0 * spread)


def build_qlinear_matmul(spec) -> Built:
    rng = _rng(spec)
    stype = spec.get("stype", "float32")
    a = _matrix_values(rng, spec["a_type"], spec["a_shape"], spec["values"])
    b = _matrix_values(rng, spec["b_type"], spec["b_shape"], spec["values"])
    k = spec["a_shape"][-1]
    per_column = spec.get("b_per_column", False)
    b_pshape = [spec["b_shape"][-1]] if per_column else []
    a_scale = _scales(rng, spec.get("scale", "random"), stype, [])
    b_scale = _scales(rng, spec.get("scale", "random"), stype, b_pshape)
    y_scale = _cast(_output_scale(a_scale, b_scale, k, spec.get("spread", 1.0)), stype)
    if spec.get("scale") == "pow2":
        y_scale = _cast(2.0 ** round(math.log2(float(y_scale))), stype)
    a_zp = _zero_point(rng, spec["a_zp"], spec["a_type"], [])
    b_zp = _zero_point(rng, spec["b_zp"], spec["b_type"], b_pshape)
    y_zp = _zero_point(rng, spec["y_zp"], spec["y_type"], [])
    inits = {"a_scale": a_scale, "a_zero_point": a_zp, "b_scale": b_scale,
             "b_zero_point": b_zp, "y_scale": y_scale, "y_zero_point": y_zp}
    feeds = {"a": a}
    (inits if spec.get("b_const", True) else feeds)["b"] = b
    names = ["a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "y_scale",
             "y_zero_point"]
    node = helper.make_node("QLinearMatMul", names, ["y"])
    inputs = [(n, TYPE_BY_NUMPY[v.dtype].name, v.shape) for n, v in feeds.items()]
    outputs = [("y", spec["y_type"])]
    return Built(make_model([node], inputs, outputs, inits, {"": spec.get("opset", 10)}), feeds,
                 outputs)


# ---- ConvInteger / QLinearConv ------------------------------------------------------------


def _conv_attrs(spec):
    attrs = {}
    for key in ("strides", "dilations", "pads", "group", "auto_pad", "kernel_shape"):
        if key in spec:
            attrs[key] = spec[key]
    return attrs


def _conv_tensors(rng, spec):
    n, c = spec["batch"], spec["channels"]
    group = spec.get("group", 1)
    x = _matrix_values(rng, spec["x_type"], [n, c] + spec["spatial"], spec["values"])
    w = _matrix_values(rng, spec["w_type"], [spec["out_channels"], c // group] + spec["kernel"],
                       spec["values"])
    return x, w


def build_conv_integer(spec) -> Built:
    rng = _rng(spec)
    x, w = _conv_tensors(rng, spec)
    x_zp = _zero_point(rng, spec["x_zp"], spec["x_type"], [])
    w_kind = spec["w_zp"]
    w_zp = _zero_point(rng, "random" if w_kind == "per_channel" else w_kind, spec["w_type"],
                       [spec["out_channels"]] if w_kind == "per_channel" else [])
    inits, feeds = {}, {"x": x}
    (inits if spec.get("w_const", True) else feeds)["w"] = w
    names = ["x", "w"]
    for name, zp in (("x_zero_point", x_zp), ("w_zero_point", w_zp)):
        names.append(name if zp is not None else "")
        if zp is not None:
            inits[name] = zp
    while names[-1] == "":
        names.pop()
    node = helper.make_node("ConvInteger", names, ["y"], **_conv_attrs(spec))
    inputs = [(n, TYPE_BY_NUMPY[v.dtype].name, v.shape) for n, v in feeds.items()]
    return Built(make_model([node], inputs, [("y", "int32")], inits, {"": 10}), feeds,
                 [("y", "int32")])


def build_qlinear_conv(spec) -> Built:
    rng = _rng(spec)
    x, w = _conv_tensors(rng, spec)
    m = spec["out_channels"]
    per_channel = spec.get("per_channel", False)
    w_pshape = [m] if per_channel else []
    x_scale = _scales(rng, spec.get("scale", "random"), "float32", [])
    w_scale = _scales(rng, spec.get("scale", "random"), "float32", w_pshape)
    k = int(np.prod(w.shape[1:]))
    y_scale = _cast(_output_scale(x_scale, w_scale, k, spec.get("spread", 1.0)), "float32")
    x_zp = _zero_point(rng, spec["x_zp"], spec["x_type"], [])
    w_zp = _zero_point(rng, spec["w_zp"], spec["w_type"], w_pshape)
    y_zp = _zero_point(rng, spec["y_zp"], spec["y_type"], [])
    inits = {"x_scale": x_scale, "x_zero_point": x_zp, "w_scale": w_scale,
             "w_zero_point": w_zp, "y_scale": y_scale, "y_zero_point": y_zp}
    feeds = {"x": x}
    (inits if spec.get("w_const", True) else feeds)["w"] = w
    names = ["x", "x_scale", "x_zero_point", "w", "w_scale", "w_zero_point", "y_scale",
             "y_zero_point"]
    if spec.get("bias"):
        bound = 2 ** 20 if spec["bias"] == "large" else 2 ** 12
        inits["B"] = rng.integers(-bound, bound, size=[m]).astype(np.int32)
        names.append("B")
    node = helper.make_node("QLinearConv", names, ["y"], **_conv_attrs(spec))
    inputs = [(n, TYPE_BY_NUMPY[v.dtype].name, v.shape) for n, v in feeds.items()]
    outputs = [("y", spec["y_type"])]
    return Built(make_model([node], inputs, outputs, inits, {"": 10}), feeds, outputs)


# ---- tiny chains ---------------------------------------------------------------------------


def build_chain(spec) -> Built:
    """q_dq: float -> Q -> DQ -> float (fake quantization); dq_q: int -> DQ -> Q (requantize)."""
    rng = _rng(spec)
    shape = spec["shape"]
    qtype = spec["qtype"]
    s1, s2 = _scales(rng, "random", "float32", []), _scales(rng, "random", "float32", [])
    z1 = _zero_point(rng, "random", qtype, [])
    z2 = _zero_point(rng, "random", spec.get("qtype2", qtype), [])
    inits = {"s1": s1, "z1": z1, "s2": s2, "z2": z2}
    if spec["kind"] == "q_dq":
        x = _cast(rng.normal(0, 1, shape) * float(s1) * 60, "float32")
        nodes = [helper.make_node("QuantizeLinear", ["x", "s1", "z1"], ["q"]),
                 helper.make_node("DequantizeLinear", ["q", "s1", "z1"], ["y"])]
        outputs = [("y", "float32")]
    else:
        x = _random_ints(rng, qtype, shape)
        nodes = [helper.make_node("DequantizeLinear", ["x", "s1", "z1"], ["f"]),
                 helper.make_node("QuantizeLinear", ["f", "s2", "z2"], ["y"])]
        outputs = [("y", spec.get("qtype2", qtype))]
    inputs = [("x", TYPE_BY_NUMPY[x.dtype].name, x.shape)]
    return Built(make_model(nodes, inputs, outputs, inits, {"": spec.get("opset", 21)}),
                 {"x": x}, outputs)


def build_qdq_matmul(spec) -> Built:
    """DQ(a) x DQ(b, constant) -> MatMul -> Q: the QDQ form of QLinearMatMul."""
    rng = _rng(spec)
    a_type, b_type = spec["a_type"], spec["b_type"]
    a = _matrix_values(rng, a_type, spec["a_shape"], "full")
    b = _matrix_values(rng, b_type, spec["b_shape"], "full")
    n = spec["b_shape"][-1]
    per_column = spec.get("b_per_column", False)
    a_scale = _scales(rng, spec.get("scale", "random"), "float32", [])
    b_scale = _scales(rng, spec.get("scale", "random"), "float32", [n] if per_column else [])
    y_scale = _cast(_output_scale(a_scale, b_scale, spec["a_shape"][-1], 1.0), "float32")
    if spec.get("scale") == "pow2":
        y_scale = _cast(2.0 ** round(math.log2(float(y_scale))), "float32")
    inits = {"b": b, "a_scale": a_scale, "a_zp": _zero_point(rng, "random", a_type, []),
             "b_scale": b_scale, "b_zp": _zero_point(rng, "zero", b_type, [n] if per_column
                                                     else []),
             "y_scale": y_scale, "y_zp": _zero_point(rng, "random", a_type, [])}
    nodes = [helper.make_node("DequantizeLinear", ["a", "a_scale", "a_zp"], ["a_f"]),
             helper.make_node("DequantizeLinear", ["b", "b_scale", "b_zp"], ["b_f"],
                              axis=1),
             helper.make_node("MatMul", ["a_f", "b_f"], ["y_f"]),
             helper.make_node("QuantizeLinear", ["y_f", "y_scale", "y_zp"], ["y"])]
    outputs = [("y", a_type)]
    return Built(make_model(nodes, [("a", a_type, a.shape)], outputs, inits, {"": 21}),
                 {"a": a}, outputs)


BUILDERS = {
    "qdq": build_qdq,
    "dynamic_quantize": build_dynamic_quantize,
    "matmul_integer": build_matmul_integer,
    "qlinear_matmul": build_qlinear_matmul,
    "conv_integer": build_conv_integer,
    "qlinear_conv": build_qlinear_conv,
    "chain": build_chain,
    "qdq_matmul": build_qdq_matmul,
}

# ---------------------------------------------------------------------------------------
# Cases


@dataclasses.dataclass
class Case:
    case_id: str
    op: str  # the row of the per-op tally
    spec: dict
    # Where ONNX Runtime itself is not exact: {"reason": why, "max_lsb": n, "levels": [...]}.
    deviation: dict | None = None
    # u8 x s8 products: ORT's u8 x s8 kernel is exact only where it uses VNNI (no int16
    # saturation); elsewhere ORT runs the case's u8 x u8 form (ort_exact.to_u8_form).
    vnni_exact_only: bool = False
    # Where ORT's output is not a result at all (a defect), why; octet is then compared with
    # an independent exact reference (expected_without_ort) instead.
    ort_defect: str | None = None
    # Where ORT departs from the ONNX spec on some elements: {"reason": why, "quotient_range":
    # [low, high)}. Elements whose |x / scale| (float32) lies in that range are compared with
    # onnx.reference.ReferenceEvaluator, every other element with ORT.
    spec_deviation: dict | None = None
    # A designed refusal: octet must raise octet.OctetError containing this message.
    octet_refuses: str | None = None

    def key(self) -> str:
        import onnxruntime

        blob = json.dumps({"generator": GENERATOR_VERSION, "ort": onnxruntime.__version__,
                           "spec": self.spec}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()[:24]


def _shape_tag(shape):
    return "x".join(str(d) for d in shape) or "scalar"


def qdq_cases():
    cases = []

    def add(op_label, spec, tag):
        spec = dict(spec, builder="qdq")
        cases.append(Case(f"{op_label}/{tag}", op_label, spec))

    int_types = ["int8", "uint8", "int16", "uint16", "int4", "uint4"]
    for op in ("QuantizeLinear", "DequantizeLinear"):
        short = "q" if op == "QuantizeLinear" else "dq"
        # per-tensor, every integer type, float32 and float16, zero points at the limits
        for qtype in int_types:
            for ftype in ("float32", "float16"):
                for zp in ("min", "max", "random", "omit"):
                    if zp == "omit" and qtype != "uint8" and op == "QuantizeLinear":
                        continue  # without a zero point (and output_dtype) the output is uint8
                    for values in (("random", "ties") if op == "QuantizeLinear" else
                                   ("random",)):
                        scale = "pow2" if values == "ties" else "random"
                        spec = dict(op=op, opset=21, shape=[3, 5, 7], qtype=qtype, ftype=ftype,
                                    gran="tensor", zp=zp, values=values, scale=scale)
                        add(op, spec, f"{short}21_{ftype}_{qtype}_tensor_zp{zp}_{values}")
            # a scalar scale with a 1-element zero point and the other way round (ONNX's
            # own backend tests use the first form)
            for scale_shape, zp_shape in (([], [1]), ([1], [])):
                spec = dict(op=op, opset=21, shape=[2, 7], qtype=qtype, ftype="float32",
                            gran="tensor", zp="random", values="random",
                            scale_shape=scale_shape, zp_shape=zp_shape)
                add(op, spec, f"{short}21_float32_{qtype}_scale{_shape_tag(scale_shape)}_"
                              f"zp{_shape_tag(zp_shape)}")
            # output_dtype instead of a zero point
            if op == "QuantizeLinear":
                spec = dict(op=op, opset=21, shape=[4, 9], qtype=qtype, ftype="float32",
                            gran="tensor", zp="omit", values="random", output_dtype=qtype)
                add(op, spec, f"{short}21_float32_{qtype}_output_dtype")
            # per-axis on every axis of a rank-3 tensor, negative axes too
            for axis in (0, 1, 2, -1, -2, -3):
                values = "ties" if op == "QuantizeLinear" and axis % 2 else "random"
                spec = dict(op=op, opset=21, shape=[4, 3, 6], qtype=qtype, ftype="float32",
                            gran="axis", axis=axis, zp="mixed", values=values,
                            scale="pow2" if values == "ties" else "random")
                add(op, spec, f"{short}21_float32_{qtype}_axis{axis}_{values}")
            # blocked along different axes, block sizes that do and do not divide the dim
            for axis, block, shape in ((0, 2, [6, 5]), (1, 4, [3, 16]), (1, 3, [3, 8]),
                                       (-1, 32, [2, 70]), (-2, 2, [2, 5, 3])):
                for ftype in ("float32", "float16"):
                    # blocked DQ is mostly weights: half of them constant initializers
                    spec = dict(op=op, opset=21, shape=shape, qtype=qtype, ftype=ftype,
                                gran="block", axis=axis, block=block, zp="mixed",
                                values="random",
                                x_const=op == "DequantizeLinear" and ftype == "float16")
                    add(op, spec, f"{short}21_{ftype}_{qtype}_block{block}_axis{axis}_"
                                  f"{_shape_tag(shape)}")
            # saturation on purpose
            if op == "QuantizeLinear":
                spec = dict(op=op, opset=21, shape=[64], qtype=qtype, ftype="float32",
                            gran="tensor", zp="random", values="saturate")
                add(op, spec, f"{short}21_float32_{qtype}_saturate")
            # empty tensors, per-tensor and per-axis
            for gran, shape in (("tensor", [0, 3]), ("axis", [0, 3])):
                spec = dict(op=op, opset=21, shape=shape, qtype=qtype, ftype="float32",
                            gran=gran, axis=1, zp="random", values="random")
                add(op, spec, f"{short}21_float32_{qtype}_{gran}_empty")
        # older opsets: 10 (per-tensor only), 13 (axis), 19 (float16)
        for opset, qtype in ((10, "int8"), (10, "uint8"), (13, "int8"), (13, "uint8")):
            spec = dict(op=op, opset=opset, shape=[2, 3, 4], qtype=qtype, ftype="float32",
                        gran="tensor", zp="random", values="random")
            add(op, spec, f"{short}{opset}_float32_{qtype}_tensor")
            if opset == 13:
                spec = dict(spec, gran="axis", axis=-2, zp="mixed")
                add(op, spec, f"{short}{opset}_float32_{qtype}_axis-2")
                spec = dict(spec, gran="axis", zp="mixed", shape=[5, 4])
                spec.pop("axis")
                add(op, spec, f"{short}{opset}_float32_{qtype}_axis_default")
        for qtype in ("int8", "uint8"):
            spec = dict(op=op, opset=19, shape=[3, 8], qtype=qtype, ftype="float16",
                        gran="axis", axis=0, zp="mixed", values="random")
            add(op, spec, f"{short}19_float16_{qtype}_axis0")
            spec = dict(spec, gran="tensor1d")
            add(op, spec, f"{short}19_float16_{qtype}_tensor1d")
        # newer opsets
        for opset in (23, 25):
            for qtype in ("int8", "uint8", "int4", "int16"):
                spec = dict(op=op, opset=opset, shape=[4, 6], qtype=qtype, ftype="float32",
                            gran="axis", axis=1, zp="mixed", values="random")
                add(op, spec, f"{short}{opset}_float32_{qtype}_axis1")
        # opset 23: DequantizeLinear's output_dtype, also differing from the scale's type
        if op == "DequantizeLinear":
            for qtype in ("int8", "uint16", "int4"):
                for stype, out in (("float32", "float32"), ("float16", "float16"),
                                   ("float32", "float16"), ("float16", "float32")):
                    spec = dict(op=op, opset=23, shape=[4, 6], qtype=qtype, ftype=stype,
                                gran="axis", axis=1, zp="mixed", values="random",
                                output_dtype=out)
                    add(op, spec, f"{short}23_{qtype}_scale_{stype}_output_dtype_{out}")
        # float8
        for qtype in ("float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz"):
            for opset in (19, 21):
                for saturate in ((0, 1) if op == "QuantizeLinear" else (None,)):
                    for ftype in ("float32", "float16"):
                        for values, zp in (("specials", "zero"), ("random", "omit")):
                            spec = dict(op=op, opset=opset, shape=[16, 24], qtype=qtype,
                                        ftype=ftype, gran="tensor", zp=zp, values=values,
                                        scale="pow2", saturate=saturate)
                            if zp == "omit" and op == "QuantizeLinear":
                                if opset < 21:
                                    continue
                                spec["output_dtype"] = qtype
                            sat = "" if saturate is None else f"_sat{saturate}"
                            add(op, spec, f"{short}{opset}_{ftype}_{qtype}{sat}_{values}")
            spec = dict(op=op, opset=21, shape=[8, 32], qtype=qtype, ftype="float32",
                        gran="axis", axis=-1, zp="zero", values="random", scale="random")
            add(op, spec, f"{short}21_float32_{qtype}_axis-1")
            if op == "QuantizeLinear":
                for saturate in (0, 1):
                    for ftype in ("float32", "float16"):
                        spec = dict(op=op, opset=21, shape=[630], qtype=qtype, ftype=ftype,
                                    gran="tensor", zp="zero", values="overflow", scale="pow2",
                                    saturate=saturate)
                        add(op, spec, f"{short}21_{ftype}_{qtype}_sat{saturate}_overflow_sweep")
    # DequantizeLinear of int32 (no zero point or a zero one)
    for zp in ("omit", "zero"):
        for gran in ("tensor", "axis"):
            for ftype in ("float32", "float16"):
                spec = dict(op="DequantizeLinear", opset=21, shape=[6, 10], qtype="int32",
                            ftype=ftype, gran=gran, axis=0, zp=zp, values="random")
                add("DequantizeLinear", spec, f"dq21_{ftype}_int32_{gran}_zp{zp}")
    # com.microsoft QuantizeLinear / DequantizeLinear
    for op in ("QuantizeLinear", "DequantizeLinear"):
        label = f"com.microsoft.{op}"
        short = "msq" if op == "QuantizeLinear" else "msdq"
        for qtype in int_types:
            for ftype in ("float32", "float16"):
                for gran, axis in (("tensor", None), ("axis", 0), ("axis", -1)):
                    values = "ties" if op == "QuantizeLinear" and gran == "tensor" else "random"
                    spec = dict(op=op, domain="com.microsoft", opset=1, shape=[5, 6],
                                qtype=qtype, ftype=ftype, gran=gran, zp="mixed", values=values,
                                scale="pow2" if values == "ties" else "random")
                    if axis is not None:
                        spec["axis"] = axis
                    axis_tag = "" if axis is None else str(axis)
                    add(label, spec, f"{short}_{ftype}_{qtype}_{gran}{axis_tag}")
    return cases


def dynamic_quantize_cases():
    cases = []
    kinds = [("random", [1, 1]), ("random", [3, 17]), ("random", [2, 3, 64]),
             ("random", [1000]), ("zeros", [4, 4]), ("positive", [3, 9]),
             ("negative", [3, 9]), ("ties", [2, 50]), ("ties", [300]), ("zp_tie", [2, 40]),
             ("zp_tie", [128]), ("wide", [500]), ("tiny", [64]), ("positive", [1]),
             ("negative", [1]), ("zeros", [1]), ("random", [0]), ("random", [0, 4])]
    for index, (kind, shape) in enumerate(kinds):
        for repeat in range(2 if kind in ("random", "ties", "zp_tie") else 1):
            spec = dict(builder="dynamic_quantize", shape=shape, values=kind,
                        seed=5000 + index * 10 + repeat)
            cases.append(Case(f"DynamicQuantizeLinear/{kind}_{_shape_tag(shape)}_{repeat}",
                              "DynamicQuantizeLinear", spec))
    return cases


MATMUL_SHAPES = [
    ([4, 8], [8, 5]), ([1, 1], [1, 1]), ([7, 1], [1, 9]), ([5, 13], [13, 3]),
    ([33, 65], [65, 17]), ([1, 300], [300, 64]), ([3, 2, 9], [9, 11]),
    ([2, 1, 4, 6], [3, 6, 5]), ([4, 6], [2, 6, 3]), ([6], [6, 4]), ([4, 6], [6]),
    ([0, 8], [8, 5]), ([4, 8], [8, 0]), ([64, 128], [128, 96]), ([3, 0], [0, 4]),
]


def matmul_cases():
    cases = []
    combos = [("uint8", "uint8"), ("uint8", "int8"), ("int8", "int8"), ("int8", "uint8")]
    # MatMulInteger: every shape on every type combination
    for a_type, b_type in combos:
        for index, (a_shape, b_shape) in enumerate(MATMUL_SHAPES):
            values = ("full", "limits", "small")[index % 3]
            a_zp = ("random", "min", "max", "omit")[index % 4]
            b_zp = ("random", "per_column", "max", "min", "omit")[index % 5]
            if b_zp == "per_column" and len(b_shape) < 2:
                b_zp = "random"
            spec = dict(builder="matmul_integer", a_shape=a_shape, b_shape=b_shape,
                        a_type=a_type, b_type=b_type, a_zp=a_zp, b_zp=b_zp, values=values,
                        b_const=index % 2 == 0)
            cases.append(Case(
                f"MatMulInteger/{a_type[0]}8{b_type[0]}8_{_shape_tag(a_shape)}_by_"
                f"{_shape_tag(b_shape)}_{values}_za{a_zp}_zb{b_zp}", "MatMulInteger", spec,
                vnni_exact_only=(a_type, b_type) == ("uint8", "int8")))
    # QLinearMatMul: ORT 1.31.1's CPU kernel needs y of a's type, float32 scales (opset 21's
    # float16 scales have no CPU kernel) and no int8 x uint8
    for a_type, b_type in combos[:3]:
        for index, (a_shape, b_shape) in enumerate(MATMUL_SHAPES):
            for variant in range(2):
                opset = (10, 21)[(index + variant) % 2]
                per_column = (index + variant) % 2 == 1 and len(b_shape) == 2 and b_shape[-1] > 0
                zps = [("random", "random", "random"), ("min", "max", "min"),
                       ("max", "min", "max"), ("random", "mixed", "random")][(index + variant) % 4]
                b_zp = zps[1] if per_column or zps[1] != "mixed" else "random"
                values = ("full", "small", "limits")[(index + variant) % 3]
                spread = (1.0, 0.2, 3.0)[(index + 2 * variant) % 3]
                scale = "pow2" if variant == 1 else "random"
                spec = dict(builder="qlinear_matmul", a_shape=a_shape, b_shape=b_shape,
                            a_type=a_type, b_type=b_type, y_type=a_type, opset=opset,
                            stype="float32", b_per_column=per_column, a_zp=zps[0], b_zp=b_zp,
                            y_zp=zps[2], values=values, spread=spread,
                            b_const=(index + variant) % 2 == 0, scale=scale)
                tag = (f"{a_type[0]}8{b_type[0]}8_o{opset}_{_shape_tag(a_shape)}_by_"
                       f"{_shape_tag(b_shape)}{'_percol' if per_column else ''}_{values}_"
                       f"{scale}")
                cases.append(Case(f"QLinearMatMul/{tag}", "QLinearMatMul", spec,
                                  vnni_exact_only=(a_type, b_type) == ("uint8", "int8")))
    return cases


CONV_GEOMETRIES = [
    # (tag, batch, channels, spatial, out_channels, kernel, extra attributes)
    ("1x1", 1, 8, [5, 5], 4, [1, 1], {}),
    ("3x3", 1, 3, [7, 6], 5, [3, 3], {}),
    ("3x3_pad1", 2, 4, [6, 6], 3, [3, 3], {"pads": [1, 1, 1, 1]}),
    ("3x3_stride2", 1, 3, [9, 8], 4, [3, 3], {"strides": [2, 2]}),
    ("3x3_dilation2", 1, 2, [9, 9], 3, [3, 3], {"dilations": [2, 2]}),
    ("asym_pads", 1, 3, [5, 7], 2, [3, 2], {"pads": [0, 1, 2, 1]}),
    ("same_upper", 1, 3, [6, 5], 4, [3, 3], {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    ("same_lower", 1, 3, [6, 5], 4, [2, 2], {"auto_pad": "SAME_LOWER"}),
    ("valid", 1, 2, [6, 6], 3, [3, 3], {"auto_pad": "VALID"}),
    ("group2", 1, 4, [5, 5], 6, [3, 3], {"group": 2, "pads": [1, 1, 1, 1]}),
    ("depthwise", 1, 6, [7, 7], 6, [3, 3], {"group": 6, "pads": [1, 1, 1, 1]}),
    ("depthwise_mult2", 1, 3, [6, 6], 6, [3, 3], {"group": 3, "strides": [2, 2]}),
    ("conv1d", 2, 4, [11], 5, [3], {"pads": [1, 1]}),
    ("conv1d_stride_dil", 1, 3, [16], 2, [3], {"strides": [2], "dilations": [2]}),
    ("5x5_wide", 1, 16, [8, 8], 8, [5, 5], {"pads": [2, 2, 2, 2]}),
    ("kernel_shape_attr", 1, 2, [5, 5], 2, [3, 3], {"kernel_shape": [3, 3]}),
    ("1x1_many_channels", 1, 64, [3, 3], 32, [1, 1], {}),
    ("conv3d", 1, 2, [4, 4, 4], 2, [2, 2, 2], {}),
    ("empty_batch", 0, 3, [5, 5], 2, [3, 3], {"pads": [1, 1, 1, 1]}),
]


# Issue 6: 3-D convolution is refused with a clear error for now.
CONV3D_REFUSAL = "3-D convolution is not supported"


def conv_cases():
    cases = []
    for x_type, w_type in (("uint8", "uint8"), ("uint8", "int8"), ("int8", "int8")):
        for index, (tag, n, c, spatial, m, kernel, attrs) in enumerate(CONV_GEOMETRIES):
            values = ("full", "small", "limits")[index % 3]
            base = dict(batch=n, channels=c, spatial=spatial, out_channels=m, kernel=kernel,
                        x_type=x_type, w_type=w_type, values=values, **attrs)
            spec = dict(base, builder="conv_integer",
                        x_zp=("random", "max", "min", "omit")[index % 4],
                        # ORT's ConvInteger takes a scalar w zero point only
                        w_zp=("random", "min", "omit", "max")[index % 4]
                        if w_type == "uint8" else ("zero", "omit")[index % 2],
                        w_const=index % 2 == 0)
            refusal = CONV3D_REFUSAL if len(spatial) == 3 else None
            cases.append(Case(f"ConvInteger/{x_type[0]}8{w_type[0]}8_{tag}_{values}",
                              "ConvInteger", spec,
                              vnni_exact_only=(x_type, w_type) == ("uint8", "int8"),
                              octet_refuses=refusal))
            for variant in range(2):  # ORT's QLinearConv: y has x's type
                spec = dict(base, builder="qlinear_conv", y_type=x_type,
                            per_channel=(index + variant) % 3 != 1,
                            bias=("small", None, "large")[(index + variant) % 3],
                            x_zp=("random", "max", "min")[index % 3],
                            w_zp="zero" if w_type == "int8" else "random",
                            y_zp=("random", "min", "max")[(index + variant) % 3],
                            spread=(1.0, 0.3, 2.0)[(index + variant) % 3],
                            w_const=(index + variant) % 4 != 3,
                            scale="pow2" if variant else "random")
                cases.append(Case(
                    f"QLinearConv/{x_type[0]}8{w_type[0]}8_{tag}_{values}"
                    f"{'_perchan' if spec['per_channel'] else ''}_{spec['scale']}",
                    "QLinearConv", spec,
                    vnni_exact_only=(x_type, w_type) == ("uint8", "int8"),
                    octet_refuses=refusal))
    return cases


def chain_cases():
    cases = []
    for index, (kind, qtype, qtype2) in enumerate([
            ("q_dq", "int8", None), ("q_dq", "uint8", None), ("q_dq", "int16", None),
            ("dq_q", "int8", "uint8"), ("dq_q", "uint8", "int8"), ("dq_q", "int8", "int8"),
            ("dq_q", "uint16", "uint8"), ("dq_q", "int4", "int8")]):
        spec = dict(builder="chain", kind=kind, qtype=qtype, shape=[6, 20], seed=60000 + index)
        if qtype2:
            spec["qtype2"] = qtype2
        cases.append(Case(f"chain/{kind}_{qtype}{'_to_' + qtype2 if qtype2 else ''}", "chain",
                          spec))
    return cases


# ORT issue 32132: the fused and the float path round a tie differently.
QDQ_MATMUL_DEVIATION = {
    "reason": "ORT_ENABLE_ALL fuses uint8 DQ->MatMul->Q into QLinearMatMul (exact int32 "
              "accumulation, one float multiply, round half to even); ORT_DISABLE_ALL and "
              "int8 activations on x86 run DequantizeLinear + float32 MatMul + QuantizeLinear, "
              "whose float32 sum can land just off (or exactly on) a .5 tie that the exact "
              "value is not on, so that path may round to the neighbouring integer (ORT issue "
              "32132). The two paths differ by at most one quantization step.",
    "max_lsb": 1,
    "levels": ["ENABLE_ALL", "DISABLE_ALL"],
}


def qdq_matmul_cases():
    cases = []
    for index, params in enumerate([
            ("uint8", "int8", [4, 16], [16, 8], False, "random"),
            ("uint8", "int8", [7, 33], [33, 5], True, "random"),
            ("uint8", "int8", [16, 64], [64, 32], True, "pow2"),
            ("uint8", "uint8", [5, 24], [24, 6], False, "pow2"),
            ("int8", "int8", [4, 16], [16, 8], False, "random"),
            ("int8", "int8", [9, 40], [40, 12], True, "pow2"),
            ("uint8", "int8", [2, 3, 20], [20, 7], False, "random"),
            ("uint8", "int8", [1, 256], [256, 16], True, "random"),
            # seeds found by search where ORT's two levels do differ by one step
            ("uint8", "int8", [32, 128], [128, 64], True, "random", 71138),
            ("uint8", "int8", [32, 128], [128, 64], True, "random", 71232)]):
        a_type, b_type, a_shape, b_shape, per_column, scale = params[:6]
        seed = 70000 + index if len(params) == 6 else params[6]
        spec = dict(builder="qdq_matmul", a_type=a_type, b_type=b_type, a_shape=a_shape,
                    b_shape=b_shape, b_per_column=per_column, scale=scale, seed=seed)
        tag = (f"{a_type[0]}8{b_type[0]}8_{_shape_tag(a_shape)}_by_{_shape_tag(b_shape)}"
               f"{'_percol' if per_column else ''}_{scale}_seed{seed}")
        cases.append(Case(f"qdq_matmul/{tag}", "qdq_matmul", spec, dict(QDQ_MATMUL_DEVIATION),
                          vnni_exact_only=(a_type, b_type) == ("uint8", "int8")))
    return cases


def all_cases() -> list[Case]:
    cases = qdq_cases() + dynamic_quantize_cases() + matmul_cases() + conv_cases() + \
        chain_cases() + qdq_matmul_cases()
    for case in cases:  # a seed from the id: adding a case changes no other case's data
        case.spec.setdefault("seed", int(hashlib.sha256(case.case_id.encode()).hexdigest()[:8],
                                         16))
    apply_known_ort_defects(cases)
    ids = Counter(c.case_id for c in cases)
    duplicates = [i for i, n in ids.items() if n > 1]
    assert not duplicates, f"duplicate case ids: {duplicates[:5]}"
    return cases


EMPTY_K_DEFECT = (
    "ONNX Runtime 1.31.1 does not write the output of a MatMulInteger / QLinearMatMul whose "
    "inner dimension K is 0: it returns uninitialized memory (its two optimization levels "
    "disagree, run to run). The exact result is the empty sum: 0 for MatMulInteger, "
    "y_zero_point for QLinearMatMul.")


# ORT 1.31.1's float -> float8 conversion with saturate=0 checks for overflow before
# rounding. The ONNX spec (QuantizeLinear / Cast, table "saturate=False") rounds first:
# "[x] means the value rounded to the target mantissa width", "[x] > FLT_MAX" -> NaN for
# E4M3FN, Inf for E5M2; onnx.reference.ReferenceEvaluator (ml_dtypes casts) does the same,
# and so does octet. Ranges are on |x / scale| as the float32 quotient.
FLOAT8_SATURATE0_SPEC_DEVIATIONS = {
    "float8e4m3fn": {
        "reason": "E4M3FN, saturate=0: |x/scale| in [480, 496) rounds (to nearest even, 3 "
                  "mantissa bits) to 480 > 448 = FLT_MAX, which the ONNX spec maps to NaN "
                  "(0x7F|sign); ORT 1.31.1 gives +-448 (0x7E|sign). 464 is the tie that "
                  "rounds down to 448 and (464, 480) gives NaN in both.",
        "quotient_range": [480.0, 496.0]},
    "float8e5m2": {
        "reason": "E5M2, saturate=0: |x/scale| in [61440, 65536) rounds (to nearest even, 2 "
                  "mantissa bits; 61440 is the tie and 65536 the even side) to 65536 > 57344 = "
                  "FLT_MAX, which the ONNX spec maps to +-Inf (0x7C|sign); ORT 1.31.1 gives "
                  "NaN (0x7F|sign). At 65536 and above both give Inf.",
        "quotient_range": [61440.0, 65536.0]},
}


def apply_known_ort_defects(cases: list[Case]) -> None:
    for case in cases:
        spec = case.spec
        if spec["builder"] in ("matmul_integer", "qlinear_matmul") and \
                spec["a_shape"][-1] == 0:
            case.ort_defect = EMPTY_K_DEFECT
        if spec["builder"] == "qdq" and spec["op"] == "QuantizeLinear" and \
                not spec.get("domain") and spec.get("saturate") == 0 and \
                spec["qtype"] in FLOAT8_SATURATE0_SPEC_DEVIATIONS:
            case.spec_deviation = dict(FLOAT8_SATURATE0_SPEC_DEVIATIONS[spec["qtype"]])


def spec_deviation_mask(case: Case, prepared: "Prepared") -> np.ndarray:
    """The output elements a spec_deviation covers: |x / scale| (float32) in its range."""
    import onnx
    from onnx import numpy_helper

    model = onnx.load_from_string(prepared.built.model)
    constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    x = prepared.built.feeds.get("x", constants.get("x")).astype(np.float32)
    scale = _expand_param(constants["scale"], case.spec).astype(np.float32)
    with np.errstate(all="ignore"):
        quotient = np.abs(x / scale)
    low, high = case.spec_deviation["quotient_range"]
    return (quotient >= low) & (quotient < high)


def reference_outputs(prepared: "Prepared") -> list[np.ndarray]:
    """onnx's own reference implementation of the case's model."""
    import onnx
    from onnx.reference import ReferenceEvaluator

    model = onnx.load_from_string(prepared.built.model)
    with np.errstate(all="ignore"):
        return list(ReferenceEvaluator(model).run(None, dict(prepared.built.feeds)))


def spec_expected(case: Case, prepared: "Prepared") -> dict[str, list[np.ndarray]]:
    """Per ORT level: ORT's outputs with the spec_deviation's elements taken from the ONNX
    reference. Raises ValueError where the declaration does not hold: ORT must differ from
    the reference at every covered element."""
    mask = spec_deviation_mask(case, prepared)
    reference = reference_outputs(prepared)[0]
    expected = {}
    for level in LEVELS:
        ort = prepared.ort[level][0]
        if reference.dtype != ort.dtype or reference.shape != ort.shape:
            raise ValueError(f"onnx reference gives {reference.dtype}{list(reference.shape)}, "
                             f"ORT {ort.dtype}{list(ort.shape)}")
        same = bit_pattern(reference) == bit_pattern(ort)
        if np.any(mask & same):
            raise ValueError(f"declared spec deviation not observed: ORT {level} equals the "
                             f"onnx reference at {np.argwhere(mask & same)[:5].tolist()}")
        merged = ort.copy()
        merged[mask] = reference[mask]
        expected[level] = [merged]
    return expected


def expected_without_ort(case: Case, prepared: "Prepared") -> list[np.ndarray]:
    """The exact outputs of the cases ORT cannot judge (see EMPTY_K_DEFECT)."""
    import onnx
    from onnx import numpy_helper

    shape = prepared.ort["DISABLE_ALL"][0].shape  # ORT's shape is right, its values are not
    if case.spec["builder"] == "matmul_integer":
        return [np.zeros(shape, np.int32)]
    model = onnx.load_from_string(prepared.built.model)
    zero = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}["y_zero_point"]
    return [np.full(shape, zero, zero.dtype)]


# ---------------------------------------------------------------------------------------
# ONNX Runtime side (cached)


def machine_info() -> dict:
    """The machine as ORT's kernel dispatch sees it (cpuid in this process)."""
    return ort_exact.cpu_features()


def exact_u8s8_oracle(info: dict) -> bool:
    """ORT's x86 u8 x s8 kernels are exact only with VNNI; other machines use exact dot
    products (Arm SDOT / scalar)."""
    return ort_exact.ort_u8s8_exact(info)


def _ort_value(array: np.ndarray):
    import onnxruntime as ort

    elem = TYPE_BY_NUMPY[array.dtype]
    value = ort.OrtValue.ortvalue_from_shape_and_type(list(array.shape), elem.onnx)
    data = raw_bytes(array)
    if data:
        ctypes.memmove(value.data_ptr(), data, len(data))
    return value


def _from_ort_value(value) -> np.ndarray:
    elem = TYPE_BY_ONNX[value.element_type()]
    shape = tuple(value.shape())
    size = value.tensor_size_in_bytes()
    data = ctypes.string_at(value.data_ptr(), size) if size else b""
    return from_raw_bytes(data, elem, shape)


def run_ort(model: bytes, feeds: dict[str, np.ndarray], level: str) -> list[np.ndarray]:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = getattr(ort.GraphOptimizationLevel, f"ORT_{level}")
    options.intra_op_num_threads = 1
    options.log_severity_level = 3
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    binding = session.io_binding()
    for name, array in feeds.items():
        binding.bind_ortvalue_input(name, _ort_value(array))
    for output in session.get_outputs():
        binding.bind_output(output.name, "cpu")
    session.run_with_iobinding(binding)
    return [_from_ort_value(v) for v in binding.get_outputs()]


@dataclasses.dataclass
class Prepared:
    built: Built
    ort: dict[str, list[np.ndarray] | str]  # level -> outputs, or ORT's error message
    machine: dict
    # "s8": ORT ran the case as built; "u8": its u8 x u8 form (ort_exact.to_u8_form)
    form: str = "s8"


def ort_form(case: Case) -> str:
    """The form of the case's model that ORT runs as the exact oracle on this machine."""
    return ort_exact.oracle_form() if case.vnni_exact_only else "s8"


def usable(case: Case, machine: dict, form: str) -> bool:
    """Whether ORT outputs of this form from this machine are exact for the case."""
    return not case.vnni_exact_only or form == "u8" or exact_u8s8_oracle(machine)


def prepare(case: Case, use_cache: bool = True) -> Prepared:
    """Model, inputs and ORT outputs for a case, from the cache when present."""
    path = CACHE_DIR / f"{case.key()}.pkl"
    if use_cache and path.exists():
        try:
            with path.open("rb") as f:
                entry = pickle.load(f)
            form = entry.get("form", "s8")
            if entry.get("spec") == case.spec and usable(case, entry["machine"], form):
                return Prepared(Built(**entry["built"]), entry["ort"], entry["machine"], form)
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, KeyError):
            pass  # a stale or partial entry (or an inexact one): regenerate it
    built = BUILDERS[case.spec["builder"]](case.spec)
    form = ort_form(case)
    ort_model, ort_feeds = ort_exact.for_ort(built.model, built.feeds, form)
    results = {}
    for level in LEVELS:
        try:
            results[level] = run_ort(ort_model, ort_feeds, level)
        except Exception as error:  # ORT's own exception types vary; keep the message
            results[level] = f"{type(error).__name__}: {error}".splitlines()[0][:400]
    prepared = Prepared(built, results, machine_info(), form)
    if use_cache:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        temporary = path.with_suffix(f".tmp{os.getpid()}")
        with temporary.open("wb") as f:
            # plain containers only, so that entries load whatever name this module has
            pickle.dump({"spec": case.spec, "built": dataclasses.asdict(built), "ort": results,
                         "machine": prepared.machine, "form": form}, f)
        temporary.replace(path)
    return prepared


def prune_cache(live_keys: set[str]) -> None:
    """Removes entries of cases that no longer exist (an older generator or spec)."""
    if not CACHE_DIR.is_dir():
        return
    for path in CACHE_DIR.glob("*.pkl"):
        if path.stem not in live_keys:
            path.unlink(missing_ok=True)


# ---------------------------------------------------------------------------------------
# Comparison


def _describe_difference(got, want, labels=("octet", "ort"), limit=5) -> str:
    a, b = bit_pattern(got), bit_pattern(want)
    differ = np.argwhere(a != b)
    parts = []
    for index in differ[:limit]:
        index = tuple(int(i) for i in index)
        parts.append(f"{list(index)} {labels[0]} {got[index]!r} {labels[1]} {want[index]!r}")
    return f"{len(differ)} of {want.size} differ: " + "; ".join(parts)


def compare_outputs(case: Case, label: str, got: list, want: list,
                    names: list[str]) -> list[str]:
    """Problems (empty when octet equals the reference `label` bit for bit, or within the
    case's declared deviation for that ORT level)."""
    if len(got) != len(want):
        return [f"{label}: octet gave {len(got)} outputs, expected {len(want)}"]
    problems = []
    for name, g, w in zip(names, got, want):
        g = np.asarray(g)
        if g.dtype != w.dtype or g.shape != w.shape:
            problems.append(f"{label} {name}: octet {g.dtype}{list(g.shape)} vs "
                            f"{w.dtype}{list(w.shape)}")
            continue
        if np.array_equal(bit_pattern(g), bit_pattern(w)):
            continue
        deviation = case.deviation
        if deviation and label.removeprefix("ORT ") in deviation["levels"] and \
                TYPE_BY_NUMPY[w.dtype].is_int and \
                int(lsb_distance(g, w).max()) <= deviation["max_lsb"]:
            continue
        problems.append(f"{label} {name}: {_describe_difference(g, w, ('octet', label))}")
    return problems


def oracle_problem(case: Case, prepared: Prepared) -> tuple[str, str] | None:
    """Why ORT's outputs cannot judge this case, as (status, detail); None when they can."""
    errors = {lvl: r for lvl, r in prepared.ort.items() if isinstance(r, str)}
    if errors:
        return "failed", "ONNX Runtime could not run the case (generator bug): " + \
            "; ".join(f"{k}: {v}" for k, v in errors.items())
    if case.ort_defect:
        return None
    names = [n for n, _ in prepared.built.outputs]
    enable, disable = prepared.ort["ENABLE_ALL"], prepared.ort["DISABLE_ALL"]
    for name, a, b in zip(names, enable, disable):
        if np.array_equal(bit_pattern(a), bit_pattern(b)):
            continue
        declared = case.deviation and TYPE_BY_NUMPY[a.dtype].is_int and \
            int(lsb_distance(a, b).max()) <= case.deviation["max_lsb"]
        if not declared:
            return "failed", (f"ORT ENABLE_ALL and DISABLE_ALL disagree on {name} beyond any "
                              f"declared deviation: "
                              f"{_describe_difference(a, b, ('ENABLE_ALL', 'DISABLE_ALL'))}")
    if not usable(case, prepared.machine, prepared.form):  # prepare() never gives these
        return "failed", (f"ORT outputs came from {prepared.machine} in the s8 form: without "
                          "VNNI ORT's u8 x s8 kernel saturates int16 pair sums, so it is no "
                          "exact oracle (delete the cache entry)")
    return None


def check_refusal(case: Case, prepared: Prepared, thread_counts) -> tuple[str, str]:
    """A designed refusal: octet must raise octet.OctetError naming octet_refuses, at session
    creation or at run; running, or failing any other way, is a failure."""
    import octet

    message = ""
    for count in dict.fromkeys(thread_counts):
        try:
            session = octet.InferenceSession(prepared.built.model, threads=count)
            session.run(None, dict(prepared.built.feeds))
        except octet.OctetError as error:
            message = str(error)
            if case.octet_refuses not in message:
                return "failed", (f"octet.OctetError (threads={count}) without the designed "
                                  f"message {case.octet_refuses!r}: {message}")
            continue
        except Exception as error:
            return "failed", f"{type(error).__name__} instead of octet.OctetError: {error}"
        return "failed", (f"octet ran the case (threads={count}) although it is declared to "
                          f"refuse it with {case.octet_refuses!r}")
    return "refused", message


def check_case(case: Case, threads: int = 1, extra_threads: tuple[int, ...] = (),
               prepared: Prepared | None = None) -> tuple[str, str]:
    """(status, detail), status in passed / refused (by design) / failed / skipped."""
    prepared = prepared or prepare(case)
    problem = oracle_problem(case, prepared)
    if problem:
        return problem
    import octet

    if case.octet_refuses:
        return check_refusal(case, prepared, (threads,) + extra_threads)
    names = [n for n, _ in prepared.built.outputs]
    if case.ort_defect:
        references = {"exact reference": expected_without_ort(case, prepared)}
    elif case.spec_deviation:
        try:
            references = {f"ORT {level} (onnx reference where ORT deviates from the spec)":
                          outputs for level, outputs in spec_expected(case, prepared).items()}
        except ValueError as error:
            return "failed", f"spec_deviation: {error}"
    else:
        references = {f"ORT {level}": prepared.ort[level] for level in LEVELS}
    problems = []
    for count in (threads,) + tuple(t for t in extra_threads if t != threads):
        try:
            session = octet.InferenceSession(prepared.built.model, threads=count)
            got = session.run(None, dict(prepared.built.feeds))
        except octet.OctetError as error:
            return "failed", f"octet.OctetError (threads={count}): {error}"
        except Exception as error:  # every octet failure should be an OctetError
            return "failed", f"{type(error).__name__} instead of octet.OctetError: {error}"
        for label, want in references.items():
            problems += [f"threads={count} {p}" for p in
                         compare_outputs(case, label, got, want, names)]
    return ("failed", " | ".join(problems)) if problems else ("passed", "")


# ---------------------------------------------------------------------------------------
# CLI


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--filter", default="", help="only cases whose id contains SUBSTR")
    parser.add_argument("--list", action="store_true", help="list case ids and exit")
    parser.add_argument("--threads", type=int, default=1, help="octet's thread count")
    parser.add_argument("--ort-only", action="store_true",
                        help="generate cases and ORT outputs only (fills the cache)")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every failure")
    args = parser.parse_args(argv)

    cases = [c for c in all_cases() if args.filter in c.case_id]
    if args.list:
        for case in cases:
            notes = [f"deviation <= {case.deviation['max_lsb']} LSB"] if case.deviation else []
            notes += ["ORT defect: compared with the exact result"] if case.ort_defect else []
            notes += [f"u8 x s8: ORT runs the {ort_form(case)} form here"] \
                if case.vnni_exact_only else []
            if case.spec_deviation:
                low, high = case.spec_deviation["quotient_range"]
                notes.append(f"|x/scale| in [{low:g}, {high:g}): compared with onnx reference")
            notes += [f"octet refuses: {case.octet_refuses}"] if case.octet_refuses else []
            print(case.case_id + (f"  ({'; '.join(notes)})" if notes else ""))
        print(f"{len(cases)} cases")
        return 0

    import onnxruntime

    tally = defaultdict(Counter)
    failures = []
    machines = Counter()
    for case in cases:
        prepared = prepare(case)
        if args.ort_only:
            status, detail = oracle_problem(case, prepared) or ("passed", "")
        else:
            status, detail = check_case(case, args.threads, prepared=prepared)
        machines[json.dumps(dict(prepared.machine, form=prepared.form), sort_keys=True)] += 1
        tally[case.op][status] += 1
        if status != "passed":
            failures.append((case.case_id, status, detail))
    if not args.filter:
        prune_cache({case.key() for case in cases})
    for case_id, status, detail in failures:
        if args.verbose or status == "failed":
            print(f"{status.upper()} {case_id}: {detail[:1500]}")
    print(f"\nthis host: {ort_exact.describe_host()}")
    print(f"ONNX Runtime {onnxruntime.__version__} CPU EP outputs from (form s8: the case as "
          f"built; u8: its u8 x u8 form):")
    for machine, count in machines.items():
        print(f"  {count} cases: {machine}")
    print(f"\n{'op':36s} {'passed':>7s} {'refused (by design)':>20s} {'failed':>7s} "
          f"{'skipped':>8s}")
    for op in sorted(tally):
        row = tally[op]
        print(f"{op:36s} {row['passed']:7d} {row['refused']:20d} {row['failed']:7d} "
              f"{row['skipped']:8d}")
    total = {s: sum(r[s] for r in tally.values()) for s in
             ("passed", "refused", "failed", "skipped")}
    print(f"{total['passed']} passed, {total['refused']} refused (by design), "
          f"{total['failed']} failed" +
          (f", {total['skipped']} skipped" if total["skipped"] else ""))
    return 1 if total["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
