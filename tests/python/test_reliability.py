"""What octet's Python module promises about hostile input and many threads
(docs/reliability.md): every failure is an octet.OctetError (never UnicodeDecodeError,
MemoryError, TypeError or a crash), tensors beyond max_tensor_bytes are refused before
they are allocated, and one session's run() from 8 threads gives the bytes a lone run
gives, with the GIL released while octet runs."""

import os
import sys
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import octet

IR_VERSION = 10


def make_model(nodes, inputs, outputs, initializers=(), opset=21):
    graph = helper.make_graph(nodes, "test", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)],
                             ir_version=IR_VERSION)


def expect_error(fn, *needles):
    with pytest.raises(octet.OctetError) as info:
        fn()
    message = str(info.value)
    for needle in needles:
        assert needle in message, message
    return message


def qdq_matmul_model():
    """x float [batch, 32] -> Q/DQ -> MatMul(DQ(int8 W)) -> Q/DQ -> Relu -> y."""
    rng = np.random.default_rng(3)
    w = rng.integers(-127, 128, (32, 48)).astype(np.int8)
    inits = [numpy_helper.from_array(w, "w"),
             numpy_helper.from_array(np.float32(0.02), "xs"),
             numpy_helper.from_array(np.full(48, 0.004, np.float32), "ws"),
             numpy_helper.from_array(np.float32(0.05), "ys"),
             numpy_helper.from_array(np.int8(0), "z")]
    nodes = [helper.make_node("QuantizeLinear", ["x", "xs", "z"], ["xq"], name="q"),
             helper.make_node("DequantizeLinear", ["xq", "xs", "z"], ["xd"], name="dq"),
             helper.make_node("DequantizeLinear", ["w", "ws"], ["wd"], name="dqw", axis=1),
             helper.make_node("MatMul", ["xd", "wd"], ["h"], name="matmul"),
             helper.make_node("QuantizeLinear", ["h", "ys", "z"], ["hq"], name="qh"),
             helper.make_node("DequantizeLinear", ["hq", "ys", "z"], ["hd"], name="dqh"),
             helper.make_node("Relu", ["hd"], ["y"], name="relu")]
    return make_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                            ["batch", 32])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 48])],
                      inits)


# ---- every failure is an OctetError ---------------------------------------------------------

BAD = b"bad\xff".decode("latin-1")  # a str whose UTF-8 encoding is fine; bytes are set below


def with_bad_bytes(model, setter):
    """The model serialized with one text field holding the bytes b'bad\\xff'."""
    marker = "MARKER_FOR_BAD_BYTES"
    setter(model, marker)
    return model.SerializeToString().replace(marker.encode(), b"bad\xff" + b"_" * (len(marker) - 4))


@pytest.mark.parametrize("field,setter,needle", [
    ("node name", lambda m, s: setattr(m.graph.node[0], "name", s), "node 0 name"),
    ("input name", lambda m, s: (setattr(m.graph.input[0], "name", s),
                                 m.graph.node[0].input.__setitem__(0, s)), "graph input 0 name"),
    ("dim_param", lambda m, s: setattr(m.graph.input[0].type.tensor_type.shape.dim[0],
                                       "dim_param", s), "dimension 0 dim_param"),
    ("metadata", lambda m, s: m.metadata_props.add(key="k", value=s), "metadata_props[0]"),
    ("producer", lambda m, s: setattr(m, "producer_name", s), "producer_name"),
    ("initializer", lambda m, s: (setattr(m.graph.initializer[0], "name", s),
                                  m.graph.node[2].input.__setitem__(0, s)), "initializer 0 name"),
])
def test_text_that_is_not_utf8_is_refused_naming_the_field(field, setter, needle):
    data = with_bad_bytes(qdq_matmul_model(), setter)
    message = expect_error(lambda: octet.InferenceSession(data), needle, "is not valid UTF-8",
                           "bad\\xff")
    assert "\ufffd" not in message


def test_external_data_path_that_is_not_utf8_is_refused(tmp_path):
    model = qdq_matmul_model()
    w = model.graph.initializer[0]
    w.ClearField("raw_data")
    w.data_location = TensorProto.EXTERNAL
    w.external_data.add(key="location", value="MARKER_FOR_BAD_BYTES")
    data = model.SerializeToString().replace(b"MARKER_FOR_BAD_BYTES",
                                             b"bad\xff________________")
    path = tmp_path / "model.onnx"
    path.write_bytes(data)
    expect_error(lambda: octet.InferenceSession(path), "external data 'location'",
                 "is not valid UTF-8")


