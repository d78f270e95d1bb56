"""Pointwise chains on 8-bit data folded into one table lookup (rewrite/qdq_lookup.h).

The table is made by running the chain's own kernels on the 256 possible inputs, so the
folded graph must give the same bits as the graph with every pass but this one
(OCTET_QDQ_LOOKUP=0; the binary pass may have changed how a Mul is computed),
on every input value, and stay within ONNX Runtime's result as the unfused graph does.
Chains: SiLU in QDQ form (the detector's x * Sigmoid(x)), GELU in QDQ form (MiniLM's
x * 0.5 * (1 + Erf(x / sqrt 2)) with a requantize after every step), one whose input is
made by another node (which must keep running), a chain ending in
float, a chain whose constant has rank 2 (the output rank grows), and chains that must
not fold (a value read outside the chain, per-axis parameters).
"""

import re

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import octet

CODE = {np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8}


def all_values(dtype, shape=(4, 64)):
    """Every value of the 8-bit type, each at several positions (and a ragged length)."""
    info = np.iinfo(dtype)
    values = np.arange(info.min, info.max + 1)
    return np.resize(np.random.default_rng(0).permutation(values), shape).astype(dtype)


def scalar(name, value, dtype=np.float32):
    return numpy_helper.from_array(np.array(value, dtype), name)


class Chain:
    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)
        self.nodes, self.inits, self.count = [], [], 0
        self.zero = 3 if self.dtype == np.int8 else 131

    def const(self, value, dtype=np.float32, shape=()):
        self.count += 1
        name = "c%d" % self.count
        self.inits.append(numpy_helper.from_array(np.full(shape, value, dtype), name))
        return name

    def node(self, op, inputs, **attrs):
        self.count += 1
        out = "v%d" % self.count
        self.nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def dq(self, x, scale):
        return self.node("DequantizeLinear", [x, self.const(scale), self.const(self.zero, self.dtype)])

    def q(self, x, scale):
        return self.node("QuantizeLinear", [x, self.const(scale), self.const(self.zero, self.dtype)])

    def model(self, outputs, x_shape=(4, 64)):
        graph = helper.make_graph(
            self.nodes, "chain", [helper.make_tensor_value_info("x", CODE[self.dtype], x_shape)],
            [helper.make_tensor_value_info(name, code, None) for name, code in outputs], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
        return model.SerializeToString()


def silu(dtype):
    c = Chain(dtype)
    xd = c.dq("x", 0.05)
    s = c.dq(c.q(c.node("Sigmoid", [xd]), 1 / 255), 1 / 255)
    y = c.q(c.node("Mul", [xd, s]), 0.04)
    return c.model([(y, CODE[c.dtype])])


def gelu(dtype):
    c = Chain(dtype)
    xd = c.dq("x", 0.03)
    half = c.node("DequantizeLinear", [c.const(100, np.uint8), c.const(0.005), c.const(0, np.uint8)])
    scaled = c.dq(c.q(c.node("Mul", [xd, c.const(0.70710677)]), 0.02), 0.02)
    erf = c.dq(c.q(c.node("Erf", [scaled]), 1 / 127), 1 / 127)
    one = c.dq(c.q(c.node("Add", [erf, c.const(1.0)]), 2 / 255), 2 / 255)
    prod = c.dq(c.q(c.node("Mul", [xd, one]), 0.05), 0.05)
    y = c.q(c.node("Mul", [prod, half]), 0.03)
    return c.model([(y, CODE[c.dtype])])


def after_transpose(dtype):
    """The chain's input is made by another node (a Transpose), which must stay."""
    c = Chain(dtype)
    t = c.node("Transpose", ["x"], perm=[1, 0])
    xd = c.dq(t, 0.05)
    y = c.q(c.node("Mul", [xd, c.dq(c.q(c.node("Sigmoid", [xd]), 1 / 255), 1 / 255)]), 0.04)
    return c.model([(y, CODE[c.dtype])])


def float_exit(dtype):
    c = Chain(dtype)
    y = c.node("Tanh", [c.node("Mul", [c.dq("x", 0.1), c.const(-2.0)])])
    return c.model([(y, TensorProto.FLOAT)])


def rank_growing(dtype):
    c = Chain(dtype)
    y = c.q(c.node("Sigmoid", [c.node("Add", [c.dq("x", 0.1), c.const(0.5, shape=(1, 1, 1))])]),
            1 / 255)
    return c.model([(y, CODE[c.dtype])], x_shape=(64,))


def read_outside(dtype):
    """The Sigmoid's output is also a graph output: it stays, the rest folds."""
    c = Chain(dtype)
    s = c.node("Sigmoid", [c.dq("x", 0.05)])
    y = c.q(c.node("Mul", [s, c.const(3.0)]), 0.02)
    return c.model([(y, CODE[c.dtype]), (s, TensorProto.FLOAT)])


def per_axis(dtype):
    c = Chain(dtype)
    xd = c.node("DequantizeLinear", ["x", c.const(0.05, shape=(64,)),
                                     c.const(c.zero, c.dtype, shape=(64,))], axis=1)
    y = c.q(c.node("Sigmoid", [xd]), 1 / 255)
    return c.model([(y, CODE[c.dtype])])


def run_octet(model, x, monkeypatch, capfd, fold):
    monkeypatch.delenv("OCTET_QDQ", raising=False)
    monkeypatch.setenv("OCTET_QDQ_LOOKUP", "1" if fold else "0")
    monkeypatch.setenv("OCTET_QDQ_DEBUG", "1")
    capfd.readouterr()
    outputs = octet.InferenceSession(model).run(None, {"x": x})
    return outputs, capfd.readouterr().err


def run_ort(model, x, level=ort.GraphOptimizationLevel.ORT_ENABLE_ALL):
    options = ort.SessionOptions()
    options.graph_optimization_level = level
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})


