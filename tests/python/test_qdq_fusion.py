"""QDQ MatMul/Gemm folding (issue 4) against ONNX Runtime 1.31.1 on the same graph.

Each case builds DequantizeLinear(x), DequantizeLinear(W) -> MatMul | Gemm [-> QuantizeLinear]
with onnx.helper and checks:
  * that octet claimed (or refused, with the expected reason) the group, from the
    OCTET_QDQ_DEBUG=1 lines;
  * worst |d| = 0 against ORT_ENABLE_ALL wherever ORT fuses the same group (uint8
    activations on x86; int8 activations with session.qdqisint8allowed=1);
  * against ORT_DISABLE_ALL (float DequantizeLinear -> MatMul -> QuantizeLinear): at most
    1 LSB, and only where the exact real result lies on a rounding tie (within float32
    accumulation error of k + 0.5). The tie count is printed (pytest -s) per case.
"""

import os
import re

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import octet
import ort_exact

OPSET = 21
ALL = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
DISABLED = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
TYPE_CODE = {np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8}


def random_q(rng, dtype, shape):
    info = np.iinfo(dtype)
    return rng.integers(info.min, info.max + 1, size=shape).astype(dtype)


class Group:
    """One QDQ matmul group and the numbers needed to check it independently."""

    def __init__(self, rng, x_type=np.uint8, w_type=np.int8, m=24, k=96, n=40, batch=None,
                 x_axis=None, w_axis=None, zx=None, zw=None, zy=None, quantized=True,
                 y_type=None, domain="", gemm=False, bias=False):
        self.rng = rng
        self.x_type, self.w_type = np.dtype(x_type), np.dtype(w_type)
        self.y_type = np.dtype(y_type or x_type)
        self.m, self.k, self.n = m, k, n
        self.x_shape = ([batch] if batch else []) + [m, k]
        self.gemm, self.domain, self.quantized = gemm, domain, quantized
        x_rank = len(self.x_shape)
        # Per-axis x scales run along one non-K axis of x (its length).
        self.x_axis = x_axis
        x_count = self.x_shape[x_axis] if x_axis is not None else None
        self.sx = self._scales(0.01, 0.03, x_count)
        self.zx = self._zero(zx, self.x_type, x_count)
        w_count = n if w_axis is not None else None
        self.w_axis = w_axis
        self.sw = self._scales(0.004, 0.012, w_count if w_axis in (None, 1, -1) or gemm else k)
        self.zw = self._zero(zw, self.w_type, self.sw.size if self.sw.ndim else None)
        self.w = random_q(rng, self.w_type, (n, k) if gemm else (k, n))
        self.x_rank = x_rank
        # Output scale chosen so the int8 outputs spread over the range, few saturate.
        self.sy = np.float32(float(np.mean(self.sx)) * float(np.mean(self.sw)) * 64 * np.sqrt(k) / 40)
        self.zy = np.array(0 if zy is None else zy, self.y_type)
        self.bias = None
        if bias:
            self.bias = rng.integers(-20000, 20000, size=n).astype(np.int32)

    def _scales(self, lo, hi, count):
        if count is None:
            return np.array(self.rng.uniform(lo, hi), np.float32)
        return self.rng.uniform(lo, hi, size=count).astype(np.float32)

    def _zero(self, value, dtype, count):
        if value is None:
            value = 0
        if count is None or np.ndim(value):
            return np.array(value, dtype)
        return np.full(count, value, dtype)

    def model(self, extra_x_consumer=False, share_weight=False):
        init = [numpy_helper.from_array(self.sx, "sx"), numpy_helper.from_array(self.zx, "zx"),
                numpy_helper.from_array(self.w, "w"), numpy_helper.from_array(self.sw, "sw"),
                numpy_helper.from_array(self.zw, "zw")]
        dq_x = {"axis": self.x_axis} if self.x_axis is not None else {}
        dq_w = {"axis": self.w_axis} if self.w_axis is not None else {}
        nodes = [helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xd"], domain=self.domain,
                                  **dq_x),
                 helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], domain=self.domain,
                                  **dq_w)]
        outputs = []
        if self.gemm:
            inputs = ["xd", "wd"]
            if self.bias is not None:
                init += [numpy_helper.from_array(self.bias, "b"),
                         numpy_helper.from_array(np.float32(self.sx * self.sw), "sb")]
                nodes.append(helper.make_node("DequantizeLinear", ["b", "sb"], ["bd"],
                                              domain=self.domain))
                inputs.append("bd")
            nodes.append(helper.make_node("Gemm", inputs, ["y"], transB=1))
        else:
            nodes.append(helper.make_node("MatMul", ["xd", "wd"], ["y"]))
        if self.quantized:
            init += [numpy_helper.from_array(self.sy, "sy"), numpy_helper.from_array(self.zy, "zy")]
            nodes.append(helper.make_node("QuantizeLinear", ["y", "sy", "zy"], ["yq"],
                                          domain=self.domain))
            outputs.append(helper.make_tensor_value_info("yq", TYPE_CODE[self.y_type], None))
        else:
            outputs.append(helper.make_tensor_value_info("y", TensorProto.FLOAT, None))
        if extra_x_consumer:  # the activation's DQ also feeds an op that stays unfused
            nodes.append(helper.make_node("Relu", ["xd"], ["xr"]))
            outputs.append(helper.make_tensor_value_info("xr", TensorProto.FLOAT, None))
        if share_weight:  # a second fused group reading the same weight DQ
            nodes.append(helper.make_node("MatMul", ["xd", "wd"], ["y2"]))
            outputs.append(helper.make_tensor_value_info("y2", TensorProto.FLOAT, None))
        graph = helper.make_graph(
            nodes, "qdq", [helper.make_tensor_value_info("x", TYPE_CODE[self.x_type], self.x_shape)],
            outputs, init)
        imports = [helper.make_opsetid("", OPSET)]
        if self.domain:
            imports.append(helper.make_opsetid(self.domain, 1))
        m = helper.make_model(graph, opset_imports=imports)
        m.ir_version = 10
        return m.SerializeToString()

    def feeds(self):
        if getattr(self, "x_spread", None):  # values within x_spread of the zero point
            offset = self.rng.integers(-self.x_spread, self.x_spread + 1, size=self.x_shape)
            return {"x": (offset + self.zx.astype(np.int64)).astype(self.x_type)}
        return {"x": random_q(self.rng, self.x_type, self.x_shape)}

    def make_tie_heavy(self):
        """Scales whose multiplier in ORT's order, (sx * sw) / sy, is exactly 0.5 * 2^j while
        sx * (sw / sy), (sx / sy) * sw and sx * sw * (1 / sy) are one ulp below it, and small
        products: many exact results are k + 0.5, so another multiplier order, or a
        rounding other than half-to-even, changes outputs."""
        self.sx = np.array(np.float32("0.018441325"))
        base = np.float32("0.034255754")
        if self.sw.ndim:
            self.sw = (base * np.float32(2.0) ** (np.arange(self.sw.size) % 3)).astype(np.float32)
        else:
            self.sw = np.array(base, np.float32)
        self.sy = np.float32("0.001263443")
        assert np.all((self.sx * self.sw) / self.sy == 0.5 * 2.0 ** (np.arange(self.sw.size) % 3))
        self.w = self.rng.integers(-3, 4, size=self.w.shape).astype(self.w_type) + self.zw.reshape(
            (1, -1) if not self.gemm else (-1, 1)).astype(self.w_type) if self.zw.ndim else (
            self.rng.integers(-3, 4, size=self.w.shape) + int(self.zw)).astype(self.w_type)
        self.x_spread = 3

    def exact_real(self, x):
        """The exact real value of y / sy (or y for float output), from int64 sums."""
        x64 = x.astype(np.int64).reshape(-1, self.k)
        w64 = (self.w.T if self.gemm else self.w).astype(np.int64)
        zx = self.zx.astype(np.int64)
        if self.x_axis is not None:  # one zero point / scale per index along x_axis
            index = np.indices(self.x_shape[:-1])[self.x_axis % self.x_rank].reshape(-1)
            zx, sx = zx[index][:, None], self.sx.astype(np.float64)[index][:, None]
        else:
            sx = np.float64(self.sx)
        acc = (x64 - zx) @ (w64 - self.zw.astype(np.int64))
        if self.bias is not None:
            acc = acc + self.bias
        real = acc * sx * self.sw.astype(np.float64)
        if self.quantized:
            real = real / np.float64(self.sy)
        return real.reshape(self.x_shape[:-1] + [self.n])