def test_large_external_weights_give_the_bits_of_inline_ones(tmp_path):
    """A float MatMul and a Gather whose 4 MB tables sit in an external data file (octet maps
    them from it) give the bytes the same model with the tables inline gives, in a session
    that outlives the model file's deletion."""
    rng = np.random.default_rng(3)
    w = numpy_helper.from_array(rng.standard_normal((1024, 1024)).astype(np.float32), "w")
    table = numpy_helper.from_array(rng.standard_normal((1024, 1024)).astype(np.float32), "t")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["t", "ids"], ["rows"]),
         helper.make_node("MatMul", ["rows", "w"], ["y"])], "g",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 1024])], [w, table])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    feeds = {"ids": np.array([5, 1023, 0], np.int64)}
    inline = octet.InferenceSession(model.SerializeToString()).run(None, feeds)[0]
    folder = tmp_path / "external"
    folder.mkdir()
    onnx.save_model(model, folder / "model.onnx", save_as_external_data=True,
                    location="model.data", size_threshold=1024)
    assert (folder / "model.data").stat().st_size >= 8 << 20
    session = octet.InferenceSession(folder / "model.onnx")
    for f in folder.iterdir():
        f.unlink()
    external = session.run(None, feeds)[0]
    assert external.tobytes() == inline.tobytes()


def test_paths_that_are_not_utf8_give_octet_errors(tmp_path):
    # A file name with a byte that is not UTF-8 (os.fsdecode gives a lone surrogate).
    name = os.fsdecode(b"model-\xff.onnx")
    path = tmp_path / name
    expect_error(lambda: octet.InferenceSession(path), "does not exist", "model-\\xff.onnx")
    path.write_bytes(qdq_matmul_model().SerializeToString())
    assert octet.InferenceSession(path).get_inputs()[0].name == "x"
    assert isinstance(octet.inspect(path), str)


def test_random_mutations_only_raise_octet_errors():
    """The issue's test: byte mutations of small models. Before UTF-8 checks, 16 of 2,400 raised
    UnicodeDecodeError. Every mutation must now load (and run) or raise OctetError."""
    rng = np.random.default_rng(19)
    bases = [qdq_matmul_model().SerializeToString()]
    conv = make_model(
        [helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"],
                          name="conv", pads=[1, 1, 1, 1])],
        [helper.make_tensor_value_info("x", TensorProto.UINT8, [1, 2, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.UINT8, None)],
        [numpy_helper.from_array(np.float32(0.1), "xs"), numpy_helper.from_array(np.uint8(3), "xz"),
         numpy_helper.from_array(rng.integers(-9, 9, (3, 2, 3, 3)).astype(np.int8), "w"),
         numpy_helper.from_array(np.float32(0.05), "ws"), numpy_helper.from_array(np.int8(0), "wz"),
         numpy_helper.from_array(np.float32(0.2), "ys"), numpy_helper.from_array(np.uint8(9), "yz")])
    bases.append(conv.SerializeToString())
    outcomes = {"loaded": 0, "OctetError": 0}
    for base in bases:
        for _ in range(1200):
            data = bytearray(base)
            for _ in range(int(rng.integers(1, 4))):
                data[int(rng.integers(len(data)))] = int(rng.integers(256))
            try:
                session = octet.InferenceSession(bytes(data))
                feeds = {}
                for arg in session.get_inputs():
                    shape = [d if isinstance(d, int) else 1 for d in arg.shape]
                    dtype = {"tensor(float)": np.float32, "tensor(uint8)": np.uint8}.get(arg.type)
                    if dtype is None or np.prod(shape) > 1 << 16:
                        raise octet.OctetError("skip")
                    feeds[arg.name] = np.zeros(shape, dtype)
                session.run(None, feeds)
                outcomes["loaded"] += 1
            except octet.OctetError:
                outcomes["OctetError"] += 1
    assert sum(outcomes.values()) == 2400
    assert outcomes["OctetError"] > 0 and outcomes["loaded"] > 0, outcomes


