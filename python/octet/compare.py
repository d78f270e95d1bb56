"""`octet compare MODEL`: where and why octet and ONNX Runtime (or the float model) disagree.

Both engines run the graph they normally run, with every intermediate value kept:
- octet: an InferenceSession with keep_intermediates, which keeps every value its graph
  computes after its rewrites (a value folded into a fused node does not exist in octet and
  is not compared);
- ONNX Runtime: the graph it optimized (SessionOptions.optimized_model_filepath at the chosen
  level), with every node output added as a graph output, run again with optimizations off,
  so that it runs the same kernels as the plain session; its outputs are checked to equal
  the plain session's bit for bit, and the listing says whether they do.
Values of the same name in both are compared in the order of the model's nodes. A
difference whose compared inputs agree is where the engines part ("origin"); the others
inherit it. Each differing 8-bit value made by a QuantizeLinear is classified: a rounding
tie when the exact real value (from the integer inputs of MatMul and Conv groups) lies
within the float path's worst-case error of the rounding boundary between the two results,
with the accumulator, the exact value and ORT's float value shown as seed 000 does.
docs/usage.md, "octet compare".
"""

import argparse
import json
import os
import sys
import tempfile

import numpy as np

from . import _command, feeds as feeds_mod, measure
from ._command import UsageError

SCHEMA = "octet-compare/1"
U = 2.0 ** -24  # float32 unit roundoff
# ONNX Runtime ops that make 8-bit values from an integer accumulator (no float path).
INTEGER_KERNELS = {"QLinearMatMul", "QLinearConv", "QGemm", "QLinearAdd", "QLinearMul",
                   "MatMulInteger", "ConvInteger", "QAttention"}
KINDS = ("tie", "not a tie", "ORT's integer kernel is not exact", "unclassified")
MAX_ANALYZED = 20000  # differing elements classified per tensor

HELP = """\
Runs MODEL in octet and in ONNX Runtime (default, --vs-ort) with every intermediate tensor
kept, and lists in graph order the first tensors that differ: how many values, by how much,
whether their inputs agree (the tensor where the engines part) and, for 8-bit tensors made
by a QuantizeLinear, whether each difference is a rounding tie of the unfused float path.
With --vs-float FLOAT_MODEL it compares octet's tensors (8-bit ones dequantized) with the
float model's tensors of the same name, run in ONNX Runtime.

octet keeps the values its graph computes after its rewrites: a value folded into a fused
node does not exist there and is not compared. ONNX Runtime runs the graph it optimized with
every node output added as an output (optimizations off for that run); the header says
whether that run's outputs equal the plain session's.

Inputs not given with --input are invented as octet bench does (octet bench --help).
Exit status: 0 when the comparison ran (whatever it found), 1 when it failed, 2 on a usage
error."""


def make_parser():
    parser = _command.ArgumentParser(
        prog="octet compare", description=HELP,
        usage="octet compare MODEL [--input NAME=FILE.npy | FILE.npz]... [--shape NAME=DIMS]...\n"
              "                     [--vs-ort | --vs-float FLOAT_MODEL] [--ort-level LEVEL]\n"
              "                     [--seed N] [--threads N] [--show N] [--json OUT.json]",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", metavar="MODEL", help="the (quantized) .onnx model")
    feeds_mod.add_arguments(parser)
    against = parser.add_mutually_exclusive_group()
    against.add_argument("--vs-ort", action="store_true",
                         help="compare with ONNX Runtime on the same model (the default)")
    against.add_argument("--vs-float", metavar="FLOAT_MODEL",
                         help="compare with the float model, run in ONNX Runtime")
    parser.add_argument("--ort-level", default="all",
                        choices=["all", "extended", "basic", "disable"],
                        help="ONNX Runtime's graph optimization level (default all: "
                        "ORT_ENABLE_ALL, what its users run)")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="threads of both engines (default 1); results do not depend on "
                        "it in octet")
    parser.add_argument("--show", type=int, default=10, metavar="N",
                        help="differing tensors listed (default 10; all of them in --json)")
    parser.add_argument("--json", metavar="OUT.json", help="also write the findings as JSON")
    parser.add_argument("--quiet", action="store_true", help="no progress line on stderr")
    return parser


def parse_args(argv):
    args = make_parser().parse_args(argv)
    if args.threads < 0:
        raise UsageError("--threads needs a number >= 0, got %d" % args.threads)
    if args.show < 0:
        raise UsageError("--show needs a number >= 0, got %d" % args.show)
    if args.json and not os.path.isdir(os.path.dirname(os.path.abspath(args.json))):
        raise UsageError("cannot write %s: no folder %s" % (
            args.json, os.path.dirname(os.path.abspath(args.json))))
    try:
        args.shapes = feeds_mod.parse_shapes(args.shape)
    except feeds_mod.InputError as error:
        raise UsageError(str(error)) from None
    return args


# ---------------------------------------------------------------- running both engines


def octet_values(model_path, feeds, threads):
    """{name: array} of every value octet computes (outputs and intermediates) and the
    names in the order octet computes them."""
    import octet
    session = octet.InferenceSession(model_path, threads=threads, keep_intermediates=True)
    names = [v.name for v in session.get_intermediates()]
    names += [o.name for o in session.get_outputs()]
    return dict(zip(names, session.run(names, feeds))), names


