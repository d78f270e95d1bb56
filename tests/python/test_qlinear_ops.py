"""com.microsoft quantized operators (QOperator format) against ONNX Runtime 1.31.1, bit for bit,
and the DequantizeLinear x2 -> Add | Mul -> QuantizeLinear fold that runs them (issue 4).

The single-node cases feed full 256 x 256 grids of input pairs (every (a, b) combination)
through each broadcast path ORT distinguishes (both inputs vectors; A or B the single value of
a broadcast span) with random scales and zero points, u8 and s8."""

import os
import re

import numpy as np
import onnxruntime as ort
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import octet
from test_qdq_fusion import ALL, DISABLED, TYPE_CODE, ort_fuses, random_q, run_octet, run_ort

MS = "com.microsoft"
GRID = np.arange(256)


def grid_inputs(dtype, layout):
    """All 65536 (a, b) pairs, shaped for one of ORT's broadcast paths."""
    values = (GRID + np.iinfo(dtype).min).astype(dtype)
    if layout == "vectors":
        return np.repeat(values, 256), np.tile(values, 256)
    if layout == "scalar_a":  # A [256, 1] against B [1, 256]: A is one value per span
        return values.reshape(256, 1), values.reshape(1, 256)
    return values.reshape(1, 256), values.reshape(256, 1)  # scalar_b


def params(rng, dtype):
    info = np.iinfo(dtype)
    scales = rng.uniform(0.002, 0.2, size=3).astype(np.float32)
    zeros = rng.integers(info.min, info.max + 1, size=3)
    return scales, zeros


def binary_model(op, dtype, a_shape, b_shape, scales, zeros, omit_zeros=False):
    code = TYPE_CODE[np.dtype(dtype)]
    inits, names = [], []
    for tag, s, z in zip("abc", scales, zeros):
        inits.append(numpy_helper.from_array(np.array(s, np.float32), "s" + tag))
        names.append("s" + tag)
        if omit_zeros:
            names.append("")
        else:
            inits.append(numpy_helper.from_array(np.array(z, dtype), "z" + tag))
            names.append("z" + tag)
    inputs = ["A", names[0], names[1], "B", names[2], names[3], names[4], names[5]]
    while inputs[-1] == "":
        inputs.pop()
    node = helper.make_node(op, inputs, ["C"], domain=MS)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("A", code, a_shape),
                                            helper.make_tensor_value_info("B", code, b_shape)],
                              [helper.make_tensor_value_info("C", code, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid(MS, 1)], ir_version=10)
    return model.SerializeToString()


def run_both(model, feeds):
    ours = octet.InferenceSession(model, threads=1).run(None, feeds)[0]
    theirs = run_ort(model, feeds, DISABLED)[0]
    return ours, theirs


def assert_same(ours, theirs, what):
    assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, what
    diff = np.flatnonzero(ours.astype(np.int32) != theirs.astype(np.int32))
    assert diff.size == 0, "%s: %d mismatches, first at %d: octet %d ort %d" % (
        what, diff.size, diff[0], ours.flat[diff[0]], theirs.flat[diff[0]])


@pytest.mark.parametrize("layout", ["vectors", "scalar_a", "scalar_b"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["u8", "s8"])
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_binary_full_grid(op, dtype, layout):
    rng = np.random.default_rng(hash((op, layout, np.dtype(dtype).name)) % 2**32)
    a, b = grid_inputs(dtype, layout)
    for trial in range(12):
        scales, zeros = params(rng, dtype)
        if trial == 0:  # ties everywhere: power-of-two ratios
            scales = np.array([0.5, 0.25, 1.0], np.float32) * np.float32(0.0625)
        model = binary_model(op, dtype, list(a.shape), list(b.shape), scales, zeros)
        ours, theirs = run_both(model, {"A": a, "B": b})
        assert_same(ours, theirs, "%s %s trial %d scales %s zeros %s" % (op, layout, trial,
                                                                          scales, zeros))


BROADCAST_SHAPES = [([2, 3, 4], [2, 3, 4]), ([2, 3, 4], [4]), ([4], [2, 3, 4]), ([2, 3, 1], [4]),
                    ([2, 1, 4], [3, 1]), ([], [2, 3]), ([2, 3], []), ([1], [2, 3]),
                    ([2, 3], [1]), ([3, 1], [1]), ([1], [3, 1]), ([2, 3, 1], [1, 1]),
                    ([1, 1], [2, 3, 1]), ([1, 1], [1]), ([], []), ([5, 1, 1], [1, 6, 1]),
                    ([0, 3], [3]), ([2, 1, 3], [1, 1])]


@pytest.mark.parametrize("shapes", BROADCAST_SHAPES, ids=lambda s: "x".join(map(str, s)) or "r0")
@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["u8", "s8"])
@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
def test_binary_broadcast(op, dtype, shapes):
    rng = np.random.default_rng(7)
    a_shape, b_shape = shapes
    for trial in range(20):
        scales, zeros = params(rng, dtype)
        feeds = {"A": random_q(rng, dtype, a_shape), "B": random_q(rng, dtype, b_shape)}
        if trial == 0:  # omitted zero points (ORT's type inference rejects them: give it zeros)
            zeros = np.zeros(3, np.int64)
            ours = octet.InferenceSession(binary_model(op, dtype, a_shape, b_shape, scales, zeros,
                                                       omit_zeros=True)).run(None, feeds)[0]
            theirs = run_ort(binary_model(op, dtype, a_shape, b_shape, scales, zeros), feeds,
                             DISABLED)[0]
        else:
            ours, theirs = run_both(binary_model(op, dtype, a_shape, b_shape, scales, zeros), feeds)
        assert_same(ours, theirs, "%s %s x %s trial %d" % (op, a_shape, b_shape, trial))


