"""Attention's int8 head Transposes folded into QLinearMatMul (rewrite/int8_attention.h).

A Transpose moves bytes, so the folded node must give exactly the bytes of the graph run
node by node (OCTET_QDQ=0) and of ONNX Runtime. Folded: Q's and V's heads split (perm
[0, 2, 1, 3]) and K^T (perm [0, 2, 3, 1]) feeding a QLinearMatMul, and the context's heads
merged back (perm [0, 2, 1, 3]). Kept as written: other perms, a transposed value that is
also a graph output or read by another node, a constant transposed B, per-column B scales.
Every supported ISA path runs the folded graphs in a subprocess (OCTET_ISA is read once).
"""

import os
import re
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import octet
import ort_exact
from octet_cli import inspect_model

HEADS_SWAP, KEYS = [0, 2, 1, 3], [0, 2, 3, 1]
ONNX_TYPE = {np.uint8: TensorProto.UINT8, np.int8: TensorProto.INT8}


def scalar(name, value, dtype):
    return numpy_helper.from_array(np.array(value, dtype), name)


def attention_model(batch, seq, heads, dim, a_type=np.uint8, b_type=np.uint8, y_type=np.uint8,
                    q_perm=HEADS_SWAP, k_perm=KEYS, v_perm=HEADS_SWAP, out_perm=HEADS_SWAP,
                    extra_outputs=(), extra_reader=None, constant_k=None, per_column_k=False):
    """Q K^T -> scores (y_type), scores V -> context; Q, K, V are [B, S, H, D] inputs."""
    stored = [batch, seq, heads, dim]
    nodes = [helper.make_node("Transpose", ["q"], ["qt"], perm=q_perm),
             helper.make_node("Transpose", ["k"], ["kt"], perm=k_perm),
             helper.make_node("Transpose", ["v"], ["vt"], perm=v_perm)]
    inits = [scalar("qs", 0.05, np.float32), scalar("qz", 3 if a_type == np.uint8 else -3, a_type),
             scalar("ks", 0.04, np.float32), scalar("kz", 7 if b_type == np.uint8 else -5, b_type),
             scalar("ss", 0.6, np.float32), scalar("sz", 11 if y_type == np.uint8 else -9, y_type),
             scalar("vs", 0.03, np.float32), scalar("vz", 9 if b_type == np.uint8 else 4, b_type),
             scalar("cs", 0.2, np.float32), scalar("cz", 130 if y_type == np.uint8 else 2, y_type)]
    if per_column_k:
        inits[2] = numpy_helper.from_array(
            np.linspace(0.02, 0.05, seq * heads).astype(np.float32).reshape(1, heads, 1, seq), "ks")
    nodes.append(helper.make_node("QLinearMatMul", ["qt", "qs", "qz", "kt", "ks", "kz", "ss", "sz"],
                                  ["scores"]))
    nodes.append(helper.make_node("QLinearMatMul",
                                  ["scores", "ss", "sz", "vt", "vs", "vz", "cs", "cz"], ["ctx"]))
    nodes.append(helper.make_node("Transpose", ["ctx"], ["out"], perm=out_perm))
    outputs = ["out", *extra_outputs]
    if extra_reader is not None:
        nodes.append(helper.make_node("Identity", [extra_reader], ["extra"]))
        outputs.append("extra")
    inputs = [helper.make_tensor_value_info("q", ONNX_TYPE[a_type], stored),
              helper.make_tensor_value_info("v", ONNX_TYPE[b_type], stored)]
    if constant_k is None:
        inputs.append(helper.make_tensor_value_info("k", ONNX_TYPE[b_type], stored))
    else:
        inits.append(numpy_helper.from_array(constant_k, "k"))
    types = {"qt": a_type, "kt": b_type, "ctx": y_type, "out": y_type,
             "extra": a_type if extra_reader == "qt" else b_type}
    graph = helper.make_graph(nodes, "attention", inputs,
                              [helper.make_tensor_value_info(o, ONNX_TYPE[types[o]], None)
                               for o in outputs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)],
                             ir_version=8).SerializeToString()


def feeds_for(model_bytes, batch, seq, heads, dim, a_type, b_type, seed=0):
    rng = np.random.default_rng(seed)
    def draw(dtype):
        info = np.iinfo(dtype)
        return rng.integers(info.min, info.max + 1, (batch, seq, heads, dim)).astype(dtype)
    feeds = {"q": draw(a_type), "k": draw(b_type), "v": draw(b_type)}
    names = {i.name for i in ort.InferenceSession(
        model_bytes, providers=["CPUExecutionProvider"]).get_inputs()}
    return {k: v for k, v in feeds.items() if k in names}


def folded(model_bytes, tmp_path):
    """How many Transposes octet folds into QLinearMatMuls (octet inspect)."""
    listing = inspect_model(model_bytes, tmp_path)
    return sum(len(re.findall(r" [ABY] '", m))
               for m in re.findall(r"head Transposes folded:[^)]*", listing))


def run_octet(model_bytes, feeds, threads, monkeypatch, qdq):
    if qdq:
        monkeypatch.delenv("OCTET_QDQ", raising=False)
    else:
        monkeypatch.setenv("OCTET_QDQ", "0")
    return octet.InferenceSession(model_bytes, threads=threads).run(None, feeds)


