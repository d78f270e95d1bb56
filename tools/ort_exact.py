"""ONNX Runtime 1.31.1 as an exact integer oracle on every x86 CPU.

ORT's x86 u8 x s8 kernels are exact only with VNNI (`vpdpbusds`). Without it (AVX2, and
AVX-512 without VNNI) they use `vpmaddubsw`, which saturates each pair sum a0*b0 + a1*b1 to
int16, so full-range products come out wrong by up to tens of LSB. ORT's u8 x u8 kernels are
exact everywhere (int16 operands and `vpmaddwd`). The same product in u8 x u8 form is

    sum_k (a - za) * (b - zb) = sum_k (a - za) * ((b + 128) - (zb + 128))

so this module rewrites a model (and its feeds) so that every int8 weight operand of a
u8 x s8 product becomes uint8 (w + 128) with zero point zb + 128 (a missing one becomes
128): MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv, com.microsoft QGemm,
MatMulIntegerToFloat and DynamicQuantizeMatMul, and the QDQ groups ORT fuses
(DequantizeLinear of a uint8 activation and of an int8 weight feeding MatMul, Gemm or Conv,
or of an int8 activation that ORT's int8 -> uint8 move on x86 turns into uint8 first).
An int8 weight may be an initializer, a graph input (its feed is converted too) or the
output of a QuantizeLinear (whose zero point is shifted: the quantized values shift by
exactly 128, saturation bounds included), possibly through Reshape/Transpose/Squeeze/
Unsqueeze/Flatten. DequantizeLinear of the converted tensor gives the same floats, so every
path that does not fuse computes exactly what it computed before.

    form = oracle_form()                 # "s8" where ORT's u8 x s8 kernel is exact, else "u8"
    model, feeds = for_ort(model, feeds) # the model ORT should run as the oracle here

The decision uses cpuid read in this process (as MLAS does), so it follows the CPU an
emulator presents (qemu-x86_64 -cpu Haswell), not /proc/cpuinfo. test_ort_exact.py checks
the reason for all this on the machine it runs on: the s8 form of a full-range product
differs from the int64 product without VNNI, the u8 form never does.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys

import numpy as np

import measure

# ---------------------------------------------------------------------------------------
# The CPU as this process sees it (measure.cpu_features: cpuid and XCR0 read in-process)

cpu_features = measure.cpu_features


def ort_u8s8_exact(features: dict | None = None) -> bool:
    """True where ORT's u8 x s8 kernel is exact (measure.ort_u8s8_saturates's rule)."""
    return not measure.ort_u8s8_saturates(features)


def octet_isas(features: dict | None = None) -> list[str]:
    """The OCTET_ISA paths octet runs on a CPU with these features (the rule of
    src/kernels/isa.cc, x86-64 builds); test_ort_exact.py checks it against octet."""
    features = features or cpu_features()
    isa = set(features.get("isa", []))
    if features.get("machine") not in ("x86_64", "AMD64"):
        return ["scalar"]
    paths = ["scalar"]
    if {"avx2", "fma", "f16c"} <= isa:
        paths.append("avx2")
        if "avx_vnni" in isa:
            paths.append("avxvnni")
        if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= isa:
            paths.append("avx512")
            if "avx512_vnni" in isa:
                paths.append("avx512vnni")
    return paths


def octet_best_isa(features: dict | None = None) -> str:
    """The path octet takes by default on this CPU (its BestIsa)."""
    paths = octet_isas(features)
    return next(p for p in ("avx512vnni", "avx512", "avxvnni", "avx2", "scalar") if p in paths)


def oracle_form(features: dict | None = None) -> str:
    """"s8": ORT runs the model as given; "u8": ORT runs to_u8_form of it."""
    return "s8" if ort_u8s8_exact(features) else "u8"


def describe_host() -> str:
    f = cpu_features()
    return "%s %s, %s (from %s); ONNX Runtime oracle form: %s" % (
        f["machine"], f["cpu"] or "unknown CPU", " ".join(f["isa"]) or "no AVX2",
        f["source"], oracle_form())


@functools.lru_cache(maxsize=None)
def octet_isa_supported(isa: str) -> tuple[bool, str]:
    """Whether octet can run with OCTET_ISA=isa here, and octet's reason when not. Asked of
    octet itself in a child process (OCTET_ISA is read once per process), the way the
    forced-ISA tests run it."""
    code = ("import numpy as np, octet\n"
            "from onnx import TensorProto, helper\n"
            "g = helper.make_graph([helper.make_node('MatMulInteger', ['a', 'b'], ['y'])], 'g',\n"
            "    [helper.make_tensor_value_info('a', TensorProto.UINT8, [2, 4]),\n"
            "     helper.make_tensor_value_info('b', TensorProto.INT8, [4, 3])],\n"
            "    [helper.make_tensor_value_info('y', TensorProto.INT32, None)])\n"
            "m = helper.make_model(g, opset_imports=[helper.make_opsetid('', 13)], ir_version=8)\n"
            "s = octet.InferenceSession(m.SerializeToString())\n"
            "s.run(None, {'a': np.ones((2, 4), np.uint8), 'b': np.ones((4, 3), np.int8)})\n"
            "print('ok')\n")
    env = dict(os.environ, OCTET_ISA=isa)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=120)
    if out.returncode == 0 and out.stdout.strip() == "ok":
        return True, ""
    lines = [line for line in out.stderr.splitlines() if "OCTET_ISA" in line]
    if not lines:
        raise RuntimeError("could not ask octet about OCTET_ISA=%s: %s" % (isa, out.stderr[-800:]))
    reason = lines[-1].split("OctetError: ", 1)[-1].strip()
    return False, reason.removeprefix("OCTET_ISA=%s: " % isa)


# ---------------------------------------------------------------------------------------
# The u8 x u8 form of a model

# op -> (activation input, weight input, weight zero-point input) of its u8 x s8 product
_PRODUCTS = {
    ("", "MatMulInteger"): (0, 1, 3),
    ("", "ConvInteger"): (0, 1, 3),
    ("", "QLinearMatMul"): (0, 3, 5),
    ("", "QLinearConv"): (0, 3, 5),
    ("com.microsoft", "QGemm"): (0, 3, 5),
    ("com.microsoft", "MatMulIntegerToFloat"): (0, 1, 5),
    ("com.microsoft", "DynamicQuantizeMatMul"): (None, 1, 3),  # A is quantized to uint8
}
# A weight's consumers whose zero point can follow it (op -> zero-point input)
_ZP_CONSUMERS = {
    "DequantizeLinear": 2, "MatMulInteger": 3, "ConvInteger": 3, "QLinearMatMul": 5,
    "QLinearConv": 5, "QGemm": 5, "MatMulIntegerToFloat": 5, "DynamicQuantizeMatMul": 3,
}
_MOVEMENT = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity"}
_QDQ_DOMAINS = ("", "ai.onnx", "com.microsoft")
_FUSED_BY_ORT = {"MatMul": 1, "Gemm": 1, "Conv": 1}  # float op -> its weight input


class ConversionError(ValueError):
    """The model has a u8 x s8 product whose weight this module cannot convert."""


def _domain(node):
    return "" if node.domain in ("", "ai.onnx") else node.domain


def to_u8_form(model, feeds: dict | None = None):
    """(model, feeds, converted): a copy of `model` (ModelProto or bytes; the result has the
    same kind) in which every int8 weight of a u8 x s8 product is uint8, and the feeds with
    converted graph inputs; `converted` lists the tensors changed. Raises ConversionError
    where a weight cannot be converted (a run-time zero point, a consumer outside the
    known set)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    as_bytes = isinstance(model, (bytes, bytearray))
    proto = onnx.load_from_string(bytes(model)) if as_bytes else onnx.ModelProto.FromString(
        model.SerializeToString())
    graph = proto.graph
    feeds = dict(feeds or {})
    inits = {t.name: t for t in graph.initializer}
    inputs = {i.name: i for i in graph.input}
    producer = {o: n for n in graph.node for o in n.output}
    consumers = {}
    for node in graph.node:
        for index, name in enumerate(node.input):
            if name:
                consumers.setdefault(name, []).append((node, index))
    typed = list(graph.value_info) + list(graph.input) + list(graph.output)
    try:  # element types of intermediate tensors (standard ops); the model itself is kept
        typed += list(onnx.shape_inference.infer_shapes(proto).graph.value_info)
    except Exception:  # noqa: BLE001 - a model shape inference cannot read: fall back below
        pass
    value_types = {v.name: v.type.tensor_type.elem_type for v in typed}

    def elem_type(name):
        if name in inits:
            return inits[name].data_type
        if name in feeds:
            return helper.np_dtype_to_tensor_dtype(np.asarray(feeds[name]).dtype)
        if name in value_types and value_types[name]:
            return value_types[name]
        node = producer.get(name)
        if node is None:
            return None
        if node.op_type == "QuantizeLinear":
            if len(node.input) > 2 and node.input[2]:
                return elem_type(node.input[2])
            for attr in node.attribute:
                if attr.name == "output_dtype":
                    return attr.i
            return TensorProto.UINT8
        if node.op_type in _MOVEMENT or node.op_type in ("MaxPool", "Relu", "Slice", "Gather",
                                                          "Split", "Concat", "Resize"):
            return elem_type(node.input[0])
        if node.op_type == "DynamicQuantizeLinear":
            return TensorProto.UINT8
        if node.op_type in ("QLinearMatMul", "QLinearConv"):
            return elem_type(node.input[7])
        if node.op_type == "QGemm":
            return elem_type(node.input[8]) if len(node.input) > 8 and node.input[8] else \
                TensorProto.FLOAT
        if _domain(node) == "com.microsoft" and node.op_type.startswith("QLinear"):
            # these keep their input's type; QLinearConcat's inputs start with y's parameters
            return elem_type(node.input[1 if node.op_type == "QLinearConcat" else 0])
        return None

    def moved_to_uint8(name):
        """Whether ORT's QDQS8ToU8Transformer (x86) may move this int8 activation to uint8:
        the output of a QuantizeLinear read by one DequantizeLinear. Converting the weight
        of such a group is safe either way: left int8, the activation meets a uint8 weight,
        a group ORT never fuses, and the float path sees the same dequantized values."""
        q = producer.get(name)
        readers = consumers.get(name, [])
        return (q is not None and q.op_type == "QuantizeLinear" and name not in inits and
                elem_type(name) == TensorProto.INT8 and len(readers) == 1 and
                readers[0][0].op_type == "DequantizeLinear")

    # 1. the int8 weights of u8 x s8 products, and of s8 x s8 QDQ groups ORT makes u8 x s8
    targets = []
    for node in graph.node:
        spec = _PRODUCTS.get((_domain(node), node.op_type))
        if spec:
            a, w, _ = spec
            if len(node.input) > w and elem_type(node.input[w]) == TensorProto.INT8 and (
                    a is None or elem_type(node.input[a]) == TensorProto.UINT8):
                targets.append(node.input[w])
        elif node.op_type in _FUSED_BY_ORT and _domain(node) == "":
            dq = [producer.get(n) for n in node.input[:2]]
            if all(d is not None and d.op_type == "DequantizeLinear" and d.domain in _QDQ_DOMAINS
                   for d in dq):
                if elem_type(dq[1].input[0]) == TensorProto.INT8 and (
                        elem_type(dq[0].input[0]) == TensorProto.UINT8 or
                        moved_to_uint8(dq[0].input[0])):
                    targets.append(dq[1].input[0])

    # 2. convert each weight at its source, and every consumer's zero point after it
    counter = [0]

    def new_name(base):
        counter[0] += 1
        return "%s__u8form%d" % (base, counter[0])

    def shifted_zero_point(zp_name, like=None):
        """A new uint8 initializer: zp + 128, or 128 shaped like `like` (the scale)."""
        if zp_name:
            replaced.add(zp_name)
            if zp_name not in inits:
                raise ConversionError("zero point %r is not an initializer" % zp_name)
            zp = numpy_helper.to_array(inits[zp_name])
            if zp.dtype != np.int8:
                raise ConversionError("zero point %r is %s, not int8" % (zp_name, zp.dtype))
            value = (zp.astype(np.int16) + 128).astype(np.uint8)
        else:
            shape = numpy_helper.to_array(inits[like]).shape if like in inits else ()
            value = np.full(shape, 128, np.uint8)
        name = new_name(zp_name or "zero_point")
        tensor = numpy_helper.from_array(value, name)
        graph.initializer.append(tensor)
        inits[name] = tensor
        return name

    def set_input(node, index, name):
        while len(node.input) <= index:
            node.input.append("")
        node.input[index] = name

    done, converted, replaced = set(), [], set()

    def convert_consumers(name):
        for node, index in consumers.get(name, []):
            if node.op_type in _MOVEMENT and index == 0:
                for out in node.output:
                    convert_consumers(out)
                    _retype(out)
                continue
            zp_index = _ZP_CONSUMERS.get(node.op_type)
            weight_index = {"DequantizeLinear": 0}.get(node.op_type)
            if weight_index is None:
                spec = _PRODUCTS.get((_domain(node), node.op_type))
                weight_index = spec[1] if spec else None
            if zp_index is None or index != weight_index:
                raise ConversionError("int8 weight %r also feeds %s input %d, which cannot "
                                      "follow it to uint8" % (name, node.op_type, index))
            zp = node.input[zp_index] if len(node.input) > zp_index else ""
            like = node.input[1] if node.op_type == "DequantizeLinear" else None
            set_input(node, zp_index, shifted_zero_point(zp, like))

    def _retype(name):
        for value in list(graph.value_info) + list(graph.output):
            if value.name == name:
                value.type.tensor_type.elem_type = TensorProto.UINT8

    def convert_source(name):
        if name in inits:
            tensor = inits[name]
            data = numpy_helper.to_array(tensor)
            new = numpy_helper.from_array((data.astype(np.int16) + 128).astype(np.uint8), name)
            tensor.CopyFrom(new)
        elif name in inputs:
            inputs[name].type.tensor_type.elem_type = TensorProto.UINT8
            if name in feeds:
                feeds[name] = (np.asarray(feeds[name]).astype(np.int16) + 128).astype(np.uint8)
        elif name in producer and producer[name].op_type in _MOVEMENT:
            source = producer[name].input[0]
            convert(source)
            return
        elif name in producer and producer[name].op_type == "QuantizeLinear":
            q = producer[name]
            zp = q.input[2] if len(q.input) > 2 else ""
            if not zp:  # int8 output from output_dtype: becomes a uint8 zero point
                for attr in list(q.attribute):
                    if attr.name == "output_dtype":
                        q.attribute.remove(attr)
            set_input(q, 2, shifted_zero_point(zp, q.input[1]))
        else:
            raise ConversionError("int8 weight %r comes from %s, which this module cannot "
                                  "convert" % (name, producer[name].op_type if name in producer
                                               else "nowhere"))
        _retype(name)

    def convert(name):
        if name in done:
            return
        done.add(name)
        convert_source(name)
        if name in producer and producer[name].op_type in _MOVEMENT:
            return  # convert(source) has converted this tensor's consumers through it
        convert_consumers(name)
        converted.append(name)

    for name in targets:
        convert(name)
    # drop the int8 zero points nothing reads any more (ORT warns about unused initializers)
    used = {name for node in graph.node for name in node.input}
    for tensor in [t for t in graph.initializer if t.name in replaced and t.name not in used]:
        graph.initializer.remove(tensor)
    result = proto.SerializeToString() if as_bytes else proto
    return result, feeds, converted


def for_ort(model, feeds: dict | None = None, form: str | None = None):
    """(model, feeds) as ONNX Runtime should run them to be an exact oracle on this host:
    unchanged where its u8 x s8 kernel is exact (form "s8"), to_u8_form otherwise."""
    form = form or oracle_form()
    if form == "s8":
        return model, dict(feeds or {})
    converted, feeds, _ = to_u8_form(model, feeds)
    return converted, feeds