def test_binary_bad_shapes_raise():
    model = binary_model("QLinearAdd", np.uint8, [2, 3], [4], [0.1] * 3, [1, 2, 3])
    with pytest.raises(octet.OctetError, match="QLinearAdd.*do not broadcast"):
        octet.InferenceSession(model).run(None, {"A": np.zeros((2, 3), np.uint8),
                                                 "B": np.zeros(4, np.uint8)})


# --- DequantizeLinear x2 -> Add | Mul -> QuantizeLinear ------------------------------------

def qdq_binary_model(op, dtype, a_shape, b_shape, scales, zeros, b_type=None, per_axis_b=False,
                     requantize=True):
    code = TYPE_CODE[np.dtype(dtype)]
    b_type = np.dtype(b_type or dtype)
    inits = [numpy_helper.from_array(np.array(scales[0], np.float32), "sa"),
             numpy_helper.from_array(np.array(zeros[0], dtype), "za"),
             numpy_helper.from_array(np.array(scales[2], np.float32), "sc"),
             numpy_helper.from_array(np.array(zeros[2], dtype), "zc")]
    if per_axis_b:  # per-axis B parameters along its last axis: not a QLinearAdd input
        n = b_shape[-1]
        inits += [numpy_helper.from_array(np.full(n, scales[1], np.float32), "sb"),
                  numpy_helper.from_array(np.full(n, zeros[1], b_type), "zb")]
    else:
        inits += [numpy_helper.from_array(np.array(scales[1], np.float32), "sb"),
                  numpy_helper.from_array(np.array(zeros[1], b_type), "zb")]
    nodes = [helper.make_node("DequantizeLinear", ["A", "sa", "za"], ["ad"]),
             helper.make_node("DequantizeLinear", ["B", "sb", "zb"], ["bd"],
                              **({"axis": -1} if per_axis_b else {})),
             helper.make_node(op, ["ad", "bd"], ["f"], name="bin")]
    out = "f"
    if requantize:
        nodes.append(helper.make_node("QuantizeLinear", ["f", "sc", "zc"], ["C"]))
        out = "C"
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("A", code, a_shape),
                     helper.make_tensor_value_info("B", TYPE_CODE[b_type], b_shape)],
        [helper.make_tensor_value_info(out, code if requantize else TensorProto.FLOAT, None)],
        inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                             ir_version=10).SerializeToString()


def exact_real(op, a, b, scales, zeros):
    """The exact quantized real value (before rounding) in float64."""
    da = (a.astype(np.float64) - zeros[0]) * np.float64(scales[0])
    db = (b.astype(np.float64) - zeros[1]) * np.float64(scales[1])
    return (da + db if op == "Add" else da * db) / np.float64(scales[2]) + zeros[2]


@pytest.fixture
def qdq_debug(monkeypatch):
    monkeypatch.setenv("OCTET_QDQ_DEBUG", "1")
    monkeypatch.delenv("OCTET_QDQ", raising=False)


