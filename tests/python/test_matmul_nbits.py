"""4-bit weights against ONNX Runtime 1.31.1: com.microsoft MatMulNBits at accuracy
levels 1 (float) and 4 (int8 activations), the folded DequantizeLinear(int4 / uint4,
blocked along K) -> MatMul, and com.microsoft GatherBlockQuantized. Models are built
here with onnx.helper (docs/int8.md, "4-bit weights")."""

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as TP
from onnx import helper, numpy_helper

import octet

OPSETS = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]


def _model(nodes, inputs, inits, out="Y"):
    graph = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info(out, TP.FLOAT, None)],
                              inits)
    return helper.make_model(graph, opset_imports=OPSETS, ir_version=10).SerializeToString()


def _ort(model, feeds, level=None, config=None):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    if level is not None:
        so.graph_optimization_level = level
    if config is not None:
        so.add_session_config_entry(*config)
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _octet(model, feeds, threads=1):
    return octet.InferenceSession(model, threads=threads).run(None, feeds)[0]


def _weights(rng, K, N, bs, zero):
    """Codes q [N, K] in 0..15, scales [N, kb], zero points [N, kb] (or None)."""
    kb = (K + bs - 1) // bs
    q = rng.integers(0, 16, (N, K)).astype(np.uint8)
    scales = rng.uniform(0.005, 0.05, (N, kb)).astype(np.float32)
    if zero == "absent":
        z = None
    elif zero == "random":
        z = rng.integers(0, 16, (N, kb)).astype(np.uint8)
    else:
        z = np.full((N, kb), zero, np.uint8)
    return q, scales, z