def lookups(report):
    return re.findall(r"qdq_lookup node='[^']*' -> octet\.LookupTable \(([^)]*)\)", report)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8], ids=["u8", "s8"])
@pytest.mark.parametrize("make,folds", [(silu, 1), (gelu, 1), (after_transpose, 1),
                                        (float_exit, 1), (rank_growing, 1), (read_outside, 1),
                                        (per_axis, 0)],
                         ids=["silu", "gelu", "after_transpose", "float_exit", "rank_growing",
                              "read_outside", "per_axis"])
def test_fold_equals_unfused(make, folds, dtype, monkeypatch, capfd):
    model = make(dtype)
    x = all_values(dtype, (64,) if make is rank_growing else (4, 64))
    folded, report = run_octet(model, x, monkeypatch, capfd, fold=True)
    unfused, _ = run_octet(model, x, monkeypatch, capfd, fold=False)
    assert len(lookups(report)) == folds, report
    for ours, plain in zip(folded, unfused):
        assert ours.shape == plain.shape and ours.dtype == plain.dtype
        np.testing.assert_array_equal(ours.view(np.uint8), plain.view(np.uint8))
    # ONNX Runtime (ORT_ENABLE_ALL: it fuses the uint8 Mul as octet does) runs Sigmoid/Erf/Tanh
    # with its own approximations: the 8-bit results may differ by one step where a value
    # lands next to a rounding boundary. (ORT_ENABLE_ALL turns the per-axis DQ -> Sigmoid -> Q
    # into QLinearSigmoid and then fails at initialization, "X_scale must be a scalar": that
    # form is compared with ORT_DISABLE_ALL.)
    level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL if make is per_axis else \
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    for ours, theirs in zip(folded, run_ort(model, x, level)):
        assert ours.shape == theirs.shape
        if ours.dtype == np.float32:
            np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-6)
        else:
            diff = np.abs(ours.astype(np.int32) - theirs.astype(np.int32))
            assert diff.max() <= 1 and (diff > 0).mean() < 0.02, diff.max()


def test_every_input_value_maps_through_the_table(monkeypatch, capfd):
    """int8 -128 is entry 0 and uint8 0 is entry 0: check both ends of both types exactly."""
    for dtype in (np.int8, np.uint8):
        info = np.iinfo(dtype)
        x = np.array([[info.min, info.max, 0, 1, -1 if dtype == np.int8 else 254] * 4] * 4,
                     dtype)[:, :16]
        x = np.resize(x, (4, 64))
        folded, _ = run_octet(silu(dtype), x, monkeypatch, capfd, fold=True)
        unfused, _ = run_octet(silu(dtype), x, monkeypatch, capfd, fold=False)
        np.testing.assert_array_equal(folded[0], unfused[0])