def ort_values(model_path, feeds, threads, level, scratch, as_optimized=True):
    """ONNX Runtime's values: the graph it optimized at `level`, every node output added as a
    graph output, run with optimizations off (as_optimized=False: the model as written, every
    node output added, run at `level`). Returns (values, whether its outputs equal the plain
    session's, how many values, the graph it ran)."""
    import onnx
    optimized = os.path.join(scratch, "ort_optimized.onnx")
    plain = measure.ort_session(model_path, threads, level=level,
                                optimized_path=optimized if as_optimized else None, quiet=True)
    plain_outputs = dict(zip([o.name for o in plain.get_outputs()], plain.run(None, feeds)))
    del plain
    graph_model = onnx.load(optimized if as_optimized else model_path)
    present = {o.name for o in graph_model.graph.output}
    for node in graph_model.graph.node:
        for name in node.output:
            if name and name not in present:
                graph_model.graph.output.append(onnx.ValueInfoProto(name=name))
                present.add(name)
    instrumented = measure.ort_session(graph_model.SerializeToString(), threads,
                                       level="disable" if as_optimized else level, quiet=True)
    names = [o.name for o in instrumented.get_outputs()]
    values = dict(zip(names, instrumented.run(names, feeds)))
    faithful = all(name in values and _same_bits(array, values[name])
                   for name, array in plain_outputs.items())
    return values, faithful, len(names), Graph(graph_model)


def _same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and a.tobytes() == b.tobytes()


# ---------------------------------------------------------------- the original graph


class Graph:
    """The model as written: producers, node order, constants."""

    def __init__(self, model):
        import onnx
        from onnx import numpy_helper
        if not isinstance(model, onnx.ModelProto):
            model = onnx.load(model)
        self.nodes = list(model.graph.node)
        self.producer, self.order = {}, {}
        for index, node in enumerate(self.nodes):
            for name in node.output:
                if name:
                    self.producer[name] = node
                    self.order[name] = index
        self.constants = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
        for node in self.nodes:
            if node.op_type == "Constant":
                for attr in node.attribute:
                    if attr.name == "value":
                        self.constants[node.output[0]] = numpy_helper.to_array(attr.t)
        self.inputs = {i.name for i in model.graph.input} - set(self.constants)
        self.outputs = [o.name for o in model.graph.output]

    @staticmethod
    def attribute(node, name, default):
        for attr in node.attribute:
            if attr.name == name:
                return attr.i
        return default

    def label(self, name):
        node = self.producer.get(name)
        return "%s '%s'" % (node.op_type, node.name) if node is not None else "graph input"

    def nearest_compared(self, compared):
        """{value: set of the nearest compared values upstream}: walking back through values
        that are not compared; graph inputs and constants are the same in both engines."""
        upstream = {}
        for node in self.nodes:
            found = set()
            for name in node.input:
                if not name or name in self.constants or name in self.inputs:
                    continue
                found |= {name} if name in compared else upstream.get(name, set())
            for name in node.output:
                if name:
                    upstream[name] = found
        return upstream


def _scalar(graph, name):
    value = graph.constants.get(name) if name else None
    return None if value is None or value.size != 1 else value.reshape(())


def ort_aliases(graph, ort_graph):
    """{model value: (ORT value, zero-point shift)} for the 8-bit values ONNX Runtime renamed
    when it moved them from int8 to uint8 (QDQS8ToU8Transformer: new tensors
    qdq_s8_to_u8_*, zero points + 128). Found by matching QuantizeLinear nodes (same float
    input and scale) and DequantizeLinear nodes (same output) of the two graphs; the shift
    is the difference of their constant scalar zero points."""
    aliases = {}

    def add(name, ort_name, node, ort_node):
        if name == ort_name or name in aliases or ort_name in graph.producer:
            return
        if node.input[1] != ort_node.input[1]:
            return
        zero = _scalar(graph, node.input[2] if len(node.input) > 2 else "")
        ort_zero = _scalar(ort_graph, ort_node.input[2] if len(ort_node.input) > 2 else "")
        if zero is None or ort_zero is None:
            return
        aliases[name] = (ort_name, int(ort_zero) - int(zero))

    ort_q = {}
    for node in ort_graph.nodes:
        if node.op_type == "QuantizeLinear":
            ort_q[(node.input[0], node.input[1])] = node
    for node in graph.nodes:
        if node.op_type == "QuantizeLinear" and (node.input[0], node.input[1]) in ort_q:
            other = ort_q[(node.input[0], node.input[1])]
            add(node.output[0], other.output[0], node, other)
        elif node.op_type == "DequantizeLinear":
            other = ort_graph.producer.get(node.output[0])
            if other is not None and other.op_type == "DequantizeLinear":
                add(node.input[0], other.input[0], node, other)
    return aliases


# ---------------------------------------------------------------- differences


def as_comparable(a, b, shift=0):
    """ORT's value b in octet's terms (b - shift, for a value ORT moved to uint8 with its
    zero point shifted), or None with the reason when the two cannot be compared."""
    if a.shape != b.shape:
        return None, "shapes differ: octet %s, ORT %s" % (list(a.shape), list(b.shape))
    if shift:
        if a.dtype.kind not in "iu" or b.dtype.kind not in "iu":
            return None, "a zero-point shift on non-integer values"
        b = b.astype(np.int64) - shift
        info = np.iinfo(a.dtype)
        if b.min(initial=info.min) < info.min or b.max(initial=info.max) > info.max:
            return None, "ORT's values shifted by %d leave %s's range" % (shift, a.dtype)
        return b.astype(a.dtype), None
    if a.dtype != b.dtype:
        return None, "types differ: octet %s, ORT %s" % (a.dtype, b.dtype)
    return b, None