@pytest.mark.parametrize("layout", ["vectors", "scalar_a", "scalar_b"])
@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["u8", "s8"])
@pytest.mark.parametrize("op", ["Add", "Mul"])
def test_qdq_binary_fused(op, dtype, layout, qdq_debug, capfd):
    rng = np.random.default_rng(11)
    a, b = grid_inputs(dtype, layout)
    ties = 0
    for trial in range(6):
        scales, zeros = params(rng, dtype)
        if trial == 0:
            scales = np.array([0.5, 0.25, 1.0], np.float32) * np.float32(0.0625)
        model = qdq_binary_model(op, dtype, list(a.shape), list(b.shape), scales, zeros)
        feeds = {"A": a, "B": b}
        (ours,), report = run_octet(model, feeds, capfd)
        assert "qdq_refused" not in report and re.search(r"qdq_groups=1 claimed=1", report), report
        # Unlike MatMul/Conv groups, ORT 1.31.1 fuses s8 Add/Mul groups on x86 even without
        # session.qdqisint8allowed=1 (checked here, both ways).
        if trial == 0:
            assert ort_fuses(model, True) and ort_fuses(model, False)
        for allowed in (False, True):
            fused = run_ort(model, feeds, ALL, int8_allowed=allowed)[0]
            assert_same(ours, fused, "%s %s trial %d vs ORT_ENABLE_ALL" % (op, layout, trial))
        unfused = run_ort(model, feeds, DISABLED)[0]
        d = ours.astype(np.int32) - unfused.astype(np.int32)
        assert np.abs(d).max() <= 1, "%s trial %d: %d" % (op, trial, np.abs(d).max())
        real = np.broadcast_to(exact_real(op, a, b, scales, zeros), ours.shape)
        off = d != 0
        frac = np.abs(real[off] - np.floor(real[off]) - 0.5)
        assert np.all(frac < 1e-3 * np.maximum(1, np.abs(real[off]))), "non-tie difference"
        ties += int(off.sum())
    print("\n%s %s %s: %d one-LSB differences from ORT_DISABLE_ALL, all on ties, of %d values"
          % (op, np.dtype(dtype).name, layout, ties, 6 * ours.size))


@pytest.mark.parametrize("case, why", [
    ("per_axis", "binary_dq_param_not_scalar"), ("float_out", "binary_not_requantized")])
@pytest.mark.parametrize("op", ["Add", "Mul"])
def test_qdq_binary_refused(op, case, why, qdq_debug, capfd):
    rng = np.random.default_rng(5)
    scales, zeros = params(rng, np.uint8)
    model = qdq_binary_model(op, np.uint8, [3, 4], [3, 4], scales, zeros,
                             per_axis_b=case == "per_axis", requantize=case != "float_out")
    feeds = {"A": random_q(rng, np.uint8, [3, 4]), "B": random_q(rng, np.uint8, [3, 4])}
    (ours,), report = run_octet(model, feeds, capfd)
    assert re.findall(r"qdq_refused why=(\S+) op=" + op, report) == [why], report
    assert re.search(r"qdq_groups=1 claimed=0", report), report
    theirs = run_ort(model, feeds, DISABLED)[0]
    assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)


@pytest.mark.parametrize("op", ["Add", "Mul"])
def test_qdq_binary_types_differ_float_steps(op, qdq_debug, capfd):
    """u8 A, s8 B: ORT's selector wants one type and keeps DQ -> op -> Q in float; octet runs
    those float steps on the 8-bit tensors (octet.QdqAdd/QdqMul, arithmetic=float)."""
    rng = np.random.default_rng(5)
    a, b = grid_inputs(np.uint8, "vectors")
    b = (b.astype(np.int16) - 128).astype(np.int8)
    for trial in range(4):
        scales, zeros = params(rng, np.uint8)
        zeros[1] -= 128
        model = qdq_binary_model(op, np.uint8, list(a.shape), list(b.shape), scales, zeros,
                                 b_type=np.int8)
        if trial == 0:
            assert not ort_fuses(model, False)
        (ours,), report = run_octet(model, feeds := {"A": a, "B": b}, capfd)
        assert "qdq_refused" not in report and "qdq_groups=1 claimed=1" in report, report
        for level in (ALL, DISABLED):
            assert_same(ours, run_ort(model, feeds, level)[0], "%s trial %d" % (op, trial))


# --- ORT's S8-to-U8 move (QDQS8ToU8Transformer) decides whether it fuses ----------------------
#
# Each input comes from float -> QuantizeLinear(s8) -> DequantizeLinear, and the output goes
# to DequantizeLinear -> float graph output. "moved": the Q's one consumer is a DQ with one
# consumer, so ORT moves the pair to uint8 (zero point + 128); "shared": the DQ has a second
# consumer, so it stays int8; "const": a constant int8 B (ORT leaves it int8). ORT fuses only
# when the three types it then sees are equal.