def run_ort(model, feeds, level, int8_allowed=False):
    """ORT's outputs. Where its u8 x s8 kernel saturates (x86 without VNNI) ORT runs the
    model's exact u8 x u8 form (tools/ort_exact.py), which gives the same floats to every
    unfused path."""
    model, feeds = ort_exact.for_ort(model, feeds)
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    options.intra_op_num_threads = 1
    if int8_allowed:
        options.add_session_config_entry("session.qdqisint8allowed", "1")
    session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    return session.run(None, feeds)


def ort_ops(model, int8_allowed):
    """The op types of the graph ORT_ENABLE_ALL runs (its optimized model)."""
    options = ort.SessionOptions()
    options.graph_optimization_level = ALL
    if int8_allowed:
        options.add_session_config_entry("session.qdqisint8allowed", "1")
    options.optimized_model_filepath = os.path.join(os.environ.get("TMPDIR", "/tmp"),
                                                    "octet_qdq_opt_%d.onnx" % os.getpid())
    ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
    ops = [n.op_type for n in onnx.load(options.optimized_model_filepath).graph.node]
    os.remove(options.optimized_model_filepath)
    return ops


def ort_fuses(model, int8_allowed):
    """True when ORT_ENABLE_ALL turns the group into one integer node (no DQ left)."""
    return "DequantizeLinear" not in ort_ops(model, int8_allowed)