def difference(a, b):
    """How two arrays of one type differ: count, max |d|, steps (integers) or ulps (float)."""
    if a.dtype.kind == "f":
        differ = ~((a == b) | (np.isnan(a) & np.isnan(b)))
    else:
        differ = a != b
    count = int(differ.sum())
    result = {"total": int(a.size), "differing": count, "max_abs_diff": 0.0}
    if count:
        fa, fb = a[differ].astype(np.float64), b[differ].astype(np.float64)
        d = np.abs(fa - fb)
        result["max_abs_diff"] = float(np.nanmax(d)) if np.isfinite(d).any() else float("inf")
        if a.dtype.kind == "f":
            largest = float(np.nanmax(np.abs(b.astype(np.float64)))) if b.size else 0.0
            result["relative_to_largest"] = result["max_abs_diff"] / largest if largest else None
        if a.dtype.kind in "iu":
            steps, counts = np.unique(np.abs(fa - fb).astype(np.int64), return_counts=True)
            result["by_step"] = {str(int(s)): int(c) for s, c in zip(steps[:8], counts[:8])}
    return result, differ


# ---------------------------------------------------------------- rounding ties


def _round_half_even(x):
    return np.rint(x)


def _per_axis(value, shape, axis):
    """A per-tensor or per-axis quantization parameter broadcast to `shape`."""
    value = np.asarray(value)
    if value.size == 1:
        return np.broadcast_to(value.reshape(()), shape)
    axis = axis % len(shape)
    view = [1] * len(shape)
    view[axis] = value.size
    return np.broadcast_to(value.reshape(view), shape)


def _dq_source(graph, name):
    """(quantized tensor name, scale, zero point, axis) when `name` is a DequantizeLinear
    output with constant parameters, else None."""
    node = graph.producer.get(name)
    if node is None or node.op_type != "DequantizeLinear":
        return None
    if node.input[1] not in graph.constants:
        return None
    zero = graph.constants.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
    if len(node.input) > 2 and node.input[2] and zero is None:
        return None
    scale = graph.constants[node.input[1]]
    return node.input[0], scale, np.zeros_like(scale, np.int64) if zero is None else zero, \
        graph.attribute(node, "axis", 1)


def _constant_float(graph, name):
    """A constant float tensor, or the float32 DequantizeLinear of a constant; else None."""
    if name in graph.constants and graph.constants[name].dtype.kind == "f":
        return graph.constants[name].astype(np.float32), None
    source = _dq_source(graph, name)
    if source and source[0] in graph.constants:
        q, scale, zero, axis = source
        data = graph.constants[q]
        value = ((data.astype(np.int64) - _per_axis(zero, data.shape, axis)).astype(np.float32)
                 * _per_axis(scale, data.shape, axis).astype(np.float32))
        return value.astype(np.float32), (data, scale, zero)
    return None


class ExactProduct:
    """The exact integer product behind a QuantizeLinear fed by MatMul(DQ(a), DQ(b)) [+ bias]
    (ONNX Runtime's unfused QDQ form, which octet folds into one integer node)."""

    def __init__(self, graph, qnode, lookup):
        self.ok = False
        x = graph.producer.get(qnode.input[0])
        self.bias = self.bias_q = None
        if x is not None and x.op_type == "Add":
            for i in (0, 1):
                mm = graph.producer.get(x.input[i])
                const = _constant_float(graph, x.input[1 - i])
                if mm is not None and mm.op_type == "MatMul" and const is not None:
                    self.bias, dq = const
                    if dq is not None and dq[0].dtype == np.int32 and np.all(
                            np.asarray(dq[2]) == 0):
                        self.bias_q = (dq[0], dq[1])
                    x = mm
                    break
            else:
                return
        if x is None or x.op_type != "MatMul":
            return
        a, b = _dq_source(graph, x.input[0]), _dq_source(graph, x.input[1])
        if a is None or b is None:
            return
        self.a, self.b = lookup(a[0]), lookup(b[0])
        if self.a is None or self.b is None or self.b.ndim != 2 or np.asarray(a[1]).size != 1:
            return
        self.sa, self.za = np.float32(np.asarray(a[1]).reshape(())), int(np.asarray(a[2]))
        n = self.b.shape[1]
        if np.asarray(b[1]).size not in (1, n) or (np.asarray(b[1]).size == n and b[3] % 2 != 1):
            return  # a weight scale must be per tensor or per column
        self.sb = np.broadcast_to(np.asarray(b[1], np.float32).reshape(-1), (n,))
        self.zb = np.broadcast_to(np.asarray(b[2], np.int64).reshape(-1), (n,))
        if self.bias is not None and self.bias.size not in (1, n):
            return
        self.ok = True

    def at(self, index, s_out):
        """(accumulator, exact real value / s_out, octet's epilogue value or None, float
        error bound) for output element `index` (a tuple) with output scale s_out."""
        n = index[-1]
        row = self.a[index[:-1]] if self.a.ndim == len(index) else self.a[
            index[len(index) - self.a.ndim:-1]]
        xa = row.astype(np.int64) - self.za
        wb = self.b[:, n].astype(np.int64) - int(self.zb[n])
        acc = int(np.dot(xa, wb))
        scale = float(self.sa) * float(self.sb[n])
        terms = float(np.dot(np.abs(xa), np.abs(wb))) * scale
        bias = 0.0 if self.bias is None else float(np.asarray(self.bias).reshape(-1)[
            0 if self.bias.size == 1 else n])
        exact = (acc * scale + bias) / float(s_out)
        k = xa.size
        bound = ((k + 3) * U * (terms + abs(bias))) / float(s_out) + 2 * U * abs(exact)
        epilogue = None
        multiplier = np.float32(np.float32(self.sa * self.sb[n]) / np.float32(s_out))
        if self.bias is None:
            epilogue = float(np.float32(np.float32(acc) * multiplier))
        elif self.bias_q is not None and np.float32(np.asarray(self.bias_q[1]).reshape(-1)[
                0 if np.asarray(self.bias_q[1]).size == 1 else n]) == np.float32(
                    self.sa * self.sb[n]):
            bq = int(np.asarray(self.bias_q[0]).reshape(-1)[0 if self.bias_q[0].size == 1 else n])
            epilogue = float(np.float32(np.float32(acc + bq) * multiplier))
        return acc, exact, epilogue, bound