def test_bad_arguments_are_octet_errors():
    data = qdq_matmul_model().SerializeToString()
    expect_error(lambda: octet.InferenceSession(12), "model must be a path")
    expect_error(lambda: octet.InferenceSession(data, threads="2"), "threads must be an integer")
    expect_error(lambda: octet.InferenceSession(data, threads=-1), "threads must be")
    expect_error(lambda: octet.InferenceSession(data, threads=1 << 40), "threads must be")
    expect_error(lambda: octet.InferenceSession(data, max_tensor_bytes=0), "max_tensor_bytes")
    session = octet.InferenceSession(data)
    expect_error(lambda: session.run(None, {"x": [[1.0], [1.0, 2.0]]}), "input 'x'")
    expect_error(lambda: session.run(None, {"x": object()}), "input 'x'")
    expect_error(lambda: session.run(5, {"x": np.zeros((1, 32), np.float32)}), "output_names")
    expect_error(lambda: session.run(None, {1: np.zeros((1, 32), np.float32)}), "unknown input")
    expect_error(lambda: session.run(None, []), "input_feed must be a dict")
    expect_error(lambda: octet.inspect(3.5), "path must be")


# ---- the tensor size limit ----------------------------------------------------------------

def expand_model():
    return make_model([helper.make_node("Expand", ["x", "shape"], ["y"], name="expand")],
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1]),
                       helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])


def test_the_issues_expand_is_an_error_not_a_crash():
    """Expand to [2^31, 2^31] float killed the process with SIGSEGV."""
    session = octet.InferenceSession(expand_model().SerializeToString())
    feeds = {"x": np.ones((1, 1), np.float32), "shape": np.array([1 << 31, 1 << 31], np.int64)}
    expect_error(lambda: session.run(None, feeds), "Expand", "larger than the tensor size limit")
    feeds["shape"] = np.array([3, 2], np.int64)
    np.testing.assert_array_equal(session.run(None, feeds)[0], np.ones((3, 2), np.float32))


def test_max_tensor_bytes_bounds_initializers_and_run_time_tensors(monkeypatch):
    data = qdq_matmul_model().SerializeToString()  # w is 32 x 48 int8 = 1536 bytes
    expect_error(lambda: octet.InferenceSession(data, max_tensor_bytes=1024), "initializer 'w'",
                 "1 KiB")
    session = octet.InferenceSession(data, max_tensor_bytes=4096)
    session.run(None, {"x": np.zeros((2, 32), np.float32)})
    # y is [batch, 48] float: 192 bytes per row.
    expect_error(lambda: session.run(None, {"x": np.zeros((40, 32), np.float32)}),
                 "tensor size limit, 4 KiB")
    monkeypatch.setenv("OCTET_MAX_TENSOR_BYTES", "1K")
    expect_error(lambda: octet.InferenceSession(data), "1 KiB", "OCTET_MAX_TENSOR_BYTES")
    monkeypatch.setenv("OCTET_MAX_TENSOR_BYTES", "one gig")
    expect_error(lambda: octet.InferenceSession(data), "OCTET_MAX_TENSOR_BYTES is 'one gig'")


# ---- threads -------------------------------------------------------------------------------

def test_one_session_from_eight_python_threads_gives_identical_bytes():
    session = octet.InferenceSession(qdq_matmul_model().SerializeToString(), threads=2)
    rng = np.random.default_rng(8)
    # 64 rows and more: the kernels split them over the session's two pool threads, which the
    # concurrent runs then share.
    inputs = [rng.standard_normal((64 + t % 4, 32)).astype(np.float32) for t in range(8)]
    lone = octet.InferenceSession(qdq_matmul_model().SerializeToString(), threads=1)
    expected = [lone.run(None, {"x": x})[0].tobytes() for x in inputs]
    failures = []

    def work(t):
        for _ in range(50):
            (y,) = session.run(None, {"x": inputs[t]})
            if y.tobytes() != expected[t]:
                failures.append(t)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert failures == []


def test_run_releases_the_gil():
    """With the switch interval at 1000 s, Python switches threads only where the running one
    releases the GIL: if run() holds it, the main thread can look only after the run ended."""
    k = 1024
    model = make_model([helper.make_node("MatMul", ["a", "b"], ["c"])],
                       [helper.make_tensor_value_info("a", TensorProto.FLOAT, [k, k]),
                        helper.make_tensor_value_info("b", TensorProto.FLOAT, [k, k])],
                       [helper.make_tensor_value_info("c", TensorProto.FLOAT, [k, k])])
    session = octet.InferenceSession(model.SerializeToString())
    feeds = {"a": np.ones((k, k), np.float32), "b": np.ones((k, k), np.float32)}
    state = {"done": False}

    def run():
        session.run(None, feeds)
        state["done"] = True

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1000)
    try:
        thread = threading.Thread(target=run)
        thread.start()  # waits until the thread runs, then the thread keeps the GIL
        seen_during_run = not state["done"]
        thread.join()
    finally:
        sys.setswitchinterval(interval)
    assert state["done"]
    assert seen_during_run
