"""octet: exact integer inference of quantized ONNX models on the CPU.

The API mirrors onnxruntime's::

    import octet
    sess = octet.InferenceSession("model.int8.onnx", threads=1)
    outputs = sess.run(None, {"x": x})
"""

import operator
import os

import ml_dtypes
import numpy as np

from . import _octet

__all__ = [
    "InferenceSession", "NodeArg", "OctetError", "active_isa", "supported_isas", "inspect",
    "list_ops"
]

OctetError = _octet.OctetError
OctetError.__doc__ = "Raised for every octet failure; str(error) is the one-line message."
OctetError.__module__ = "octet"

# ONNX TensorProto data type -> the numpy dtype users pass and get back.
_NUMPY_TYPE = {
    1: np.dtype(np.float32),
    2: np.dtype(np.uint8),
    3: np.dtype(np.int8),
    4: np.dtype(np.uint16),
    5: np.dtype(np.int16),
    6: np.dtype(np.int32),
    7: np.dtype(np.int64),
    9: np.dtype(np.bool_),
    10: np.dtype(np.float16),
    11: np.dtype(np.float64),
    12: np.dtype(np.uint32),
    13: np.dtype(np.uint64),
    16: np.dtype(ml_dtypes.bfloat16),
    17: np.dtype(ml_dtypes.float8_e4m3fn),
    18: np.dtype(ml_dtypes.float8_e4m3fnuz),
    19: np.dtype(ml_dtypes.float8_e5m2),
    20: np.dtype(ml_dtypes.float8_e5m2fnuz),
    21: np.dtype(ml_dtypes.uint4),
    22: np.dtype(ml_dtypes.int4),
}
_INT4, _UINT4, _BFLOAT16, _FLOAT8 = 22, 21, 16, (17, 18, 19, 20)


class NodeArg:
    """A graph input or output as onnxruntime describes it."""

    def __init__(self, name, type_name, shape):
        self.name = name
        self.type = "tensor(%s)" % type_name
        self.shape = shape  # ints, symbol strings, None for unknown dims; [] if unknown rank

    def __repr__(self):
        return "NodeArg(name=%r, type=%r, shape=%r)" % (self.name, self.type, self.shape)


def _to_storage(array, code):
    """C-contiguous array holding the bytes octet expects for ONNX type code."""
    if not array.flags.c_contiguous:
        array = array.copy(order="C")
    if code in (_INT4, _UINT4):
        # ml_dtypes keeps a 4-bit value in the low nibble; octet holds one value per byte.
        nibbles = array.view(np.uint8) & 0x0F
        if code == _UINT4:
            return nibbles
        return np.where(nibbles >= 8, nibbles.astype(np.int16) - 16, nibbles).astype(np.int8)
    if code == _BFLOAT16:
        return array.view(np.uint16)
    if code in _FLOAT8:
        return array.view(np.uint8)
    return array


def _from_storage(code, storage):
    dtype = _NUMPY_TYPE.get(code)
    if dtype is None:
        raise OctetError("output of ONNX type %d has no numpy equivalent" % code)
    if code in (_INT4, _UINT4):
        return (storage.view(np.uint8) & 0x0F).view(dtype)
    return storage.view(dtype)