def run_octet(model, feeds, capfd, threads=1):
    """octet's outputs and its OCTET_QDQ_DEBUG report for this model."""
    capfd.readouterr()
    session = octet.InferenceSession(model, threads=threads)
    report = capfd.readouterr().err
    return session.run(None, feeds), report


def claimed(report):
    match = re.search(r"qdq_groups=(\d+) claimed=(\d+)", report)
    assert match, "no qdq summary line in: %r" % report
    return int(match.group(1)), int(match.group(2))


def check_against_unfused(group, x, ours, unfused, name):
    """<= 1 LSB from ORT_DISABLE_ALL, and only on rounding ties; returns the tie count."""
    if not group.quantized:
        exact = group.exact_real(x)
        # Float output: both are float32 roundings of the same real number.
        np.testing.assert_allclose(ours, exact, rtol=1e-5, atol=1e-5 * np.abs(exact).max())
        np.testing.assert_allclose(unfused, exact, rtol=1e-4, atol=1e-4 * np.abs(exact).max())
        return 0
    d = ours.astype(np.int32) - unfused.astype(np.int32)
    assert np.abs(d).max(initial=0) <= 1, "%s: worst |d| = %d LSB" % (name, np.abs(d).max())
    real = group.exact_real(x)[d != 0]
    distance_to_tie = np.abs(real - np.floor(real) - 0.5)
    assert np.all(distance_to_tie < 1e-3), (
        "%s: 1-LSB differences away from a rounding tie: %s" % (name, real[distance_to_tie >= 1e-3]))
    ties = int(np.count_nonzero(d))
    print("%s: %d of %d values differ by 1 LSB from ORT_DISABLE_ALL (rounding ties)"
          % (name, ties, d.size))
    return ties


@pytest.fixture(autouse=True)
def qdq_debug(monkeypatch):
    monkeypatch.setenv("OCTET_QDQ_DEBUG", "1")
    monkeypatch.delenv("OCTET_QDQ", raising=False)


