"""Inputs for `octet bench` and `octet compare`: read from .npy/.npz files, or invented from
the model's declared inputs (docs/usage.md, "Invented inputs").

An input that is not given is made from its declared type and shape, its symbolic dims set
by --shape (or 1), and what the graph does with it:
- float inputs: standard normal values;
- integer inputs that index a Gather (an embedding table: token ids, positions, segment
  ids), found through Cast / Reshape / Unsqueeze / Squeeze / Flatten / Identity: uniform in
  [0, the table's length along the Gather's axis), the smallest table if there are several;
- 8-bit inputs read as quantized data (DequantizeLinear's x, the data operands of QLinear*,
  MatMulInteger, ConvInteger): uniform over the type's range;
- integer or bool inputs named like a mask ("mask" in the name): all ones (nothing masked);
- anything else cannot be invented and is an error that names the input.
Values come from numpy's default_rng(seed), so a run is repeatable.
"""

import os
import re

import numpy as np

# ONNX TensorProto codes.
_FLOAT_CODES = {1: np.float32, 10: np.float16, 11: np.float64}
_INT_CODES = {2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32, 7: np.int64,
              12: np.uint32, 13: np.uint64}
_BOOL = 9
_PASS_THROUGH = {"Cast", "Reshape", "Unsqueeze", "Squeeze", "Flatten", "Identity"}
# op -> input positions that read 8-bit quantized data.
_QUANTIZED_DATA = {"DequantizeLinear": (0,), "QLinearMatMul": (0, 3), "QLinearConv": (0, 3),
                   "MatMulInteger": (0, 1), "ConvInteger": (0, 1), "QLinearAdd": (0, 3),
                   "QLinearMul": (0, 3), "QGemm": (0, 3), "MatMulIntegerToFloat": (0, 1)}


class InputError(Exception):
    """A bad --input / --shape or an input that cannot be invented: a one-line message."""


def add_arguments(parser):
    """The feed options of `octet bench` and `octet compare`: --input, --shape, --seed."""
    parser.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy",
                        help="feed graph input NAME from a .npy file; FILE.npz feeds every "
                        "array of an np.savez archive to the input named like its key "
                        "(repeatable)")
    parser.add_argument("--shape", action="append", default=[], metavar="NAME=DIMS",
                        help="shape of an invented input, e.g. input_ids=1x128; sets the "
                        "model's symbolic dims (repeatable)")
    parser.add_argument("--seed", type=int, default=0, metavar="N",
                        help="seed of the invented inputs (default 0)")


def parse_shape(spec):
    """'NAME=1x128' -> ('NAME', (1, 128))."""
    name, sep, dims = spec.partition("=")
    if not sep or not name or not re.fullmatch(r"\d+(x\d+)*", dims or ""):
        raise InputError("--shape takes NAME=DIMS with DIMS like 1x128 (positive integers "
                         "joined by x), got '%s'" % spec)
    shape = tuple(int(d) for d in dims.split("x"))
    if 0 in shape:
        raise InputError("--shape %s: dims must be positive" % spec)
    return name, shape


def parse_shapes(specs):
    """Every --shape NAME=DIMS -> {name: dims}; a name given twice is an error."""
    shapes = {}
    for spec in specs:
        name, shape = parse_shape(spec)
        if name in shapes:
            raise InputError("--shape %s is given twice" % name)
        shapes[name] = shape
    return shapes


def read_input_specs(specs):
    """--input NAME=FILE.npy or FILE.npz (every array, by key) -> {name: array}."""
    feeds = {}
    for spec in specs:
        name, sep, path = spec.partition("=")
        if not sep:
            path, name = spec, None
            if not path.endswith(".npz"):
                raise InputError("--input takes NAME=FILE.npy or FILE.npz, got '%s'" % spec)
        elif not name or not path:
            raise InputError("--input takes NAME=FILE.npy, got '%s'" % spec)
        if not os.path.exists(path):
            raise InputError("--input %s: no such file '%s'" % (spec, path))
        try:
            if name is None:
                with np.load(path, allow_pickle=False) as saved:
                    arrays = {key: saved[key] for key in saved.files}
            else:
                arrays = {name: np.load(path, allow_pickle=False)}
        except Exception as error:  # numpy's errors: ValueError, OSError, zipfile errors
            raise InputError("--input %s: cannot read '%s': %s"
                             % (spec, path, str(error).splitlines()[0])) from None
        for key, array in arrays.items():
            if not isinstance(array, np.ndarray):
                raise InputError("--input %s: '%s' holds no single array" % (spec, path))
            if key in feeds:
                raise InputError("input '%s' is given twice" % key)
            feeds[key] = array
    return feeds