def _bias_dq(graph, name):
    """A constant bias: (float32 values, (int32 values, scale) when it is the
    DequantizeLinear of an int32 constant with zero point 0, else None), or None."""
    const = _constant_float(graph, name)
    if const is None:
        return None
    value, dq = const
    if dq is not None and dq[0].dtype == np.int32 and np.all(np.asarray(dq[2]) == 0):
        return value, (dq[0], dq[1])
    return value, None


class ExactConv:
    """The exact integer convolution behind a QuantizeLinear fed by Conv(DQ(x), DQ(w)[, bias])
    (ONNX Runtime's unfused QDQ form): 1-D and 2-D, groups, strides, pads, dilations."""

    def __init__(self, graph, qnode, lookup):
        self.ok = False
        conv = graph.producer.get(qnode.input[0])
        if conv is None or conv.op_type != "Conv":
            return
        attrs = {a.name: a for a in conv.attribute}
        if "auto_pad" in attrs and attrs["auto_pad"].s not in (b"", b"NOTSET"):
            return
        x, w = _dq_source(graph, conv.input[0]), _dq_source(graph, conv.input[1])
        if x is None or w is None or np.asarray(x[1]).size != 1:
            return
        self.x, self.w = lookup(x[0]), lookup(w[0])
        if self.x is None or self.w is None or self.w.ndim not in (3, 4) or \
                self.x.ndim != self.w.ndim:
            return
        out_channels = self.w.shape[0]
        if np.asarray(w[1]).size not in (1, out_channels) or (
                np.asarray(w[1]).size > 1 and w[3] % self.w.ndim != 0):
            return
        spatial = self.w.ndim - 2
        self.strides = list(attrs["strides"].ints) if "strides" in attrs else [1] * spatial
        self.dilations = list(attrs["dilations"].ints) if "dilations" in attrs else [1] * spatial
        pads = list(attrs["pads"].ints) if "pads" in attrs else [0] * (2 * spatial)
        self.begin = pads[:spatial]
        self.group = attrs["group"].i if "group" in attrs else 1
        self.sx, self.zx = np.float32(np.asarray(x[1]).reshape(())), int(np.asarray(x[2]))
        self.sw = np.broadcast_to(np.asarray(w[1], np.float32).reshape(-1), (out_channels,))
        self.zw = np.broadcast_to(np.asarray(w[2], np.int64).reshape(-1), (out_channels,))
        self.bias = self.bias_q = None
        if len(conv.input) > 2 and conv.input[2]:
            bias = _bias_dq(graph, conv.input[2])
            if bias is None:
                return
            self.bias, self.bias_q = bias
        self.ok = True

    def at(self, index, s_out):
        n, o, where = index[0], index[1], index[2:]
        per_group = self.w.shape[0] // self.group
        cin = self.w.shape[1]
        first = (o // per_group) * cin
        kernel = self.w.shape[2:]
        patch = np.zeros((cin,) + tuple(kernel), np.int64)
        xs = self.x[n, first:first + cin].astype(np.int64) - self.zx
        for offsets in np.ndindex(*kernel):
            position = [where[d] * self.strides[d] - self.begin[d] + offsets[d] *
                        self.dilations[d] for d in range(len(kernel))]
            if all(0 <= p < self.x.shape[2 + d] for d, p in enumerate(position)):
                patch[(slice(None),) + offsets] = xs[(slice(None),) + tuple(position)]
        wo = self.w[o].astype(np.int64) - int(self.zw[o])
        acc = int((patch * wo).sum())
        scale = float(self.sx) * float(self.sw[o])
        terms = float(np.abs(patch * wo).sum()) * scale
        bias = 0.0 if self.bias is None else float(np.asarray(self.bias).reshape(-1)[
            0 if self.bias.size == 1 else o])
        exact = (acc * scale + bias) / float(s_out)
        bound = ((wo.size + 3) * U * (terms + abs(bias))) / float(s_out) + 2 * U * abs(exact)
        multiplier = np.float32(np.float32(self.sx * self.sw[o]) / np.float32(s_out))
        epilogue = None
        if self.bias is None:
            epilogue = float(np.float32(np.float32(acc) * multiplier))
        elif self.bias_q is not None:
            bq, bs = self.bias_q
            bs = np.asarray(bs).reshape(-1)
            if np.float32(bs[0 if bs.size == 1 else o]) == np.float32(self.sx * self.sw[o]):
                b = int(np.asarray(bq).reshape(-1)[0 if bq.size == 1 else o])
                epilogue = float(np.float32(np.float32(acc + b) * multiplier))
        return acc, exact, epilogue, bound


def classify_ties(graph, name, octet_value, ort_value, differ, ort_all, lookup, ort_op=None):
    """Classifies the differing elements of an 8-bit tensor made by a QuantizeLinear."""
    qnode = graph.producer.get(name)
    if qnode is None or qnode.op_type != "QuantizeLinear":
        return {"classified": False,
                "why": "made by %s, not a QuantizeLinear" % graph.label(name)}
    if qnode.input[1] not in graph.constants or (len(qnode.input) > 2 and qnode.input[2] and
                                                 qnode.input[2] not in graph.constants):
        return {"classified": False, "why": "its QuantizeLinear's parameters are not constant"}
    shape = octet_value.shape
    axis = graph.attribute(qnode, "axis", 1)
    scale = _per_axis(graph.constants[qnode.input[1]].astype(np.float32), shape, axis)
    zero_const = graph.constants.get(qnode.input[2]) if len(qnode.input) > 2 else None
    zero = _per_axis(np.zeros((), np.int64) if zero_const is None else zero_const.astype(
        np.int64), shape, axis)
    q_octet = octet_value.astype(np.int64)
    q_ort = ort_value.astype(np.int64)  # in octet's terms (as_comparable)
    x_ort = ort_all.get(qnode.input[0])
    if x_ort is not None and (x_ort.dtype != np.float32 or x_ort.shape != shape):
        x_ort = None
    product = ExactProduct(graph, qnode, lookup)
    if not product.ok:
        product = ExactConv(graph, qnode, lookup)
    indices = np.argwhere(differ)[:MAX_ANALYZED]
    counts = {kind: 0 for kind in KINDS}
    integer_kernel = x_ort is None and ort_op in INTEGER_KERNELS
    example = None
    octet_off = 0
    for index in map(tuple, indices):
        qo, qr, s, z = int(q_octet[index]), int(q_ort[index]), scale[index], int(zero[index])
        r = float(np.float32(x_ort[index] / s)) if x_ort is not None else None
        exact = None
        if product.ok:
            acc, e, epilogue, bound = product.at(index, s)
            exact = (acc, e, epilogue, bound)
            if epilogue is not None and int(_round_half_even(epilogue)) + z != qo and \
                    qo not in _saturation(octet_value.dtype):
                octet_off += 1
        if integer_kernel:
            # Both requantize an integer accumulator with the same float multiplier, so with
            # exact accumulators they would agree: the difference is ORT's accumulator.
            kind = "unclassified"
            if exact is not None:
                mine = exact[2] if exact[2] is not None else exact[1]
                if int(_round_half_even(mine)) + z == qo or qo in _saturation(
                        octet_value.dtype):
                    kind = "ORT's integer kernel is not exact"
        elif abs(qo - qr) != 1:
            kind = "not a tie"
        else:
            half = (qo + qr) / 2.0 - z
            if exact is not None:
                kind = "tie" if abs(exact[1] - half) <= exact[3] else "not a tie"
            elif r is not None:
                kind = "tie" if abs(r - half) <= 1e-3 else "not a tie"
            else:
                kind = "unclassified"
        counts[kind] += 1
        better = kind == "tie" and not integer_kernel and example["kind"] != "tie" \
            if example else False
        if example is None or better:
            example = {"index": [int(i) for i in index], "kind": kind, "octet": qo, "ort": qr,
                       "zero_point": z, "ort_float": r}
            if exact is not None:
                example.update(accumulator=exact[0], exact=exact[1], octet_epilogue=exact[2],
                               error_bound=exact[3])
    result = {"classified": True, "analyzed": int(len(indices)), "counts": counts,
              "integer_kernel": integer_kernel, "no_vnni": measure.ort_u8s8_saturates(),
              "example": example, "exact_known": product.ok, "ort_float_known": x_ort is not None,
              "octet_not_its_epilogue": octet_off, "ort_op": ort_op}
    result["text"] = _tie_text(result)
    return result


def _saturation(dtype):
    info = np.iinfo(dtype)
    return (int(info.min), int(info.max))


def _tie_text(t):
    c = t["counts"]
    parts = []
    if c["tie"]:
        parts.append("%d rounding tie%s of the float path" % (c["tie"], "" if c["tie"] == 1
                                                              else "s"))
    if c["not a tie"]:
        parts.append("%d not rounding ties" % c["not a tie"] if c["not a tie"] > 1 else
                     "1 not a rounding tie")
    if c["ORT's integer kernel is not exact"]:
        parts.append("%d where ORT's %s is not exact" % (
            c["ORT's integer kernel is not exact"], t["ort_op"]))
    if c["unclassified"]:
        parts.append("%d unclassified (%s)" % (
            c["unclassified"], "octet differs from its exact product too" if t["integer_kernel"]
            and t["exact_known"] else "no float input of ORT's QuantizeLinear and no MatMul or "
            "Conv group to recompute"))
    text = ", ".join(parts)
    e = t["example"]
    if e:
        z = e["zero_point"]
        text += "; e.g. [%s]%s: " % (", ".join(map(str, e["index"])),
                                     "" if z == 0 else " (steps before zero point %d)" % z)
        if "accumulator" in e:
            text += "accumulator %d, exact %.6f -> %d" % (
                e["accumulator"], e["exact"], int(_round_half_even(e["exact"])))
            if e["octet_epilogue"] is not None:
                text += ", octet's epilogue %.6f -> %d" % (e["octet_epilogue"], e["octet"] - z)
            else:
                text += ", octet %d" % (e["octet"] - z)
        else:
            text += "octet %d" % (e["octet"] - z)
        if e["ort_float"] is not None:
            text += "; ORT's float path %.6f -> %d%s" % (
                e["ort_float"], e["ort"] - z,
                " (half to even)" if e["ort_float"] % 1 == 0.5 else "")
        else:
            text += "; ORT%s gives %d" % (" (%s)" % t["ort_op"] if t["ort_op"] else "",
                                          e["ort"] - z)
        if "error_bound" in e and not t["integer_kernel"]:
            text += "; the float path's error bound is %.2g step" % e["error_bound"]
        if t["integer_kernel"] and t["counts"]["ORT's integer kernel is not exact"]:
            text += ". Both engines requantize an integer accumulator with the same " \
                "multiplier, so ORT's accumulator is not the exact sum"
            saturating = ("QLinearMatMul", "QLinearConv", "QGemm", "MatMulInteger",
                          "ConvInteger")
            if t["no_vnni"] and t["ort_op"] in saturating:
                text += " (this CPU has no VNNI, where ONNX Runtime's u8 x s8 kernels " \
                    "saturate 16-bit pair sums)"
    if t["octet_not_its_epilogue"]:
        text += "; WARNING: %d of octet's values are not its documented epilogue's" % t[
            "octet_not_its_epilogue"]
    return text


# ---------------------------------------------------------------- vs ONNX Runtime


def compare_vs_ort(args, feeds, progress, scratch):
    graph = Graph(args.model)
    progress.say("running octet with every intermediate kept", phase=True)
    octet_all, octet_order = octet_values(args.model, feeds, args.threads)
    progress.say("running onnxruntime (ORT_%s) with every value of its optimized graph as an "
                 "output" % args.ort_level.upper(), phase=True)
    ort_all, faithful, ort_count, ort_graph = ort_values(args.model, feeds, args.threads,
                                                         args.ort_level, scratch)
    progress.say("comparing", phase=True)
    aliases = {name: alias for name, alias in ort_aliases(graph, ort_graph).items()
               if alias[0] in ort_all}
    position = {name: i for i, name in enumerate(octet_order)}
    common = sorted((n for n in octet_all if n in ort_all or n in aliases),
                    key=lambda n: (graph.order.get(n, len(graph.nodes)), position[n]))

    def lookup(name):
        for source in (octet_all, feeds, graph.constants):
            if name in source:
                return np.asarray(source[name])
        return None

    rows, status, pending = [], {}, {}
    for name in common:
        ort_name, shift = aliases.get(name, (name, 0)) if name not in ort_all else (name, 0)
        a = np.asarray(octet_all[name])
        b, why = as_comparable(a, np.asarray(ort_all[ort_name]), shift)
        ort_node = ort_graph.producer.get(ort_name)
        row = {"name": name, "producer": graph.label(name), "dtype": str(a.dtype),
               "shape": list(a.shape), "ort_name": ort_name, "zero_point_shift": shift,
               "ort_producer": ort_node.op_type if ort_node is not None else None}
        if b is None:
            row.update(comparable=False, note=why)
            status[name] = "incomparable"
        else:
            diff, differ = difference(a, b)
            row.update(comparable=True, **diff)
            status[name] = "differ" if diff["differing"] else "equal"
            if diff["differing"]:
                pending[name] = (a, b, differ)
        rows.append(row)
    upstream = graph.nearest_compared(set(common))
    for row in rows:
        if status[row["name"]] != "differ":
            continue
        above = upstream.get(row["name"], set())
        states = {status[n] for n in above}
        row["inputs"] = ("agree" if states <= {"equal"} else
                         "differ" if "differ" in states else "unknown")
        row["compared_inputs"] = sorted(above, key=lambda n: graph.order.get(n, 0))
        a, b, differ = pending[row["name"]]
        if row["inputs"] != "agree":
            continue  # inherited: its inputs already differ
        if a.dtype.itemsize == 1 and a.dtype.kind in "iu":
            row["ties"] = classify_ties(graph, row["name"], a, b, differ, ort_all, lookup,
                                        row["ort_producer"])
        elif a.dtype.kind == "f" and row.get("relative_to_largest") is not None:
            row["float_rounding"] = row["relative_to_largest"] <= 2.0 ** -20
    return {"rows": rows, "octet_values": len(octet_all), "ort_values": ort_count,
            "ort_faithful": faithful, "compared": len(common),
            "outputs": [r for r in rows if r["name"] in graph.outputs]}


def _row_text(row):
    if not row["comparable"]:
        return row["note"]
    text = "%d of %d differ, max |d| %.6g" % (row["differing"], row["total"],
                                              row["max_abs_diff"])
    if row.get("relative_to_largest") is not None:
        text += " (%.2g of the largest |value|%s)" % (
            row["relative_to_largest"], ", float32 rounding level"
            if row.get("float_rounding") else "")
    if "by_step" in row:
        text += " (%s)" % ", ".join("%s step%s: %d" % (s, "" if s == "1" else "s", c)
                                    for s, c in row["by_step"].items())
    return text


def print_vs_ort(result, report, show, out):
    w = out.write
    rows = result["rows"]
    differing = [r for r in rows if r.get("differing") or not r["comparable"]]
    w("octet keeps %d values (after its rewrites); onnxruntime %d (its optimized graph rerun "
      "with every value an output: %s); %d values of the same name are compared\n" % (
          result["octet_values"], result["ort_values"],
          "its outputs equal the plain session's" if result["ort_faithful"] else
          "WARNING: its outputs differ from the plain session's", result["compared"]))
    if not differing:
        w("\nevery compared value is equal, bit for bit\n")
        return
    origins = [r for r in differing if r.get("inputs") == "agree"]
    first = differing[0]
    w("\n%d of %d compared values differ. The first in graph order: '%s' (%s, %s %s): %s\n" % (
        len(differing), len(rows), first["name"], first["producer"], first["dtype"],
        first["shape"], _row_text(first)))
    if first.get("inputs") == "agree":
        w("  its compared inputs agree: this is where the engines part\n")
    if first.get("ties"):
        w("  %s\n" % first["ties"].get("text", first["ties"].get("why")))
    w("\nwhere the engines part (differing values whose compared inputs agree): %d\n"
      % len(origins))
    for r in origins[:show]:
        if r is first:
            w("  %s: the first, above\n" % r["name"])
            continue
        w("  %s (%s, %s %s): %s\n"
          % (r["name"], r["producer"], r["dtype"], r["shape"], _row_text(r)))
        if r.get("ties"):
            w("    %s\n" % (r["ties"].get("text") or r["ties"]["why"]))
    if len(origins) > show:
        w("  ... %d more (--show, --json)\n" % (len(origins) - show))
    w("\nfirst %d differing values in graph order (of %d):\n"
      % (min(show, len(differing)), len(differing)))
    table = []
    for i, r in enumerate(differing[:show]):
        ties = r.get("ties") or {}
        table.append([i + 1, _short(r["name"]), r["producer"].split(" ")[0], r["dtype"],
                      "x".join(map(str, r["shape"])),
                      "%d/%d" % (r["differing"], r["total"]) if r["comparable"] else "-",
                      "%.3g" % r["max_abs_diff"] if r["comparable"] else "-",
                      r.get("inputs", "-"),
                      "%d of %d" % (ties["counts"]["tie"], ties["analyzed"])
                      if ties.get("classified") else "-"])
    w(_command.format_table(["#", "value", "made by", "dtype", "shape", "differ", "max|d|",
                             "inputs", "ties"], table,
                            align=["<", "<", "<", "<", "<", ">", ">", "<", ">"]) + "\n")
    outputs = result["outputs"]
    if outputs:
        w("\ngraph outputs:\n")
        for r in outputs:
            w("  %s: %s\n" % (r["name"], "equal" if r.get("differing") == 0 else _row_text(r)))


def _short(name, width=48):
    return name if len(name) <= width else "..." + name[-(width - 3):]


# ---------------------------------------------------------------- vs the float model


def compare_vs_float(args, feeds, progress, scratch):
    _command.check_model_path(args.vs_float)
    graph = Graph(args.model)
    progress.say("running octet with every intermediate kept", phase=True)
    octet_all, octet_order = octet_values(args.model, feeds, args.threads)
    progress.say("running the float model in onnxruntime with every value an output",
                 phase=True)
    # The float model as written (its values are the reference, not ORT's fusions of them).
    float_all, faithful, count, _ = ort_values(args.vs_float, feeds, args.threads,
                                               args.ort_level, scratch, as_optimized=False)
    float_all = dict(feeds, **float_all)  # the float model's inputs are values too
    rows = []
    position = {name: i for i, name in enumerate(octet_order)}
    in_order = sorted(octet_all, key=lambda n: (graph.order.get(n, len(graph.nodes)),
                                                position[n]))
    for name in in_order:
        value = np.asarray(octet_all[name])
        target, how, step = name, "same name", None
        if value.dtype.kind == "f" and name in float_all:
            ours = value.astype(np.float64)
        elif value.dtype in (np.int8, np.uint8) and graph.producer.get(name) is not None and \
                graph.producer[name].op_type == "QuantizeLinear":
            q = graph.producer[name]
            target = q.input[0]
            if target not in float_all or q.input[1] not in graph.constants:
                continue
            axis = graph.attribute(q, "axis", 1)
            scale = _per_axis(graph.constants[q.input[1]].astype(np.float64), value.shape, axis)
            zc = graph.constants.get(q.input[2]) if len(q.input) > 2 else None
            zero = _per_axis(np.zeros(()) if zc is None else zc.astype(np.float64), value.shape,
                             axis)
            ours = (value.astype(np.float64) - zero) * scale
            how, step = "dequantized", scale
        else:
            continue
        ref = np.asarray(float_all[target])
        if ref.shape != ours.shape or ref.dtype.kind != "f":
            continue
        ref = ref.astype(np.float64)
        d = np.abs(ours - ref)
        norm = np.linalg.norm(ours) * np.linalg.norm(ref)
        row = {"name": name, "float_name": target, "producer": graph.label(name), "how": how,
               "shape": list(value.shape), "max_abs_diff": float(d.max()) if d.size else 0.0,
               "cosine": float((ours * ref).sum() / norm) if norm > 0 else 1.0,
               "rel_rms": float(np.sqrt((d ** 2).mean())
                                / max(np.sqrt((ref ** 2).mean()), 1e-30)) if d.size else 0.0}
        if step is not None:
            row["max_steps"] = float((d / step).max()) if d.size else 0.0
        rows.append(row)
    cosine = {r["name"]: r["cosine"] for r in rows}
    upstream = graph.nearest_compared(set(cosine))
    for r in rows:
        above = [cosine[n] for n in upstream.get(r["name"], ())]
        r["inputs_cosine"] = min(above) if above else 1.0
        r["loss"] = r["inputs_cosine"] - r["cosine"]
    return {"rows": rows, "octet_values": len(octet_all), "float_values": count,
            "ort_faithful": faithful,
            "outputs": [r for r in rows if r["name"] in graph.outputs]}


def print_vs_float(result, show, out):
    w = out.write
    rows = result["rows"]
    w("octet keeps %d values; the float model %d in onnxruntime (%s); %d of octet's values "
      "have a float counterpart (8-bit ones dequantized, against their QuantizeLinear's float "
      "input)\n" % (result["octet_values"], result["float_values"],
                    "its outputs equal its plain session's" if result["ort_faithful"] else
                    "WARNING: its outputs differ from its plain session's", len(rows)))
    if not rows:
        return
    losers = sorted(rows, key=lambda r: -r["loss"])[:show]
    losers.sort(key=rows.index)
    w("\nwhere the distance from the float model grows most (cosine against the float tensor, "
      "and the lowest cosine among its compared inputs), top %d in graph order:\n"
      % len(losers))
    table = [[_short(r["name"]), r["producer"].split(" ")[0], "x".join(map(str, r["shape"])),
              "%.6f" % r["inputs_cosine"], "%.6f" % r["cosine"], "%.2g" % r["loss"],
              "%.3g" % r["max_abs_diff"], "%.2f" % r["max_steps"] if "max_steps" in r else "-"]
             for r in losers]
    w(_command.format_table(["value", "made by", "shape", "inputs cos", "cosine", "loss",
                             "max|d|", "max steps"], table,
                            align=["<", "<", "<", ">", ">", ">", ">", ">"]) + "\n")
    worst = min(rows, key=lambda r: r["cosine"])
    w("\nlowest cosine: '%s' (%s) %.6f\n" % (worst["name"], worst["producer"], worst["cosine"]))
    for r in result["outputs"]:
        w("output %s: cosine %.6f, max |d| %.6g, relative RMS %.3g\n" % (
            r["name"], r["cosine"], r["max_abs_diff"], r["rel_rms"]))


# ---------------------------------------------------------------- the command


def main(argv):
    args = parse_args(argv)
    import octet
    _command.check_model_path(args.model)
    _command.require("onnx", "octet compare", "onnx")
    ort = _command.require("onnxruntime", "octet compare", "onnxruntime==1.31.1")
    progress = _command.Progress(enabled=not args.quiet)
    progress.say("octet compare: loading %s" % args.model, phase=True)
    given = feeds_mod.read_input_specs(args.input)
    probe = octet.InferenceSession(args.model, threads=1)
    feeds, notes = feeds_mod.make_feeds(args.model, feeds_mod.declared_inputs(probe), given,
                                        args.shapes, args.seed)
    del probe
    report = {"schema": SCHEMA, "model": os.path.abspath(args.model),
              "against": "float" if args.vs_float else "onnxruntime",
              "float_model": os.path.abspath(args.vs_float) if args.vs_float else None,
              "ort_level": args.ort_level, "host": measure.host_line(octet),
              "versions": {"onnxruntime": ort.__version__},
              "inputs": [{"name": n, "source": t} for n, t in notes if n],
              "input_notes": [t for n, t in notes if not n]}
    with tempfile.TemporaryDirectory(prefix="octet_compare_") as scratch:
        if args.vs_float:
            result = compare_vs_float(args, feeds, progress, scratch)
        else:
            result = compare_vs_ort(args, feeds, progress, scratch)
    progress.done()
    report.update(result)
    out = sys.stdout
    out.write("octet compare %s against %s\n" % (
        args.model, "the float model %s" % args.vs_float if args.vs_float else
        "onnxruntime %s (ORT_%s)" % (ort.__version__, {
            "all": "ENABLE_ALL", "extended": "ENABLE_EXTENDED", "basic": "ENABLE_BASIC",
            "disable": "DISABLE_ALL"}[args.ort_level])))
    out.write("host: %s\n" % report["host"])
    for item in report["inputs"]:
        out.write("input %s: %s\n" % (item["name"], item["source"]))
    for note in report["input_notes"]:
        out.write("inputs: %s\n" % note)
    if args.vs_float:
        print_vs_float(result, args.show, out)
    else:
        print_vs_ort(result, report, args.show, out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=_json_default)
        out.write("wrote %s\n" % args.json)
    return 0


def _json_default(value):
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    raise TypeError("not JSON: %r" % type(value))


def cli(argv=None):
    return _command.run(main, sys.argv[1:] if argv is None else argv)


if __name__ == "__main__":
    sys.exit(cli())