def check_group(group, capfd, name, expect_ort_fused=None, **model_kw):
    model = group.model(**model_kw)
    feeds = group.feeds()
    (ours, *_), report = run_octet(model, feeds, capfd)
    assert claimed(report) == (1 + model_kw.get("share_weight", False),) * 2, report
    int8_allowed = group.x_type == np.int8
    if expect_ort_fused is None:
        expect_ort_fused = ort_fuses(model, int8_allowed)
    if expect_ort_fused:
        fused = run_ort(model, feeds, ALL, int8_allowed)[0]
        assert fused.dtype == ours.dtype and fused.shape == ours.shape
        worst = np.abs(fused.astype(np.float64) - ours.astype(np.float64)).max(initial=0)
        assert np.array_equal(fused, ours), "%s: worst |d| = %g against ORT_ENABLE_ALL" % (
            name, worst)
    unfused = run_ort(model, feeds, DISABLED)[0]
    assert unfused.dtype == ours.dtype and unfused.shape == ours.shape
    check_against_unfused(group, feeds["x"], ours, unfused, name)
    return ours


@pytest.mark.parametrize("x_type,w_type", [(np.uint8, np.int8), (np.int8, np.int8),
                                           (np.uint8, np.uint8), (np.int8, np.uint8)],
                         ids=["u8s8", "s8s8", "u8u8", "s8u8"])
def test_per_tensor(x_type, w_type, capfd):
    group = Group(np.random.default_rng(1), x_type, w_type, zx=7, zw=3, zy=-5 if x_type == np.int8 else 128)
    # ORT fuses u8 activations, and s8 x s8 with qdqisint8allowed; s8 x u8 never.
    check_group(group, capfd, "per-tensor", expect_ort_fused=(x_type, w_type) != (np.int8, np.uint8))


@pytest.mark.parametrize("x_type", [np.uint8, np.int8], ids=["u8", "s8"])
def test_per_axis_columns(x_type, capfd):
    group = Group(np.random.default_rng(2), x_type, np.int8, w_axis=1,
                  zy=120 if x_type == np.uint8 else 3)
    check_group(group, capfd, "per-column", expect_ort_fused=True)


@pytest.mark.parametrize("x_type,w_axis", [(np.uint8, None), (np.int8, None), (np.uint8, 1),
                                           (np.int8, 1)],
                         ids=["u8-tensor", "s8-tensor", "u8-column", "s8-column"])
def test_rounding_ties(x_type, w_axis, capfd):
    group = Group(np.random.default_rng(20), x_type, np.int8, m=64, k=64, n=48, w_axis=w_axis,
                  zx=20, zw=2, zy=-3 if x_type == np.int8 else 100)
    group.make_tie_heavy()
    check_group(group, capfd, "rounding ties", expect_ort_fused=True)


def test_per_axis_rows(capfd):
    """s_x along M: ORT fuses it into a QLinearMatMul that then fails at run time (ORT issue
    15442), so the reference is the unfused graph only."""
    group = Group(np.random.default_rng(3), np.uint8, np.int8, x_axis=0, w_axis=1, zx=128, zy=110)
    check_group(group, capfd, "per-row", expect_ort_fused=False)


def test_asymmetric(capfd):
    group = Group(np.random.default_rng(4), np.int8, np.int8, zx=-40, zw=-25, zy=-7)
    check_group(group, capfd, "asymmetric", expect_ort_fused=True)


def test_per_axis_zero_point_vectors(capfd):
    rng = np.random.default_rng(5)
    group = Group(rng, np.int8, np.int8, w_axis=1, zx=-40, zy=-7,
                  zw=rng.integers(-30, 30, size=40))
    check_group(group, capfd, "per-column zero points", expect_ort_fused=True)
    # Per-row activation zero points as well (only the unfused graph is a valid reference).
    group = Group(rng, np.int8, np.int8, x_axis=0, w_axis=1, zy=-7,
                  zx=rng.integers(-50, 50, size=24), zw=rng.integers(-30, 30, size=40))
    check_group(group, capfd, "per-row and per-column zero points", expect_ort_fused=False)


