"""QDQ Conv folding (issue 6) against ONNX Runtime 1.31.1 on the same graph.

Each case builds DequantizeLinear(x), DequantizeLinear(W) [, DequantizeLinear(int32 bias)]
-> Conv -> QuantizeLinear [-> DequantizeLinear -> Relu | Clip -> QuantizeLinear] with
onnx.helper and checks:
  * that octet claimed (or refused, with the expected reason) the group (OCTET_QDQ_DEBUG=1);
  * equal bytes to ORT_ENABLE_ALL, which is checked to have made a QLinearConv (uint8
    activations; int8 activations with session.qdqisint8allowed=1);
  * against ORT_DISABLE_ALL (float DQ -> Conv -> Q): at most 1 LSB, only where the exact
    result (int64 convolution in numpy) lies on a rounding tie; the count is printed.
"""


import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

from test_qdq_fusion import (ALL, DISABLED, TYPE_CODE, claimed, ort_ops, qdq_debug,  # noqa: F401
                             random_q, run_octet, run_ort)

OPSET = 21


class ConvGroup:
    def __init__(self, rng, x_type=np.uint8, w_type=np.int8, c_in=8, c_out=16, group=1,
                 kernel=(3, 3), spatial=(9, 11), strides=None, pads=None, dilations=None,
                 per_channel=False, bias=False, zx=7, zw=0, zy=None, activation=None,
                 w_axis=0, batch=2):
        self.rng = rng
        self.x_type, self.w_type = np.dtype(x_type), np.dtype(w_type)
        self.c_in, self.c_out, self.group, self.kernel = c_in, c_out, group, kernel
        self.x_shape = [batch, c_in, *spatial]
        self.strides = strides or [1] * len(kernel)
        self.pads = pads or [0] * (2 * len(kernel))
        self.dilations = dilations or [1] * len(kernel)
        self.activation = activation
        self.w_axis = w_axis
        k = c_in // group * int(np.prod(kernel))
        self.sx = np.float32(rng.uniform(0.01, 0.03))
        self.zx = np.array(zx, self.x_type)
        count = c_out if per_channel else None
        self.sw = (rng.uniform(0.004, 0.012, size=count) if count else
                   np.array(rng.uniform(0.004, 0.012))).astype(np.float32)
        self.zw = np.array(zw, self.w_type) if not count else np.full(count, zw, self.w_type)
        self.w = random_q(rng, self.w_type, [c_out, c_in // group, *kernel])
        self.sy = np.float32(float(self.sx) * float(np.mean(self.sw)) * 64 * np.sqrt(k) / 40)
        if zy is None:
            zy = 128 if self.x_type == np.uint8 else 0
        self.zy = np.array(zy, self.x_type)
        self.bias = rng.integers(-20000, 20000, size=c_out).astype(np.int32) if bias else None

    def model(self):
        init = [numpy_helper.from_array(self.sx, "sx"), numpy_helper.from_array(self.zx, "zx"),
                numpy_helper.from_array(self.w, "w"), numpy_helper.from_array(self.sw, "sw"),
                numpy_helper.from_array(self.zw, "zw"), numpy_helper.from_array(self.sy, "sy"),
                numpy_helper.from_array(self.zy, "zy")]
        w_attrs = {"axis": self.w_axis} if self.sw.ndim else {}
        nodes = [helper.make_node("DequantizeLinear", ["x", "sx", "zx"], ["xd"]),
                 helper.make_node("DequantizeLinear", ["w", "sw", "zw"], ["wd"], **w_attrs)]
        conv_in = ["xd", "wd"]
        if self.bias is not None:
            sb = (self.sx * self.sw).astype(np.float32)
            init += [numpy_helper.from_array(self.bias, "b"), numpy_helper.from_array(sb, "sb")]
            nodes.append(helper.make_node("DequantizeLinear", ["b", "sb"], ["bd"],
                                          **({"axis": 0} if sb.ndim else {})))
            conv_in.append("bd")
        nodes.append(helper.make_node("Conv", conv_in, ["c"], name="conv", group=self.group,
                                      strides=self.strides, pads=self.pads,
                                      dilations=self.dilations))
        out = "y"
        if self.activation == "relu_before_q":  # Conv -> Relu -> Q (ORT removes the Relu)
            nodes += [helper.make_node("Relu", ["c"], ["cr"]),
                      helper.make_node("QuantizeLinear", ["cr", "sy", "zy"], ["y"])]
        else:
            nodes.append(helper.make_node("QuantizeLinear", ["c", "sy", "zy"], ["y"]))
        if self.activation in ("relu", "clip"):  # -> DQ -> Relu | Clip(0, 6) -> Q
            nodes.append(helper.make_node("DequantizeLinear", ["y", "sy", "zy"], ["yd"]))
            if self.activation == "relu":
                nodes.append(helper.make_node("Relu", ["yd"], ["ya"]))
            else:
                init += [numpy_helper.from_array(np.float32(0), "lo"),
                         numpy_helper.from_array(np.float32(6), "hi")]
                nodes.append(helper.make_node("Clip", ["yd", "lo", "hi"], ["ya"]))
            nodes.append(helper.make_node("QuantizeLinear", ["ya", "sy", "zy"], ["out"]))
            out = "out"
        graph = helper.make_graph(
            nodes, "qdq_conv",
            [helper.make_tensor_value_info("x", TYPE_CODE[self.x_type], self.x_shape)],
            [helper.make_tensor_value_info(out, TYPE_CODE[self.x_type], None)], init)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
        m.ir_version = 10
        return m.SerializeToString()

    def feeds(self):
        if getattr(self, "x_spread", None):  # values within x_spread of the zero point
            offset = self.rng.integers(-self.x_spread, self.x_spread + 1, size=self.x_shape)
            return {"x": (offset + int(self.zx)).astype(self.x_type)}
        return {"x": random_q(self.rng, self.x_type, self.x_shape)}

    def make_tie_heavy(self):
        """test_qdq_fusion's scales: (sx * sw[o]) / sy is exactly 0.5 * 2^(o % 3) while every
        other order of the three is one ulp below, and small products: many exact results
        are k + 0.5, so another multiplier order or rounding changes outputs."""
        self.sx = np.float32("0.018441325")
        base = np.float32("0.034255754")
        self.sw = (base * np.float32(2.0) ** (np.arange(self.c_out) % 3)).astype(np.float32)
        self.zw = np.zeros(self.c_out, self.w_type)
        self.sy = np.float32("0.001263443")
        assert np.all((self.sx * self.sw) / self.sy == 0.5 * 2.0 ** (np.arange(self.c_out) % 3))
        self.w = self.rng.integers(-3, 4, size=self.w.shape).astype(self.w_type)
        self.x_spread = 3

    def exact_real(self, x):
        """y / sy before rounding, from an int64 convolution over an explicitly padded x."""
        nd = len(self.kernel)
        xi = x.astype(np.int64) - int(self.zx)
        xi = np.pad(xi, [(0, 0), (0, 0)] + [(self.pads[i], self.pads[nd + i]) for i in range(nd)])
        wi = self.w.astype(np.int64) - self.zw.astype(np.int64).reshape(
            (-1,) + (1,) * (nd + 1) if self.zw.ndim else ())
        out_sp = [(xi.shape[2 + i] - (self.kernel[i] - 1) * self.dilations[i] - 1)
                  // self.strides[i] + 1 for i in range(nd)]
        cpg, opg = self.c_in // self.group, self.c_out // self.group
        acc = np.zeros([x.shape[0], self.c_out, *out_sp], np.int64)
        for tap in np.ndindex(*self.kernel):
            sl = tuple(slice(tap[i] * self.dilations[i],
                             tap[i] * self.dilations[i] + (out_sp[i] - 1) * self.strides[i] + 1,
                             self.strides[i]) for i in range(nd))
            patch = xi[(slice(None), slice(None)) + sl]  # [N, C, *out]
            for g in range(self.group):
                wg = wi[g * opg:(g + 1) * opg, :, *tap]  # [opg, cpg]
                acc[:, g * opg:(g + 1) * opg] += np.einsum(
                    "oc,nc...->no...", wg, patch[:, g * cpg:(g + 1) * cpg])
        if self.bias is not None:
            acc += self.bias.reshape((-1,) + (1,) * nd)
        scale = np.float64(self.sx) * self.sw.astype(np.float64)
        return acc * scale.reshape((-1,) + (1,) * nd if scale.ndim else ()) / np.float64(self.sy)


def check_conv(group, capfd, name, threads=1, expect_refused=None):
    model = group.model()
    feeds = group.feeds()
    (ours,), report = run_octet(model, feeds, capfd, threads=threads)
    if expect_refused:
        assert claimed(report) == (1, 0), report
        assert "qdq_refused why=%s op=Conv count=1" % expect_refused in report, report
    else:
        assert claimed(report) == (1, 1), report
    int8_allowed = group.x_type == np.int8
    if not expect_refused:
        assert "QLinearConv" in ort_ops(model, int8_allowed), name
        fused = run_ort(model, feeds, ALL, int8_allowed)[0]
        assert fused.dtype == ours.dtype and fused.shape == ours.shape
        worst = np.abs(fused.astype(np.int32) - ours.astype(np.int32)).max(initial=0)
        assert np.array_equal(fused, ours), "%s: worst |d| = %d against ORT_ENABLE_ALL" % (
            name, worst)
    unfused = run_ort(model, feeds, DISABLED)[0]
    assert unfused.dtype == ours.dtype and unfused.shape == ours.shape
    d = ours.astype(np.int32) - unfused.astype(np.int32)
    assert np.abs(d).max(initial=0) <= 1, "%s: worst |d| = %d LSB" % (name, np.abs(d).max())
    real = group.exact_real(feeds["x"])[d != 0]
    distance_to_tie = np.abs(real - np.floor(real) - 0.5)
    assert np.all(distance_to_tie < 2e-3), (
        "%s: 1-LSB differences away from a rounding tie: %s" % (name, real[distance_to_tie >= 2e-3]))
    print("%s: %d of %d values differ by 1 LSB from ORT_DISABLE_ALL (rounding ties)"
          % (name, np.count_nonzero(d), d.size))
    return ours


X_TYPES = pytest.mark.parametrize("x_type", [np.uint8, np.int8], ids=["u8", "s8"])


@X_TYPES
def test_per_tensor(x_type, capfd):
    check_conv(ConvGroup(np.random.default_rng(1), x_type, pads=[1, 1, 1, 1]), capfd, "per-tensor")


@X_TYPES
def test_per_channel_with_bias(x_type, capfd):
    group = ConvGroup(np.random.default_rng(2), x_type, per_channel=True, bias=True,
                      pads=[1, 0, 2, 1], zx=-3 if x_type == np.int8 else 200)
    check_conv(group, capfd, "per-channel + bias")


@X_TYPES
@pytest.mark.parametrize("activation", ["relu", "clip", "relu_before_q"])
def test_activation(x_type, activation, capfd):
    zy = (-128 if x_type == np.int8 else 0) if activation == "relu_before_q" else None
    group = ConvGroup(np.random.default_rng(3), x_type, per_channel=True, bias=True,
                      pads=[1, 1, 1, 1], activation=activation, zy=zy)
    if activation == "clip":  # y_scale 0.15: Clip(0, 6) clamps 40 steps above the zero point
        group.sx = np.float32(group.sx * (0.15 / group.sy))
        group.sy = np.float32(0.15)
    ours = check_conv(group, capfd, activation)
    if activation == "clip":
        assert ours.max() < np.iinfo(x_type).max  # the upper bound does clamp


@X_TYPES
@pytest.mark.parametrize("shape", ["grouped", "depthwise", "depthwise_x2", "depthwise_blocks",
                                   "depthwise_blocks_s2", "strided", "dilated", "1d", "1x1"])
def test_shapes(x_type, shape, capfd):
    rng = np.random.default_rng(4)
    kw = {
        "grouped": dict(c_in=12, c_out=6, group=3, pads=[1, 1, 1, 1]),
        "depthwise": dict(c_in=16, c_out=16, group=16, pads=[1, 1, 1, 1]),
        "depthwise_x2": dict(c_in=8, c_out=16, group=8, strides=[2, 2], pads=[1, 1, 1, 1]),
        # more than one block of 16 channels (the channel-vector path), a partial last
        # block; narrow rows, then rows past one 64-pixel step at stride 2
        "depthwise_blocks": dict(c_in=40, c_out=40, group=40, pads=[1, 1, 1, 1]),
        "depthwise_blocks_s2": dict(c_in=36, c_out=36, group=36, strides=[2, 2],
                                    pads=[1, 1, 1, 1], spatial=(9, 70)),
        "strided": dict(strides=[2, 1], pads=[0, 1, 2, 0], kernel=(5, 3), spatial=(13, 10)),
        "dilated": dict(dilations=[2, 2], pads=[2, 2, 2, 2]),
        "1d": dict(kernel=(3,), spatial=(31,), pads=[1, 1], strides=[2]),
        "1x1": dict(kernel=(1, 1), c_in=64, c_out=24),
    }[shape]
    check_conv(ConvGroup(rng, x_type, per_channel=True, bias=True, **kw), capfd, shape,
               threads=2)


@X_TYPES
def test_tie_heavy(x_type, capfd):
    group = ConvGroup(np.random.default_rng(11), x_type, per_channel=True, pads=[1, 1, 1, 1],
                      zx=-20 if x_type == np.int8 else 100)
    group.make_tie_heavy()
    check_conv(group, capfd, "tie-heavy")


def test_uint8_weights(capfd):
    check_conv(ConvGroup(np.random.default_rng(5), np.uint8, np.uint8, zw=131, pads=[1, 1, 1, 1]),
               capfd, "u8 weights")


def test_refused_weight_scale_not_per_output_channel(capfd):
    group = ConvGroup(np.random.default_rng(6), c_in=8, c_out=8, per_channel=True, w_axis=1)
    check_conv(group, capfd, "axis 1", expect_refused="scale_not_per_output_channel")


def test_refused_bias_scale(capfd):
    group = ConvGroup(np.random.default_rng(7), per_channel=True, bias=True)
    model = onnx.load_from_string(group.model())
    sb = next(t for t in model.graph.initializer if t.name == "sb")
    sb.CopyFrom(numpy_helper.from_array(numpy_helper.to_array(sb) * np.float32(2), "sb"))
    (ours,), report = run_octet(model.SerializeToString(), group.feeds(), capfd)
    assert claimed(report) == (1, 0), report
    assert "qdq_refused why=bias_scale op=Conv count=1" in report, report


def test_refused_float_output_runs_unfused(capfd):
    group = ConvGroup(np.random.default_rng(8), per_channel=True)
    model = onnx.load_from_string(group.model())
    del model.graph.node[-1]
    model.graph.output[0].CopyFrom(helper.make_tensor_value_info("c", TensorProto.FLOAT, None))
    feeds = group.feeds()
    (ours,), report = run_octet(model.SerializeToString(), feeds, capfd)
    assert "qdq_refused why=float_output op=Conv count=1" in report, report
    unfused = run_ort(model.SerializeToString(), feeds, DISABLED)[0]
    np.testing.assert_allclose(ours, unfused, rtol=1e-5, atol=1e-5 * np.abs(unfused).max())


def test_qdq_off_is_the_control(capfd, monkeypatch):
    group = ConvGroup(np.random.default_rng(9), per_channel=True, bias=True, pads=[1, 1, 1, 1])
    model, feeds = group.model(), group.feeds()
    (fused,), _ = run_octet(model, feeds, capfd)
    monkeypatch.setenv("OCTET_QDQ", "0")
    (control,), report = run_octet(model, feeds, capfd)
    assert "qdq_groups" not in report
    assert np.abs(fused.astype(np.int32) - control.astype(np.int32)).max() <= 1


# A small CNN quantized by onnxruntime.quantization.quantize_static.

class Reader(CalibrationDataReader):
    def __init__(self, batches):
        self.batches = iter(batches)

    def get_next(self):
        return next(self.batches, None)


def float_cnn(rng):
    w1 = rng.normal(0, 0.3, (16, 3, 3, 3)).astype(np.float32)
    b1 = rng.normal(0, 0.1, 16).astype(np.float32)
    w2 = rng.normal(0, 0.3, (16, 1, 3, 3)).astype(np.float32)  # depthwise
    b2 = rng.normal(0, 0.1, 16).astype(np.float32)
    w3 = rng.normal(0, 0.2, (8, 16, 1, 1)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["x", "w1", "b1"], ["h1"], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Relu", ["h1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["h2"], pads=[1, 1, 1, 1], group=16),
             helper.make_node("Clip", ["h2", "lo", "hi"], ["r2"]),
             helper.make_node("Conv", ["r2", "w3"], ["y"])]
    init = [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(b1, "b1"),
            numpy_helper.from_array(w2, "w2"), numpy_helper.from_array(b2, "b2"),
            numpy_helper.from_array(w3, "w3"), numpy_helper.from_array(np.float32(0), "lo"),
            numpy_helper.from_array(np.float32(6), "hi")]
    graph = helper.make_graph(
        nodes, "cnn", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 8, 8])], init)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("activation", [QuantType.QUInt8, QuantType.QInt8], ids=["u8", "s8"])