def check(model_bytes, feeds, monkeypatch, with_ort=True):
    control = run_octet(model_bytes, feeds, 1, monkeypatch, qdq=False)
    # ORT's u8 x s8 kernel saturates without VNNI: it runs the exact u8 x u8 form there
    ort_model, ort_feeds = ort_exact.for_ort(model_bytes, feeds)
    theirs = ort.InferenceSession(ort_model, providers=["CPUExecutionProvider"]).run(
        None, ort_feeds) if with_ort else control
    for threads in (1, 2, 3):
        ours = run_octet(model_bytes, feeds, threads, monkeypatch, qdq=True)
        assert len(ours) == len(control) == len(theirs)
        for mine, node_by_node, ort_out in zip(ours, control, theirs):
            assert mine.dtype == node_by_node.dtype and mine.shape == node_by_node.shape
            np.testing.assert_array_equal(mine, node_by_node)
            np.testing.assert_array_equal(mine, ort_out)


SHAPES = {"minilm_head": (2, 128, 3, 32), "odd": (2, 7, 3, 5), "one_head": (1, 9, 1, 8)}
TYPES = {"u8": (np.uint8, np.uint8, np.uint8), "u8_s8": (np.uint8, np.int8, np.uint8),
         "s8": (np.int8, np.int8, np.int8)}


@pytest.mark.parametrize("types", sorted(TYPES))
@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_folded_attention_equals_node_by_node_and_ort(shape, types, tmp_path, monkeypatch):
    monkeypatch.delenv("OCTET_QDQ", raising=False)
    dims, dtypes = SHAPES[shape], TYPES[types]
    m = attention_model(*dims, *dtypes)
    assert folded(m, tmp_path) == 4
    check(m, feeds_for(m, *dims, dtypes[0], dtypes[1]), monkeypatch)


NOT_FOLDED = {
    # name: (attention_model keywords, Transposes folded of the four)
    # K with [0, 2, 1, 3] (a Q K product, not Q K^T) is still a head split: all four fold.
    "keys_not_transposed": (dict(k_perm=HEADS_SWAP), 4),
    "keys_perm_on_a": (dict(q_perm=KEYS, k_perm=HEADS_SWAP), 3),
    "merge_with_other_perm": (dict(out_perm=[0, 1, 3, 2]), 3),
    "key_transpose_is_an_output": (dict(extra_outputs=("kt",)), 3),
    "query_transpose_read_elsewhere": (dict(extra_reader="qt"), 3),
    "product_read_elsewhere": (dict(extra_outputs=("ctx",)), 3),
}


@pytest.mark.parametrize("name", sorted(NOT_FOLDED))
def test_patterns_that_must_not_fold(name, tmp_path, monkeypatch):
    monkeypatch.delenv("OCTET_QDQ", raising=False)
    keywords, count = NOT_FOLDED[name]
    batch, seq, heads, dim = 2, 6, 3, 6  # S == D: every perm gives a valid product
    m = attention_model(batch, seq, heads, dim, **keywords)
    assert folded(m, tmp_path) == count
    check(m, feeds_for(m, batch, seq, heads, dim, np.uint8, np.uint8), monkeypatch)


def test_constant_and_per_column_keys_are_kept(tmp_path, monkeypatch):
    monkeypatch.delenv("OCTET_QDQ", raising=False)
    dims = (1, 8, 2, 4)
    keys = np.random.default_rng(3).integers(0, 256, dims).astype(np.uint8)
    m = attention_model(*dims, constant_k=keys)
    assert folded(m, tmp_path) == 3  # Q, V, context
    check(m, feeds_for(m, *dims, np.uint8, np.uint8), monkeypatch)
    m = attention_model(*dims, per_column_k=True)
    assert folded(m, tmp_path) == 3
    check(m, feeds_for(m, *dims, np.uint8, np.uint8), monkeypatch, with_ort=False)


ISA_SCRIPT = """
import sys, numpy as np, octet
sys.path[:0] = [{here!r}, {tools!r}]
import test_int8_attention as t
for shape in t.SHAPES.values():
    for types in t.TYPES.values():
        m = t.attention_model(*shape, *types)
        feeds = t.feeds_for(m, *shape, types[0], types[1])
        want = octet.InferenceSession(m).run(None, feeds)  # control: OCTET_QDQ=0 below
        import os; os.environ.pop("OCTET_QDQ")
        for threads in (1, 2, 3):
            got = octet.InferenceSession(m, threads=threads).run(None, feeds)
            assert all(np.array_equal(a, b) for a, b in zip(got, want)), (shape, types, threads)
        os.environ["OCTET_QDQ"] = "0"
print("ok")
"""


@pytest.mark.parametrize("isa", ["scalar", "avx2", "avxvnni", "avx512", "avx512vnni"])
def test_every_isa_path(isa):
    supported, reason = ort_exact.octet_isa_supported(isa)
    if not supported:  # octet's own answer for this CPU, as the C++ tier skips
        pytest.skip(f"OCTET_ISA={isa} cannot run here: {reason}")
    here = os.path.dirname(os.path.abspath(__file__))
    env = dict(os.environ, OCTET_ISA=isa, OCTET_QDQ="0")
    out = subprocess.run([sys.executable, "-c", ISA_SCRIPT.format(
        here=here, tools=os.path.join(os.path.dirname(os.path.dirname(here)), "tools"))], env=env,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"