class _Graph:
    """What input invention needs of an ONNX graph: consumers and initializer shapes."""

    def __init__(self, model):
        graph = model.graph
        self.consumers = {}
        self.producer = {}
        for node in graph.node:
            for i, name in enumerate(node.input):
                if name:
                    self.consumers.setdefault(name, []).append((node, i))
            for name in node.output:
                self.producer[name] = node
        self.init_shapes = {t.name: tuple(t.dims) for t in graph.initializer}
        for node in graph.node:  # Constant nodes hold tables too
            if node.op_type == "Constant":
                for attr in node.attribute:
                    if attr.name == "value":
                        self.init_shapes[node.output[0]] = tuple(attr.t.dims)

    def table_shape(self, name, depth=0):
        """Shape of a constant table, looking through DequantizeLinear / Cast / Identity."""
        if name in self.init_shapes:
            return self.init_shapes[name]
        node = self.producer.get(name)
        if node is not None and depth < 8 and node.op_type in (
                "DequantizeLinear", "Cast", "Identity"):
            return self.table_shape(node.input[0], depth + 1)
        return None

    def uses(self, name, depth=0):
        """(node, input index) of every consumer of `name`, through pass-through ops."""
        found = []
        for node, i in self.consumers.get(name, []):
            if node.op_type in _PASS_THROUGH and i == 0 and depth < 8:
                for out in node.output:
                    found += self.uses(out, depth + 1)
            else:
                found.append((node, i))
        return found

    def vocabulary(self, name):
        """Smallest length of the tables `name` indexes (Gather indices, com.microsoft
        EmbedLayerNormalization ids), or None."""
        sizes = []
        for node, i in self.uses(name):
            shape = None
            if node.op_type == "Gather" and i == 1:
                axis = next((a.i for a in node.attribute if a.name == "axis"), 0)
                shape = self.table_shape(node.input[0])
                if shape is not None and -len(shape) <= axis < len(shape):
                    sizes.append(shape[axis])
            elif node.op_type == "EmbedLayerNormalization" and i in (0, 1):
                table = node.input[2 if i == 0 else 4] if len(node.input) > (2 if i == 0 else 4) \
                    else ""
                shape = self.table_shape(table) if table else None
                if shape:
                    sizes.append(shape[0])
        return min(sizes) if sizes else None

    def quantized_data(self, name):
        return any(i in _QUANTIZED_DATA.get(node.op_type, ()) for node, i in self.uses(name))


def _dims_text(shape):
    return "[%s]" % ",".join("?" if d is None else str(d) for d in shape)


def resolve_shapes(declared, shapes, given):
    """Concrete shapes of the inputs to invent. declared: [(name, dtype code, dims)] with
    dims of int / symbol str / None (or None for an unknown rank); shapes: {name: tuple}
    from --shape; given: names fed from files. Returns ({name: shape}, notes) where notes
    say which dims defaulted to 1."""
    names = [name for name, _, _ in declared]
    for name in shapes:
        if name not in names:
            raise InputError("--shape %s: the model has no input '%s'; its inputs are: %s"
                             % (name, name, ", ".join(names)))
        if name in given:
            raise InputError("--shape %s: that input is read from a file, which sets its shape"
                             % name)
    symbols, notes = {}, []
    for name, _, dims in declared:  # symbols bound by --shape (or files) first
        shape = shapes.get(name, given.get(name))
        if shape is None or dims is None:
            continue
        if name in given:  # a file that does not fit is the session's error to report
            if len(shape) == len(dims):
                for d, v in zip(dims, shape):
                    if isinstance(d, str):
                        symbols.setdefault(d, v)
            continue
        if len(shape) != len(dims):
            raise InputError("--shape %s=%s: input '%s' has rank %d %s" % (
                name, "x".join(map(str, shape)), name, len(dims), _dims_text(dims)))
        for i, (d, v) in enumerate(zip(dims, shape)):
            if isinstance(d, int) and d != v:
                raise InputError("--shape %s=%s: dim %d of input '%s' is %d in the model %s" % (
                    name, "x".join(map(str, shape)), i, name, d, _dims_text(dims)))
            if isinstance(d, str):
                if symbols.setdefault(d, v) != v:
                    raise InputError("--shape %s=%s: dim '%s' is already %d from another input"
                                     % (name, "x".join(map(str, shape)), d, symbols[d]))
    result = {}
    for name, _, dims in declared:
        if name in given:
            continue
        if name in shapes:
            result[name] = shapes[name]
            continue
        if dims is None:
            raise InputError("input '%s' has no declared shape; set it with --shape %s=DIMS "
                             "or pass --input %s=FILE.npy" % (name, name, name))
        shape = []
        for i, d in enumerate(dims):
            if isinstance(d, int):
                shape.append(d)
            elif isinstance(d, str) and d in symbols:
                shape.append(symbols[d])
            else:
                label = d if isinstance(d, str) else "dim %d" % i
                notes.append("%s=1" % label if isinstance(d, str) else "%s.%s=1" % (name, label))
                if isinstance(d, str):
                    symbols[d] = 1
                shape.append(1)
        result[name] = tuple(shape)
    return result, sorted(set(notes))