class InferenceSession:
    """Loads a model once; run() executes it.

    model: a path (str or os.PathLike) to an .onnx file, or the serialized model
        bytes (bytes, bytearray, memoryview: a bytes object that does not parse as a path is
        never guessed at; pass a path as str or os.PathLike).
    threads: worker threads (0 = one per core); results never depend on it.
    float_matmul: "float" (as written) or "int8": float MatMuls with a constant 2-D weight
        run on the int8 GEMM (weights per column, activations per row, amax/127), an
        approximation of the float product (docs/ort-ep.md, "The forward route"), and a
        4-bit DequantizeLinear -> MatMul takes MatMulNBits' accuracy level 4 arithmetic.
    keep_intermediates: keep every value the graph computes so that run() can return any
        of get_intermediates() by name (costs their memory; results are unchanged).
    max_tensor_bytes: the largest tensor the session may allocate (None: OCTET_MAX_TENSOR_BYTES,
        else a quarter of physical memory); a larger initializer or run-time tensor raises
        OctetError before anything is allocated.
    last_row_outputs: names of graph outputs wanted for their last row only (the last index
        of axis -2, e.g. a decoder's "logits" when generating). Each one a product of
        independent rows makes (MatMul, MatMulNBits, optionally + a bias) is computed for
        that row alone and returned as [..., 1, N], with the bits it has in the whole
        output; others stay whole (get_outputs() shows which: a 1 at axis -2). A name that
        is not a graph output raises OctetError.

    Every failure raises OctetError. run() may be called from several threads at once (the
    GIL is released while octet runs; runs of one session are serialized).
    """

    def __init__(self, path_or_bytes, threads=1, float_matmul="float", keep_intermediates=False,
                 max_tensor_bytes=None, last_row_outputs=()):
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            model, is_path = bytes(path_or_bytes), False
        else:
            try:
                model, is_path = os.fsencode(os.fspath(path_or_bytes)), True
            except TypeError:
                raise OctetError("model must be a path (str or os.PathLike) or the model's bytes, "
                                 "got %s" % type(path_or_bytes).__name__) from None
        threads = _integer(threads, "threads", 0, (1 << 31) - 1)
        max_tensor_bytes = 0 if max_tensor_bytes is None else _integer(
            max_tensor_bytes, "max_tensor_bytes", 1, (1 << 64) - 1)
        names = None if isinstance(last_row_outputs, (str, bytes)) else _names(last_row_outputs)
        if names is None:
            raise OctetError("last_row_outputs must be a list of output names, got %r"
                             % (last_row_outputs,))
        self._session = _octet.Session(model, is_path, threads, str(float_matmul),
                                       bool(keep_intermediates), max_tensor_bytes, names)
        self._inputs = [NodeArg(n, t, s) for n, _, t, s, _ in self._session.inputs()]
        self._outputs = [NodeArg(n, t, s) for n, _, t, s, _ in self._session.outputs()]
        self._input_codes = {n: code for n, code, _, _, _ in self._session.inputs()}

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_intermediates(self):
        """The values the nodes compute besides the outputs, in the order they run, after
        octet's rewrites (a value folded into a fused node is not among them)."""
        return [NodeArg(n, t, s) for n, _, t, s, _ in self._session.intermediates()]

    def set_profiling(self, on=True):
        """Times every kernel call by op type from now on (or stops); see profile()."""
        self._session.set_profiling(bool(on))

    def profile(self):
        """Kernel time summed over the profiled runs (set_profiling, or OCTET_PROFILE=1 from
        creation): {"runs": n, "ops": [{"op", "seconds", "calls"}, ...]}, most time first."""
        runs, ops = self._session.profile()
        return {"runs": runs,
                "ops": [{"op": op, "seconds": seconds, "calls": calls}
                        for op, seconds, calls in ops]}

    def new_kv_cache(self, reserve_rows=0):
        """A decoder's KV cache for run(..., kv_cache=): the model's past key and value inputs
        are then its rows, and each run appends the step's new rows to it in place instead
        of copying the whole cache into the present outputs (the bits are the same). Its
        `inputs` are the past inputs it stands for (not fed with it), its `outputs` the
        presents (returned only when output_names names them), `length` the positions it
        holds; `truncate(n)` keeps the first n. reserve_rows: room per head before it grows. Raises OctetError when the model
        has no cache octet can hold (docs/usage.md, "KV cache")."""
        return self._session.new_kv_cache(_integer(reserve_rows, "reserve_rows", 0, (1 << 62)))

    def run(self, output_names, input_feed, kv_cache=None):
        """Returns a list of numpy arrays, one per name in output_names (all if None).
        kv_cache: one from new_kv_cache(); a failed run leaves it as it was."""
        if kv_cache is not None and not isinstance(kv_cache, _octet.KvCache):
            raise OctetError("kv_cache must come from new_kv_cache(), got %s"
                             % type(kv_cache).__name__)
        if not isinstance(input_feed, dict):
            raise OctetError("input_feed must be a dict {input name: numpy array}")
        feeds = []
        for name, value in input_feed.items():
            code = self._input_codes.get(name) if isinstance(name, str) else None
            try:
                array = np.asarray(value)
            except Exception as e:  # ragged lists, objects numpy cannot convert
                raise OctetError("input '%s' is not convertible to a numpy array: %s" % (name, e)) \
                    from None
            if code is None:
                raise OctetError(
                    "unknown input name '%s'; the model's inputs are: %s"
                    % (name, ", ".join(arg.name for arg in self._inputs))
                )
            expected = _NUMPY_TYPE.get(code)
            if array.dtype != expected:
                raise OctetError(
                    "input '%s' must be %s (numpy %s), got numpy %s"
                    % (name, self._type_of(name), expected, array.dtype)
                )
            feeds.append((name, code, _to_storage(array, code)))
        try:
            names = [] if output_names is None else [str(n) for n in output_names]
        except TypeError:
            raise OctetError("output_names must be None or a list of output names") from None
        return [_from_storage(code, storage)
                for code, storage in self._session.run(names, feeds, kv_cache)]

    def _type_of(self, name):
        return next(arg.type for arg in self._inputs if arg.name == name)


def _integer(value, what, minimum, maximum):
    """value as a Python int in [minimum, maximum] (numpy integers too), else OctetError."""
    try:
        number = operator.index(value)
    except TypeError:
        raise OctetError("%s must be an integer, got %r" % (what, value)) from None
    if not minimum <= number <= maximum:
        raise OctetError("%s must be an integer in [%d, %d], got %d"
                         % (what, minimum, maximum, number))
    return number


def _names(values):
    """values as a list of str, or None when it is not an iterable of str."""
    try:
        names = list(values)
    except TypeError:
        return None
    return names if all(isinstance(name, str) for name in names) else None


def active_isa():
    """The instruction-set path octet's kernels use here: OCTET_ISA when set, else the best
    this CPU runs ("scalar", "avx2", "avxvnni", "avx512", "avx512vnni", "neondot")."""
    return _octet.active_isa()


def supported_isas():
    """Every instruction-set path this build and CPU can run (OCTET_ISA's names), scalar
    first."""
    return list(_octet.supported_isas())


def inspect(path):
    """What octet's graph rewrites do with the model at `path`, as `octet inspect` prints it:
    one line per fused or refused group, then a summary line."""
    try:
        path = os.fsencode(os.fspath(path))
    except TypeError:
        raise OctetError("path must be a str or os.PathLike, got %s" % type(path).__name__) \
            from None
    return _octet.describe_rewrites(path)


def list_ops():
    """Every operator octet has a kernel for, as (domain, op_type, since_opset, end_opset)
    tuples; end_opset is None when the kernel has no upper bound."""
    return [(d, op, since, None if end >= 1 << 30 else end)
            for d, op, since, end in _octet.registered_kernels()]
