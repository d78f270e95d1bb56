"""Outputs wanted for their last row only (InferenceSession's last_row_outputs,
rewrite/last_row.h): on the tiny Qwen3-architecture decoder (tools/models/build_qwen3.py
--tiny), every quantized form and both graph forms, the logits of the last position are the
bits of the whole output's last row, with and without the KV cache octet holds, on 1 and 2
threads; outputs of other forms stay whole, with the reason in the rewrite report; a name
that is not an output is an error."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "models"))

import build_qwen3  # noqa: E402
import decoder  # noqa: E402
import quantize_llm  # noqa: E402

import octet  # noqa: E402

ALL = ("fp32",) + quantize_llm.VARIANTS
PROMPTS = [[72, 101, 108, 108, 111, 44, 32, 119, 111], [256, 7, 300]]


@pytest.fixture(scope="module")
def tiny():
    return build_qwen3.build(2, tiny=True, variants=ALL)


def logits_shape(session):
    return next(o.shape for o in session.get_outputs() if o.name == "logits")


@pytest.mark.parametrize("variant", ALL)
@pytest.mark.parametrize("form", ["cached", "plain"])
def test_the_last_rows_bits(tiny, variant, form):
    cfg, paths = tiny
    path = paths[form, variant]
    for threads in (1, 2):
        whole = octet.InferenceSession(path, threads=threads)
        last = octet.InferenceSession(path, threads=threads, last_row_outputs=["logits"])
        assert logits_shape(whole)[1] != 1 and logits_shape(last)[1] == 1
        for batch, prompts in ((1, PROMPTS[:1]), (1, [[5]]), (2, PROMPTS)):
            feeds = decoder.batch_feeds(prompts)
            feeds["position_ids"] = np.maximum(np.cumsum(feeds["attention_mask"], 1) - 1, 0)
            if form == "cached":
                feeds.update(decoder.empty_past(cfg, batch))
            expected = whole.run(["logits"], feeds)[0]
            got = last.run(["logits"], feeds)[0]
            assert got.shape == expected.shape[:1] + (1,) + expected.shape[2:]
            assert got.tobytes() == expected[:, -1:].tobytes(), (variant, form, threads, prompts)


@pytest.mark.parametrize("variant", ["fp32", "a8w8", "nbits_b32_acc1"])
def test_with_the_cache_octet_holds(tiny, variant):
    """Prefill, a chunk and single steps through new_kv_cache: each run's last row."""
    cfg, paths = tiny
    path = paths["cached", variant]
    whole = octet.InferenceSession(path)
    last = octet.InferenceSession(path, last_row_outputs=["logits"])
    cache_whole, cache_last = whole.new_kv_cache(), last.new_kv_cache()
    ids = list(PROMPTS[0])
    start = 0
    for chunk in (ids, [3, 4, 5], [6], [7]):
        feeds = {"input_ids": np.array([chunk], np.int64),
                 "attention_mask": np.ones((1, start + len(chunk)), np.int64),
                 "position_ids": np.arange(start, start + len(chunk), dtype=np.int64)[None]}
        expected = whole.run(["logits"], feeds, kv_cache=cache_whole)[0]
        got = last.run(["logits"], feeds, kv_cache=cache_last)[0]
        assert got.tobytes() == expected[:, -1:].tobytes(), (variant, start)
        start += len(chunk)


W = np.random.default_rng(0).standard_normal((8, 6)).astype(np.float32)


def product_model(tmp_path, tail=None, weight_input=False, bias=False, read_inside=False,
                  quantized_shared=False, vector=False):
    """y = x [batch, seq, 8] @ W (+ bias) (then `tail`), as a file, and y's name; the
    other arguments make forms the pass leaves whole on purpose."""
    nodes, inits, others = [], [], []
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", 8])]
    x = "x"
    if quantized_shared:  # the product's dequantized input is read by a Relu too
        inits += [numpy_helper.from_array(np.array(0.05, np.float32), "s"),
                  numpy_helper.from_array(np.array(3, np.int8), "z")]
        nodes += [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"]),
                  helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"]),
                  helper.make_node("Relu", ["xd"], ["other"])]
        others.append("other")
        x = "xd"
    if weight_input:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [8, 6]))
    else:
        inits.append(numpy_helper.from_array(W[:, 0] if vector else W, "w"))
    nodes.append(helper.make_node("MatMul", [x, "w"], ["p"]))
    y = "p"
    if bias:
        inits.append(numpy_helper.from_array(np.arange(6, dtype=np.float32), "b"))
        nodes.append(helper.make_node("Add", ["p", "b"], ["pb"]))
        y = "pb"
    if tail:
        nodes.append(helper.make_node(tail, [y], ["t"]))
        y = "t"
    if read_inside:  # y is an output and a node's input
        nodes.append(helper.make_node("Neg", [y], ["negated"]))
        others.append("negated")
    shape = ["batch", "seq"] if vector else ["batch", "seq", 6]
    outputs = [helper.make_tensor_value_info(y, TensorProto.FLOAT, shape)]
    outputs += [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in others]
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    return str(path), y


def report(path, output):
    """The rewrite report's last-row line of a session on `path` (OCTET_QDQ_DEBUG=1)."""
    code = ("import octet, sys; octet.InferenceSession(sys.argv[1], last_row_outputs=[sys.argv[2]])")
    out = subprocess.run([sys.executable, "-c", code, path, output], capture_output=True,
                         text=True, env={**os.environ, "OCTET_QDQ_DEBUG": "1"}, timeout=120)
    assert out.returncode == 0, out.stderr
    return [line for line in out.stderr.splitlines() if line.startswith("last_row")]


@pytest.mark.parametrize("kind, why", [
    ({}, None),
    ({"bias": True}, None),
    ({"tail": "Softmax"}, "not_a_product op=Softmax"),
    ({"weight_input": True}, "weights_not_constant"),
    ({"read_inside": True}, "output_read_in_graph"),
    ({"quantized_shared": True}, "quantized_input_read_elsewhere"),
    ({"vector": True}, "weights_not_a_matrix"),
])
def test_which_outputs_are_cut(tmp_path, kind, why):
    path, output = product_model(tmp_path, **kind)
    feeds = {"x": np.random.default_rng(1).standard_normal((2, 5, 8)).astype(np.float32)}
    if kind.get("weight_input"):
        feeds["w"] = W
    whole = octet.InferenceSession(path).run([output], feeds)[0]
    session = octet.InferenceSession(path, last_row_outputs=[output])
    got = session.run([output], feeds)[0]
    lines = report(path, output)
    if why is None:
        assert lines == ["last_row output=%s" % output]
        assert got.tobytes() == whole[:, -1:].tobytes()
    else:
        assert lines == ["last_row_refused output=%s why=%s" % (output, why)]
        assert got.tobytes() == whole.tobytes()


def test_a_name_that_is_not_an_output(tmp_path):
    path, _ = product_model(tmp_path)
    with pytest.raises(octet.OctetError, match=r"last_row_outputs: 'logits' is not an output of "
                                               r"the graph \(its outputs: 'p'\)"):
        octet.InferenceSession(path, last_row_outputs=["logits"])
    for bad in ("p", 3, [b"p"]):
        with pytest.raises(octet.OctetError, match="last_row_outputs must be a list"):
            octet.InferenceSession(path, last_row_outputs=bad)