def test_quantize_static_cnn(activation, tmp_path, capfd):
    rng = np.random.default_rng(10)
    float_path, q_path = tmp_path / "cnn.onnx", tmp_path / "cnn.qdq.onnx"
    onnx.save(float_cnn(rng), float_path)
    calib = [{"x": rng.normal(0, 1, (1, 3, 16, 16)).astype(np.float32)} for _ in range(4)]
    quantize_static(str(float_path), str(q_path), Reader(calib), quant_format=QuantFormat.QDQ,
                    activation_type=activation, weight_type=QuantType.QInt8, per_channel=True)
    model = onnx.load(q_path)
    assert [n.op_type for n in model.graph.node].count("Conv") == 3
    feeds = {"x": rng.normal(0, 1, (1, 3, 16, 16)).astype(np.float32)}
    (ours,), report = run_octet(model.SerializeToString(), feeds, capfd)
    assert claimed(report) == (3, 3), report
    assert "qdq_refused" not in report, report
    int8_allowed = activation == QuantType.QInt8
    assert ort_ops(model.SerializeToString(), int8_allowed).count("QLinearConv") == 3
    fused = run_ort(model.SerializeToString(), feeds, ALL, int8_allowed)[0]
    assert np.array_equal(ours, fused), np.abs(ours - fused).max()
    unfused = run_ort(model.SerializeToString(), feeds, DISABLED)[0]
    np.testing.assert_allclose(ours, unfused, atol=2 * np.abs(unfused).max() / 100)