def _nbits_model(q, scales, z, K, N, bs, level, bias=None, float_zero=False):
    kb = scales.shape[1]
    padded = np.zeros((N, kb * bs), np.uint8)
    padded[:, :K] = q
    b = (padded[:, 0::2] | (padded[:, 1::2] << 4)).reshape(N, kb, bs // 2)
    inits = [numpy_helper.from_array(b, "B"), numpy_helper.from_array(scales.reshape(-1), "S")]
    names = ["A", "B", "S"]
    if z is not None and float_zero:
        inits.append(numpy_helper.from_array(z.astype(np.float32).reshape(-1), "Z"))
        names.append("Z")
    elif z is not None:
        zp = np.zeros((N, (kb + 1) // 2 * 2), np.uint8)
        zp[:, :kb] = z
        inits.append(numpy_helper.from_array((zp[:, 0::2] | (zp[:, 1::2] << 4)).astype(np.uint8), "Z"))
        names.append("Z")
    if bias is not None:
        names += [""] * (5 - len(names)) + ["bias"]
        inits.append(numpy_helper.from_array(bias, "bias"))
    node = helper.make_node("MatMulNBits", names, ["Y"], domain="com.microsoft", K=K, N=N, bits=4,
                            block_size=bs, accuracy_level=level)
    return _model([node], [helper.make_tensor_value_info("A", TP.FLOAT, None)], inits)


def _dq_matmul_model(q, scales, z, K, N, bs, signed=False):
    """DequantizeLinear(W [K, N] uint4 / int4, axis 0, block_size) -> MatMul: the same weights."""
    if signed:
        w = numpy_helper.from_array((q.T.astype(np.int8) - 8).astype(ml_dtypes.int4), "W")
        zt = None if z is None else numpy_helper.from_array(
            (z.T.astype(np.int8) - 8).astype(ml_dtypes.int4), "Z")
    else:
        w = numpy_helper.from_array(q.T.copy().astype(ml_dtypes.uint4), "W")
        zt = None if z is None else numpy_helper.from_array(z.T.copy().astype(ml_dtypes.uint4), "Z")
    inits = [w, numpy_helper.from_array(scales.T.copy(), "S")] + ([zt] if zt is not None else [])
    dq = helper.make_node("DequantizeLinear", ["W", "S"] + (["Z"] if zt is not None else []), ["Wf"],
                          axis=0, block_size=bs)
    mm = helper.make_node("MatMul", ["A", "Wf"], ["Y"], name="mm")
    return _model([dq, mm], [helper.make_tensor_value_info("A", TP.FLOAT, None)], inits)


def _dequantized(q, scales, z, bs):
    """The float weights [K, N] as DequantizeLinear computes them (the 8 default of MatMulNBits)."""
    K = q.shape[1]
    zero = np.full(scales.shape, 8, np.float32) if z is None else z.astype(np.float32)
    w = (q.astype(np.float32) - np.repeat(zero, bs, 1)[:, :K]) * np.repeat(scales, bs, 1)[:, :K]
    return w.T


SHAPES = [(1, 64, 16, 32), (2, 100, 33, 32), (5, 256, 17, 128), (33, 96, 40, 16), (3, 16, 5, 16),
          (2, 64, 150, 32), (3, 75, 70, 16)]
ZEROS = ["absent", "random", 0, 15]


def _float_bound(a, q, scales, z, bs):
    """The float arithmetic's worst-case error (docs/int8.md, "4-bit weights"): per block two
    fma chains over a * q, the block's sum of a and the zero point once, the scale once per
    block: (bs + kb + 2) roundings of 2^-24 (x 2) over the magnitudes sum |a| |s| (q + |zp|)."""
    K = q.shape[1]
    kb = scales.shape[1]
    zero = np.full(scales.shape, 8, np.float64) if z is None else z.astype(np.float64)
    magnitude = (np.abs(np.repeat(scales, bs, 1)[:, :K].astype(np.float64))
                 * (q + np.abs(np.repeat(zero, bs, 1)[:, :K]))).T
    return (bs + kb + 2) * 2.0 ** -23 * (np.abs(a.astype(np.float64)) @ magnitude)


@pytest.mark.parametrize("M,K,N,bs", SHAPES)
@pytest.mark.parametrize("zero", ZEROS)
def test_level1_is_the_float_product(M, K, N, bs, zero, monkeypatch):
    rng = np.random.default_rng(M * K + N)
    q, scales, z = _weights(rng, K, N, bs, zero)
    a = rng.standard_normal((M, K)).astype(np.float32)
    y = _octet(_nbits_model(q, scales, z, K, N, bs, 1), {"A": a})
    # The same weights written as DQ(uint4) -> MatMul fold into the same kernel: the default
    # zero point of MatMulNBits (8) spelled out.
    z8 = np.full(scales.shape, 8, np.uint8) if z is None else z
    assert y.tobytes() == _octet(_dq_matmul_model(q, scales, z8, K, N, bs), {"A": a}).tobytes()
    # The exact product, the pair run node by node (dequantized weights, then the float
    # GEMM) and ONNX Runtime: each within its float rounding.
    w = _dequantized(q, scales, z, bs).astype(np.float64)
    exact = a.astype(np.float64) @ w
    bound = _float_bound(a, q, scales, z, bs)
    assert np.all(np.abs(y - exact) <= bound)
    monkeypatch.setenv("OCTET_QDQ", "0")
    unfused = _octet(_dq_matmul_model(q, scales, z8, K, N, bs), {"A": a})
    chain = K * 2.0 ** -23 * (np.abs(a.astype(np.float64)) @ np.abs(w))
    assert np.all(np.abs(unfused - exact) <= chain)
    y_ort = _ort(_nbits_model(q, scales, z, K, N, bs, 1), {"A": a})
    assert np.all(np.abs(y_ort - exact) <= chain)


def _level4_expected(a, q, scales, z, bs, bias=None):
    """octet's documented level-4 order (docs/int8.md), emulated: MLAS's A quantization,
    exact int dot products per block, fma across blocks in long double, rounded to float32."""
    M, K = a.shape
    N, kb = scales.shape
    zero = np.full((N, kb), 8, np.int64) if z is None else z.astype(np.int64)
    acc = np.zeros((M, N), np.float32)
    for b in range(kb):
        blk = a[:, b * bs:(b + 1) * bs]
        amax = np.abs(blk).max(1)
        inv = np.where(amax != 0, np.float32(127) / np.where(amax != 0, amax, 1), 0).astype(np.float32)
        qa = np.rint(blk * inv[:, None]).astype(np.int64)
        qb = q[:, b * bs:(b + 1) * bs].astype(np.int64) - zero[:, b:b + 1]
        dot = (qa @ qb.T).astype(np.float32)
        s = (amax / np.float32(127)).astype(np.float32)[:, None] * scales[:, b][None, :]
        acc = (dot.astype(np.longdouble) * s.astype(np.float32) + acc).astype(np.float32)
    return acc if bias is None else (acc + bias).astype(np.float32)


@pytest.mark.parametrize("M,K,N,bs", SHAPES)
@pytest.mark.parametrize("zero", ZEROS)
def test_level4_order_and_distance_to_onnxruntime(M, K, N, bs, zero):
    rng = np.random.default_rng(7 * M + K + N)
    q, scales, z = _weights(rng, K, N, bs, zero)
    a = rng.standard_normal((M, K)).astype(np.float32)
    bias = rng.standard_normal(N).astype(np.float32) if M % 2 else None
    model = _nbits_model(q, scales, z, K, N, bs, 4, bias)
    y = _octet(model, {"A": a})
    assert y.tobytes() == _level4_expected(a, q, scales, z, bs, bias).tobytes()
    assert y.tobytes() == _octet(model, {"A": a}, threads=2).tobytes()
    # ONNX Runtime quantizes A the same way but adds the zero point's term in float and
    # sums the blocks per vector lane: within float rounding of the per-block terms.
    y_ort = _ort(model, {"A": a})
    w = np.abs(_dequantized(q, scales, z, bs)).astype(np.float64)
    bound = 8 * K * 2.0 ** -23 * (np.abs(a.astype(np.float64)) @ w + 8 * np.abs(a) @ np.abs(
        np.repeat(scales, bs, 1)[:, :K].T.astype(np.float64)))
    d = np.abs(y.astype(np.float64) - y_ort)
    assert np.all(d <= bound + 1e-30), d.max()
    ulp = np.abs(y.view(np.int32).astype(np.int64) - y_ort.view(np.int32).astype(np.int64))
    print(f"level 4 vs ORT M={M} K={K} N={N} bs={bs} zero={zero}: equal {np.mean(d == 0):.3f}, "
          f"max ulp {ulp.max()}, max rel {(d / np.maximum(np.abs(y_ort), 1e-30)).max():.2e}")


def test_float_zero_points_run_the_float_arithmetic_at_level_4():
    rng = np.random.default_rng(5)
    K, N, bs = 64, 9, 32
    q, scales, z = _weights(rng, K, N, bs, "random")
    a = rng.standard_normal((3, K)).astype(np.float32)
    y4 = _octet(_nbits_model(q, scales, z, K, N, bs, 4, float_zero=True), {"A": a})
    y1 = _octet(_nbits_model(q, scales, z, K, N, bs, 1), {"A": a})
    assert y4.tobytes() == y1.tobytes()
    # ONNX Runtime: float zero points give level 4 the level-1 result of the same model.
    assert np.array_equal(_ort(_nbits_model(q, scales, z, K, N, bs, 4, float_zero=True), {"A": a}),
                          _ort(_nbits_model(q, scales, z, K, N, bs, 1, float_zero=True), {"A": a}))


def test_refusals():
    rng = np.random.default_rng(1)
    q, scales, z = _weights(rng, 32, 4, 32, "absent")
    model = onnx.load_from_string(_nbits_model(q, scales, z, 32, 4, 32, 1))
    next(a for a in model.graph.node[0].attribute if a.name == "bits").i = 3
    with pytest.raises(octet.OctetError, match="bits 3 is not supported"):
        octet.InferenceSession(model.SerializeToString())


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("bs,zero", [(32, "random"), (128, "absent"), (32, 0), (128, 15)])
def test_dequantize_matmul_fold_is_the_float_product(signed, bs, zero, monkeypatch, tmp_path):
    rng = np.random.default_rng(bs)
    K, N = 2 * bs + 32, 24
    q, scales, z = _weights(rng, K, N, bs, zero)
    model = _dq_matmul_model(q, scales, z, K, N, bs, signed)
    path = tmp_path / "m.onnx"
    path.write_bytes(model)
    assert "octet.BlockedDqMatMul" in octet.inspect(str(path))
    for M in (1, 2, 5):
        a = rng.standard_normal((M, K)).astype(np.float32)
        fused = _octet(model, {"A": a})
        monkeypatch.setenv("OCTET_QDQ", "0")
        unfused = _octet(model, {"A": a})
        monkeypatch.delenv("OCTET_QDQ")
        zero8 = z if z is not None else np.full(scales.shape, 0 if not signed else 8, np.uint8)
        w = np.abs(_dequantized(q, scales, zero8, bs)).astype(np.float64)
        exact = a.astype(np.float64) @ _dequantized(q, scales, zero8, bs).astype(np.float64)
        assert np.all(np.abs(fused - exact) <= _float_bound(a, q, scales, zero8, bs))
        assert np.all(np.abs(unfused - exact) <= K * 2.0 ** -23 * (np.abs(a) @ w))
        # ONNX Runtime's default options turn the pair into MatMulNBits at accuracy level 4
        # (session.qdq_matmulnbits_accuracy_level); the pair itself, and level 1, are float.
        for options in ({"level": ort.GraphOptimizationLevel.ORT_DISABLE_ALL},
                        {"config": ("session.qdq_matmulnbits_accuracy_level", "1")}):
            y_ort = _ort(model, {"A": a}, **options)
            assert np.all(np.abs(y_ort - exact) <= K * 2.0 ** -23 * (np.abs(a) @ w))


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.parametrize("bs,zero", [(32, "random"), (128, "absent")])
def test_forward_route_gives_the_pair_level_4(signed, bs, zero):
    """float_matmul="int8": the folded pair takes MatMulNBits' accuracy level 4, as ONNX
    Runtime's default options do, in octet's documented level-4 order."""
    rng = np.random.default_rng(bs + signed)
    K, N = 2 * bs + 32, 24
    q, scales, z = _weights(rng, K, N, bs, zero)
    model = _dq_matmul_model(q, scales, z, K, N, bs, signed)
    zero8 = z if z is not None else np.full(scales.shape, 8 if signed else 0, np.uint8)
    session = octet.InferenceSession(model, float_matmul="int8")
    for M in (1, 5, 33):
        a = rng.standard_normal((M, K)).astype(np.float32)
        y = session.run(None, {"A": a})[0]
        assert y.tobytes() == _level4_expected(a, q, scales, zero8, bs).tobytes()
        assert not np.array_equal(y, _octet(model, {"A": a}))  # not the float arithmetic


def _side_by_side(models):
    """Single-product models on one input A, as one graph: product i's names prefixed
    p<i>/, its output p<i>/Y."""
    nodes, inits, outputs = [], [], []
    for i, model in enumerate(models):
        g = onnx.load_from_string(model).graph
        rename = lambda name: name if name in ("A", "") else "p%d/%s" % (i, name)
        for node in g.node:
            node.input[:] = [rename(n) for n in node.input]
            node.output[:] = [rename(n) for n in node.output]
            node.name = rename(node.name or node.op_type)
            nodes.append(node)
        for t in g.initializer:
            t.name = rename(t.name)
            inits.append(t)
        outputs.append(helper.make_tensor_value_info(rename("Y"), TP.FLOAT, None))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("A", TP.FLOAT, None)],
                              outputs, inits)
    return helper.make_model(graph, opset_imports=OPSETS, ir_version=10).SerializeToString()


@pytest.mark.parametrize("form", ["level1", "level4", "dq_uint4", "dq_int4"])
def test_products_of_one_input_run_as_one_with_their_bits(form, monkeypatch):
    """A decoder layer's q, k and v projections: 4-bit products of one input run as one
    octet.NBitsSiblings node, each output with the bits it has alone (OCTET_QDQ_SIBLINGS=0)
    and, for MatMulNBits, node by node (OCTET_QDQ=0), at one row, a few, and many (9, 33).
    Node by node a DequantizeLinear -> MatMul pair is the float GEMM's order, another
    rounding of the same product (test_dequantize_matmul_fold_is_the_float_product)."""
    rng = np.random.default_rng(len(form))
    K, bs = 96, 32
    parts = []
    # Columns of every product but the last a multiple of 64 (docs/qdq.md).
    for N, zero in ((128, "random"), (64, "absent"), (5, 15)):
        q, scales, z = _weights(rng, K, N, bs, zero)
        if form.startswith("dq"):
            parts.append(_dq_matmul_model(q, scales, z, K, N, bs, signed=form == "dq_int4"))
        else:
            parts.append(_nbits_model(q, scales, z, K, N, bs, 1 if form == "level1" else 4))
    model = _side_by_side(parts)
    feeds = [{"A": rng.standard_normal((M, K)).astype(np.float32)} for M in (1, 3, 9, 33)]
    runs = {}
    for control in ("", "OCTET_QDQ_SIBLINGS", "OCTET_QDQ"):
        if control:
            monkeypatch.setenv(control, "0")
        for threads in (1, 2):
            session = octet.InferenceSession(model, threads=threads)
            session.set_profiling(True)
            runs[control, threads] = [session.run(None, f) for f in feeds]
            ops = {o["op"] for o in session.profile()["ops"]}
            assert ("octet.NBitsSiblings" in ops) == (control == ""), (control, ops)
    want = runs["OCTET_QDQ_SIBLINGS", 1]
    for key, got in runs.items():
        if key[0] == "OCTET_QDQ" and form.startswith("dq"):
            continue
        for outs, expected in zip(got, want):
            assert [y.tobytes() for y in outs] == [y.tobytes() for y in expected], key


def _gbq_model(data, scales, zero, **attrs):
    inits = [data, numpy_helper.from_array(scales, "S")]
    names = ["D", "I", "S"]
    if zero is not None:
        inits.append(zero)
        names.append("Z")
    node = helper.make_node("GatherBlockQuantized", names, ["Y"], domain="com.microsoft", **attrs)
    return _model([node], [helper.make_tensor_value_info("I", TP.INT64, None)], inits)


@pytest.mark.parametrize("form", ["packed", "packed_zero", "int4", "int4_zero", "uint4",
                                  "uint4_zero"])
def test_gather_block_quantized_equals_onnxruntime(form):
    """Constant int4 / uint4 data is held as packed codes after creation (the initializer is
    freed); uint4 takes an odd number of elements, so the last code sits alone in a byte."""
    rng = np.random.default_rng(11)
    V, E, bs = (13, 41, 16) if form.startswith("uint4") else (12, 64, 16)
    blocks = -(-E // bs)
    scales = rng.uniform(0.01, 1, (V, blocks)).astype(np.float32)
    zq = rng.integers(0, 16, (V, blocks)).astype(np.uint8)
    if form.startswith("packed"):
        qv = rng.integers(0, 16, (V, E)).astype(np.uint8)
        data = numpy_helper.from_array((qv[:, 0::2] | (qv[:, 1::2] << 4)).astype(np.uint8), "D")
        zero = numpy_helper.from_array((zq[:, 0::2] | (zq[:, 1::2] << 4)).astype(np.uint8), "Z")
    elif form.startswith("uint4"):
        qv = rng.integers(0, 16, (V, E)).astype(np.uint8)
        data = numpy_helper.from_array(qv.astype(ml_dtypes.uint4), "D")
        zero = numpy_helper.from_array(zq.astype(ml_dtypes.uint4), "Z")
    else:
        qv = rng.integers(-8, 8, (V, E)).astype(np.int8)
        data = numpy_helper.from_array(qv.astype(ml_dtypes.int4), "D")
        zero = numpy_helper.from_array((zq.astype(np.int8) - 8).astype(ml_dtypes.int4), "Z")
    model = _gbq_model(data, scales, zero if form.endswith("zero") else None, gather_axis=0,
                       quantize_axis=1, block_size=bs, bits=4)
    idx = np.array([[3, 0, 11], [-1, 3, 7]], np.int64)
    y = _octet(model, {"I": idx})
    assert y.shape == (2, 3, E)
    assert y.tobytes() == _ort(model, {"I": idx}).tobytes()
    with pytest.raises(octet.OctetError, match="out of range"):
        _octet(model, {"I": np.array([V], np.int64)})


def test_packed_weights_shared_with_other_readers():
    """A session frees an initializer once every reader packed it at creation
    (ops/registry.h, ReadsConstantInRun): two MatMulNBits nodes share B, a Mul reads the
    scales at run time, and the zero points are a graph output; every output equals ONNX
    Runtime's (level 1: octet's float products match ORT's within float rounding)."""
    rng = np.random.default_rng(11)
    K, N, bs = 64, 24, 32
    q, scales, z = _weights(rng, K, N, bs, "random")
    model = onnx.load_from_string(_nbits_model(q, scales, z, K, N, bs, 1))
    g = model.graph
    g.node.append(helper.make_node("MatMulNBits", ["A2", "B", "S", "Z"], ["Y2"],
                                   domain="com.microsoft", K=K, N=N, bits=4, block_size=bs,
                                   accuracy_level=1))
    g.node.append(helper.make_node("Mul", ["S", "S"], ["S2"]))
    g.input.append(helper.make_tensor_value_info("A2", TP.FLOAT, None))
    g.output.extend([helper.make_tensor_value_info(n, t, None)
                     for n, t in (("Y2", TP.FLOAT), ("S2", TP.FLOAT), ("Z", TP.UINT8))])
    feeds = {"A": rng.standard_normal((3, K)).astype(np.float32),
             "A2": rng.standard_normal((2, K)).astype(np.float32)}
    got = octet.InferenceSession(model.SerializeToString()).run(None, feeds)
    want = ort.InferenceSession(model.SerializeToString(),
                                providers=["CPUExecutionProvider"]).run(None, feeds)
    for g_out, w_out in zip(got, want):
        np.testing.assert_allclose(g_out, w_out, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[2], scales.reshape(-1) * scales.reshape(-1))


def test_large_external_4bit_tensors_give_the_bits_of_inline_ones(tmp_path):
    """4-bit initializers of at least 1 MiB at 64-byte offsets of an external data file stay
    packed in their mapping (docs/loading.md): a GatherBlockQuantized uint4 table read in
    place, two sibling DequantizeLinear(int4 / uint4) -> MatMul folds packed from theirs, and
    an unfused DequantizeLinear of an int4 initializer that is also a graph output (unpacked
    for both readers) give the bytes of the same model with every tensor inline, in a session that
    outlives the files; the table stays mapped from the file, a row read per index."""
    rng = np.random.default_rng(23)
    K, N, V, bs = 1024, 2048, 2048, 32

    def int4(shape):
        return rng.integers(-8, 8, shape).astype(np.int8).astype(ml_dtypes.int4)

    def uint4(shape):
        return rng.integers(0, 16, shape).astype(np.uint8).astype(ml_dtypes.uint4)

    def scales(shape):
        return rng.uniform(0.005, 0.05, shape).astype(np.float32)

    # W2's odd width starts every other row of it in a byte's high nibble.
    big = {"D": uint4((V, K)), "W1": int4((K, N)), "W2": uint4((K, N + 1)), "W3": int4((K, N))}
    small = {"DS": scales((V, K // bs)), "DZ": uint4((V, K // bs)),
             "S1": scales((K // bs, N)), "Z1": int4((K // bs, N)), "S2": scales((K // bs, N + 1)),
             "S3": scales((K // bs, N))}
    inits = [numpy_helper.from_array(v, k) for k, v in {**big, **small}.items()]
    nodes = [
        helper.make_node("GatherBlockQuantized", ["D", "I", "DS", "DZ"], ["rows"],
                         domain="com.microsoft", gather_axis=0, quantize_axis=1, block_size=bs,
                         bits=4),
        helper.make_node("DequantizeLinear", ["W1", "S1", "Z1"], ["W1f"], axis=0, block_size=bs),
        helper.make_node("MatMul", ["A", "W1f"], ["Y1"]),
        helper.make_node("DequantizeLinear", ["W2", "S2"], ["W2f"], axis=0, block_size=bs),
        helper.make_node("MatMul", ["A", "W2f"], ["Y2"]),
        helper.make_node("DequantizeLinear", ["W3", "S3"], ["W3f"], axis=0, block_size=bs)]
    outputs = [helper.make_tensor_value_info(n, t, None) for n, t in
               (("rows", TP.FLOAT), ("Y1", TP.FLOAT), ("Y2", TP.FLOAT), ("W3f", TP.FLOAT),
                ("W3", TP.INT4))]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("I", TP.INT64, None),
                                           helper.make_tensor_value_info("A", TP.FLOAT, None)],
                              outputs, inits)
    model = helper.make_model(graph, opset_imports=OPSETS, ir_version=10)
    feeds = {"I": np.array([5, V - 1, 0, 5], np.int64),
             "A": rng.standard_normal((3, K)).astype(np.float32)}
    inline = octet.InferenceSession(model.SerializeToString()).run(None, feeds)

    folder = tmp_path / "external"
    folder.mkdir()
    onnx.save_model(model, folder / "model.onnx", save_as_external_data=True,
                    location="model.data", size_threshold=1 << 20)
    stored = onnx.load(folder / "model.onnx", load_external_data=False)
    offsets = {t.name: int({e.key: e.value for e in t.external_data}["offset"])
               for t in stored.graph.initializer if t.external_data}
    assert set(offsets) == set(big) and all(o % 64 == 0 for o in offsets.values()), offsets
    session = octet.InferenceSession(folder / "model.onnx")
    with open("/proc/self/maps") as maps:
        assert str(folder / "model.data") in maps.read()
    for f in folder.iterdir():
        f.unlink()
    external = session.run(None, feeds)
    assert [y.tobytes() for y in external] == [y.tobytes() for y in inline]
    assert inline[4].dtype == ml_dtypes.int4
    np.testing.assert_array_equal(inline[4].astype(np.int8), big["W3"].astype(np.int8))