def test_microsoft_domain(capfd):
    group = Group(np.random.default_rng(6), np.uint8, np.int8, zx=128, zy=128,
                  domain="com.microsoft")
    check_group(group, capfd, "com.microsoft", expect_ort_fused=True)


def test_batched_activations(capfd):
    group = Group(np.random.default_rng(7), np.uint8, np.int8, batch=3, m=130, w_axis=1,
                  zx=100, zy=128)
    check_group(group, capfd, "3-D x", expect_ort_fused=True)
    group = Group(np.random.default_rng(8), np.int8, np.int8, batch=3, m=5, x_axis=0, zx=-4, zy=2)
    check_group(group, capfd, "3-D x, scale along the batch axis", expect_ort_fused=False)


@pytest.mark.parametrize("quantized", [True, False], ids=["quantized", "float"])
def test_gemm_trans_b_bias(quantized, capfd):
    group = Group(np.random.default_rng(9), np.uint8, np.int8, gemm=True, bias=True, zx=128,
                  zy=128, quantized=quantized)
    check_group(group, capfd, "gemm", expect_ort_fused=True)


@pytest.mark.parametrize("x_type", [np.uint8, np.int8], ids=["u8", "s8"])
def test_float_output(x_type, capfd):
    group = Group(np.random.default_rng(10), x_type, np.int8, w_axis=1, zx=9, zw=-2,
                  quantized=False)
    check_group(group, capfd, "float output", expect_ort_fused=x_type == np.uint8)


def test_shared_weight_dq(capfd):
    """One weight DQ feeding two MatMuls: both groups fold, each into its own node."""
    group = Group(np.random.default_rng(11), np.uint8, np.int8, zx=128, zy=128)
    model = group.model(share_weight=True)
    feeds = group.feeds()
    ours, report = run_octet(model, feeds, capfd)
    assert claimed(report) == (2, 2)
    expected = run_ort(model, feeds, ALL)
    for a, b in zip(ours, expected):
        assert np.array_equal(a, b)


def _needs_unfused_kernels(error):
    """The unfused path needs octet's own DequantizeLinear/QuantizeLinear kernels."""
    if re.search(r"unsupported operator (De)?[Qq]uantizeLinear", str(error)):
        pytest.skip("octet has no DequantizeLinear/QuantizeLinear kernel yet: %s" % error)
    raise error


def test_dq_feeding_two_consumers(capfd):
    """The activation DQ also feeds a Relu: the group folds, the DQ stays for the Relu."""
    group = Group(np.random.default_rng(12), np.uint8, np.int8, zx=128, zy=128)
    model = group.model(extra_x_consumer=True)
    feeds = group.feeds()
    try:
        ours, report = run_octet(model, feeds, capfd)
    except octet.OctetError as error:
        _needs_unfused_kernels(error)
    assert claimed(report) == (1, 1)
    fused = run_ort(model, feeds, ALL)
    assert np.array_equal(ours[0], fused[0])
    assert np.array_equal(ours[1], fused[1])


@pytest.mark.parametrize("axis_case", ["weight", "activation"])
def test_k_axis_refused(axis_case, capfd):
    """A scale along K cannot fold: not claimed, reason reported, result still correct."""
    rng = np.random.default_rng(13)
    if axis_case == "weight":
        group = Group(rng, np.uint8, np.int8, w_axis=0, zx=128, zy=128)
    else:
        group = Group(rng, np.uint8, np.int8, x_axis=1, zx=128, zy=128)
    model = group.model()
    feeds = group.feeds()
    try:
        (ours,), report = run_octet(model, feeds, capfd)
    except octet.OctetError as error:
        _needs_unfused_kernels(error)
    assert claimed(report) == (1, 0)
    assert "qdq_refused why=scale_along_k op=MatMul count=1" in report
    # Both run DQ -> float MatMul -> Q; float sums may round a tie differently.
    unfused = run_ort(model, feeds, DISABLED)[0]
    d = np.abs(ours.astype(np.int32) - unfused.astype(np.int32))
    assert d.max() <= 1