def make_feeds(model_path, declared, given, shapes, seed=0):
    """Feeds for every declared input: the given arrays, the rest invented. declared:
    [(name, dtype code, dims)]. Returns (feeds, descriptions) where descriptions has one
    (name, text) per input saying where its values came from."""
    import onnx
    unknown = [name for name in given if name not in {n for n, _, _ in declared}]
    if unknown:
        raise InputError("--input %s: the model has no input '%s'; its inputs are: %s" % (
            unknown[0], unknown[0], ", ".join(n for n, _, _ in declared)))
    concrete, notes = resolve_shapes(declared, shapes,
                                     {name: array.shape for name, array in given.items()})
    graph = None
    if any(name not in given for name, _, _ in declared):
        graph = _Graph(onnx.load(model_path, load_external_data=False))
    rng = np.random.default_rng(seed)
    feeds, descriptions = {}, []
    for name, code, _ in declared:
        if name in given:
            feeds[name] = given[name]
            descriptions.append((name, "%s %s from file" % (
                given[name].dtype, _dims_text(given[name].shape))))
            continue
        shape = concrete[name]
        dims = _dims_text(shape)
        if code in _FLOAT_CODES:
            feeds[name] = rng.standard_normal(shape).astype(_FLOAT_CODES[code])
            descriptions.append((name, "%s %s invented: normal(0, 1)" % (
                np.dtype(_FLOAT_CODES[code]), dims)))
            continue
        if code in _INT_CODES or code == _BOOL:
            dtype = np.dtype(np.bool_) if code == _BOOL else np.dtype(_INT_CODES[code])
            vocabulary = graph.vocabulary(name) if code != _BOOL else None
            if vocabulary:
                feeds[name] = rng.integers(0, vocabulary, size=shape).astype(dtype)
                descriptions.append((name, "%s %s invented: ids in [0, %d) (the table it "
                                     "indexes)" % (dtype, dims, vocabulary)))
                continue
            if dtype.itemsize == 1 and code != _BOOL and graph.quantized_data(name):
                info = np.iinfo(dtype)
                feeds[name] = rng.integers(info.min, info.max + 1, size=shape).astype(dtype)
                descriptions.append((name, "%s %s invented: uniform over [%d, %d] (quantized "
                                     "data)" % (dtype, dims, info.min, info.max)))
                continue
            if "mask" in name.lower():
                feeds[name] = np.ones(shape, dtype)
                descriptions.append((name, "%s %s invented: all ones (a mask)" % (dtype, dims)))
                continue
            raise InputError(
                "cannot invent values for input '%s' (%s %s): it indexes no Gather table, is not "
                "quantized data and is not named like a mask; pass --input %s=FILE.npy"
                % (name, dtype, dims, name))
        raise InputError("cannot invent values for input '%s' (ONNX type %d); pass --input "
                         "%s=FILE.npy" % (name, code, name))
    if notes:
        descriptions.append(("", "symbolic dims not set by --shape: %s" % ", ".join(notes)))
    return feeds, descriptions


def declared_inputs(session):
    """[(name, dtype code, dims)] of an octet.InferenceSession's inputs."""
    result = []
    for name, code, _, dims, has_shape in session._session.inputs():
        result.append((name, code, list(dims) if has_shape else None))
    return result