def context_model(op, a_ctx, b_ctx, c_ctx, scales, zeros, b_const=None):
    f, i8 = TensorProto.FLOAT, TensorProto.INT8
    inits = []
    for tag, s, z in zip("abc", scales, zeros):
        inits += [numpy_helper.from_array(np.array(s, np.float32), "s" + tag),
                  numpy_helper.from_array(np.array(z, np.int8), "z" + tag)]
    nodes, inputs, outputs = [], [], []
    for tag, ctx in (("a", a_ctx), ("b", b_ctx)):
        if ctx == "const":
            inits.append(numpy_helper.from_array(b_const, "q" + tag))
        else:
            inputs.append(helper.make_tensor_value_info("x" + tag, f, None))
            nodes.append(helper.make_node("QuantizeLinear", ["x" + tag, "s" + tag, "z" + tag],
                                          ["q" + tag]))
        nodes.append(helper.make_node("DequantizeLinear", ["q" + tag, "s" + tag, "z" + tag],
                                      ["d" + tag]))
        if ctx == "shared":
            nodes.append(helper.make_node("Relu", ["d" + tag], ["r" + tag]))
            outputs.append(helper.make_tensor_value_info("r" + tag, f, None))
    nodes += [helper.make_node(op, ["da", "db"], ["sum"], name="bin"),
              helper.make_node("QuantizeLinear", ["sum", "sc", "zc"], ["qc"]),
              helper.make_node("DequantizeLinear", ["qc", "sc", "zc"], ["y"])]
    outputs.insert(0, helper.make_tensor_value_info("y", f, None))
    if c_ctx == "shared":
        nodes.append(helper.make_node("DequantizeLinear", ["qc", "sc", "zc"], ["y2"]))
        outputs.append(helper.make_tensor_value_info("y2", f, None))
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)],
                             ir_version=10).SerializeToString()


@pytest.mark.parametrize("c_ctx", ["moved", "shared"])
@pytest.mark.parametrize("b_ctx", ["moved", "shared", "const"])
@pytest.mark.parametrize("a_ctx", ["moved", "shared"])
@pytest.mark.parametrize("op", ["Add", "Mul"])
def test_qdq_binary_in_s8_to_u8_context(op, a_ctx, b_ctx, c_ctx, qdq_debug, capfd):
    rng = np.random.default_rng(hash((op, a_ctx, b_ctx, c_ctx)) % 2**32)
    codes_a, codes_b = grid_inputs(np.int8, "vectors")
    moved = {"moved": True, "shared": False, "const": False}
    ort_should_fuse = len({moved[a_ctx], moved[b_ctx], moved[c_ctx]}) == 1
    for trial in range(4):
        scales, zeros = params(rng, np.int8)
        # Float inputs that quantize back to every code: (q - z) * s in float32.
        feeds = {}
        for tag, codes, s, z in (("a", codes_a, scales[0], zeros[0]),
                                 ("b", codes_b, scales[1], zeros[1])):
            feeds["x" + tag] = (codes.astype(np.float32) - np.float32(z)) * np.float32(s)
        if b_ctx == "const":
            del feeds["xb"]
            feeds["xa"] = feeds["xa"][:256 * 4]
        model = context_model(op, a_ctx, b_ctx, c_ctx, scales, zeros,
                              b_const=codes_b[:256 * 4].astype(np.int8))
        if trial == 0:
            assert ort_fuses_binary(model) == ort_should_fuse
        ours, report = run_octet(model, feeds, capfd)
        assert "qdq_refused" not in report, report
        theirs = run_ort(model, feeds, ALL)
        for mine, ref in zip(ours, theirs):
            assert mine.dtype == ref.dtype and mine.shape == ref.shape
            bad = np.flatnonzero(mine.view(np.uint32) != ref.view(np.uint32))
            assert bad.size == 0, "%s %s/%s/%s trial %d: %d of %d differ" % (
                op, a_ctx, b_ctx, c_ctx, trial, bad.size, mine.size)


def ort_fuses_binary(model):
    """Whether ORT_ENABLE_ALL (default session options) makes a QLinearAdd/QLinearMul."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ALL
    path = os.path.join(os.environ.get("TMPDIR", "/tmp"), "octet_binary_opt_%d.onnx" % os.getpid())
    options.optimized_model_filepath = path
    ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load(path).graph.node]
    os.remove(path)
    return any(o in ("QLinearAdd", "QLinearMul") for o in ops)


def test_qdq_binary_shared_dq_kept(qdq_debug, capfd):
    """A DequantizeLinear that also feeds a graph output keeps running for it."""
    scales, zeros = [0.05, 0.03, 0.07], [10, 200, 128]
    model = qdq_binary_model("Add", np.uint8, [8], [8], scales, zeros)
    m = __import__("onnx").load_from_string(model)
    m.graph.output.append(helper.make_tensor_value_info("ad", TensorProto.FLOAT, None))
    model = m.SerializeToString()
    rng = np.random.default_rng(1)
    feeds = {"A": random_q(rng, np.uint8, [8]), "B": random_q(rng, np.uint8, [8])}
    ours, report = run_octet(model, feeds, capfd)
    assert re.search(r"qdq_groups=1 claimed=1", report), report
    for mine, theirs in zip(ours, run_ort(model, feeds, ALL)):
        assert np.array_equal(mine, theirs)