def test_pass_off_is_the_control(capfd, monkeypatch):
    """OCTET_QDQ=0: nothing is claimed, no report, and the graph still runs."""
    monkeypatch.setenv("OCTET_QDQ", "0")
    group = Group(np.random.default_rng(14), np.uint8, np.int8, zx=128, zy=128)
    model = group.model()
    feeds = group.feeds()
    try:
        (ours,), report = run_octet(model, feeds, capfd)
    except octet.OctetError as error:
        _needs_unfused_kernels(error)
    assert "qdq_groups" not in report
    unfused = run_ort(model, feeds, DISABLED)[0]
    assert np.abs(ours.astype(np.int32) - unfused.astype(np.int32)).max() <= 1


def test_threads_do_not_change_results(capfd):
    group = Group(np.random.default_rng(15), np.int8, np.int8, batch=2, m=200, w_axis=1, zx=-3,
                  zy=1)
    model = group.model()
    feeds = group.feeds()
    (one,), _ = run_octet(model, feeds, capfd, threads=1)
    (two,), _ = run_octet(model, feeds, capfd, threads=2)
    assert np.array_equal(one, two)


@pytest.mark.parametrize("x_type", [np.uint8, np.int8], ids=["u8", "s8"])
def test_float_products_of_one_input_run_as_one(x_type, monkeypatch):
    """A decoder layer's q, k and v projections in A8W8 (float outputs of one quantized x):
    one octet.QLinearMatMulSiblings node, each output with the bits it has alone
    (OCTET_QDQ_SIBLINGS=0), at 1, 3 and 40 rows, on 1 and 2 threads; ONNX Runtime's
    results within float rounding."""
    rng = np.random.default_rng(12)
    K = 96
    zx = 3 if x_type == np.int8 else 131
    inits = [numpy_helper.from_array(np.array(0.04, np.float32), "xs"),
             numpy_helper.from_array(np.array(zx, x_type), "xz")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "xz"], ["xq"]),
             helper.make_node("DequantizeLinear", ["xq", "xs", "xz"], ["xd"])]
    outputs = []
    # q: per-channel weights; k: per tensor with a zero point; v: a Gemm with B transposed.
    for name, N, per_channel, zero, gemm in (("q", 128, True, 0, False), ("k", 64, False, -5, False),
                                            ("v", 7, True, 0, True)):
        w = rng.integers(-128, 128, (N, K) if gemm else (K, N)).astype(np.int8)
        scale = rng.uniform(0.001, 0.01, N if per_channel else ()).astype(np.float32)
        inits += [numpy_helper.from_array(w, name + "_w"), numpy_helper.from_array(scale, name + "_s"),
                  numpy_helper.from_array(np.full(scale.shape, zero, np.int8), name + "_z")]
        axis = {"axis": 0 if gemm else 1} if per_channel else {}
        nodes.append(helper.make_node("DequantizeLinear", [name + "_w", name + "_s", name + "_z"],
                                      [name + "_wd"], **axis))
        nodes.append(helper.make_node("Gemm", ["xd", name + "_wd"], [name], transB=1) if gemm
                     else helper.make_node("MatMul", ["xd", name + "_wd"], [name]))
        outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, None))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                         [None, K])],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              ir_version=10).SerializeToString()
    feeds = [{"x": rng.standard_normal((M, K)).astype(np.float32)} for M in (1, 3, 40)]
    runs = {}
    for control in ("1", "0"):
        monkeypatch.setenv("OCTET_QDQ_SIBLINGS", control)
        for threads in (1, 2):
            session = octet.InferenceSession(model, threads=threads)
            session.set_profiling(True)
            runs[control, threads] = [session.run(None, f) for f in feeds]
            ops = {o["op"] for o in session.profile()["ops"]}
            assert ("octet.QLinearMatMulSiblings" in ops) == (control == "1"), ops
    for key, got in runs.items():
        for outs, expected in zip(got, runs["0", 1]):
            assert [y.tobytes() for y in outs] == [y.tobytes() for y in expected], key
    for f, outs in zip(feeds, runs["1", 1]):
        for ours, theirs in zip(outs, run_ort(model, f, DISABLED)):
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5)
