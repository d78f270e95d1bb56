"""A KV cache octet holds across runs (InferenceSession.new_kv_cache): on the tiny
Qwen3-architecture decoder (tools/models/build_qwen3.py --tiny), every quantized form, runs
that append to the cache give the bits of the graph run as written with the presents fed
back, on 1 and 2 threads, whether the cache grows or has room; truncate rewinds it; every
misuse is an OctetError naming it and leaves the cache as it was."""

import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "models"))
sys.path.insert(0, str(ROOT / "tools"))

import build_qwen3  # noqa: E402
import decoder  # noqa: E402
import quantize_llm  # noqa: E402

import octet  # noqa: E402
from octet import generate  # noqa: E402

ALL = ("fp32",) + quantize_llm.VARIANTS
# Two sequences, left-padded: the mask and the positions differ per row.
PROMPTS = [[72, 101, 108, 108, 111, 44, 32], [256, 7, 300]]


@pytest.fixture(scope="module")
def tiny():
    return build_qwen3.build(2, tiny=True, variants=ALL)


def feeds_at(ids, mask, start):
    """input_ids [batch, n] at positions after `start` cached ones, with the whole mask."""
    positions = np.maximum(np.cumsum(mask, 1) - 1, 0)[:, start:start + ids.shape[1]]
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions}


def steps(batch):
    """(input_ids, attention_mask, start) per run: the prompts, then a three-token chunk,
    then single tokens."""
    first = decoder.batch_feeds(PROMPTS[:batch])
    ids, mask = first["input_ids"], first["attention_mask"]
    rng = np.random.default_rng(batch)
    runs = [(ids, mask, 0)]
    for count in (3, 1, 1, 1):
        new = rng.integers(0, 512, (batch, count)).astype(np.int64)
        start = mask.shape[1]
        mask = np.concatenate([mask, np.ones((batch, count), np.int64)], 1)
        runs.append((new, mask, start))
    return runs


@pytest.mark.parametrize("variant", ALL)
@pytest.mark.parametrize("threads", [1, 2])
def test_cached_runs_give_the_graphs_bits(tiny, variant, threads):
    cfg, paths = tiny
    session = octet.InferenceSession(paths["cached", variant], threads=threads)
    outputs = [o.name for o in session.get_outputs()]
    for batch, reserve in ((1, 0), (2, 64)):  # reserve 0: the cache grows at every run
        cache = session.new_kv_cache(reserve_rows=reserve)
        assert sorted(cache.inputs) == sorted(decoder.empty_past(cfg, 1))
        assert sorted(cache.outputs) == sorted(o for o in outputs if o.startswith("present."))
        past = decoder.empty_past(cfg, batch)
        for i, (ids, mask, start) in enumerate(steps(batch)):
            feeds = feeds_at(ids, mask, start)
            expected = dict(zip(outputs, session.run(None, {**feeds, **past})))
            # Every other run asks for the presents too: a copy of the cache's rows.
            wanted = ["logits"] + (cache.outputs if i % 2 else [])
            got = dict(zip(wanted, session.run(wanted, feeds, kv_cache=cache)))
            for name, value in got.items():
                assert value.tobytes() == expected[name].tobytes(), (variant, batch, i, name)
            assert cache.length == mask.shape[1]
            past = {name.replace("present", "past_key_values"): value
                    for name, value in expected.items() if name.startswith("present.")}


def test_truncate_rewinds_the_cache(tiny):
    _, paths = tiny
    session = octet.InferenceSession(paths["cached", "nbits_b32_acc4"])
    cache = session.new_kv_cache()
    runs = steps(1)
    logits = []
    for ids, mask, start in runs:
        logits.append(session.run(["logits"], feeds_at(ids, mask, start), kv_cache=cache)[0])
    cache.truncate(runs[2][2])  # back to before the third run: it and the rest again
    for (ids, mask, start), before in zip(runs[2:], logits[2:]):
        again = session.run(["logits"], feeds_at(ids, mask, start), kv_cache=cache)[0]
        assert again.tobytes() == before.tobytes()
    with pytest.raises(octet.OctetError, match="cannot be truncated to 99"):
        cache.truncate(99)


def test_misuse_is_an_error_that_leaves_the_cache_as_it_was(tiny, monkeypatch):
    cfg, paths = tiny
    path = paths["cached", "fp32"]
    session = octet.InferenceSession(path)
    cache = session.new_kv_cache()
    (ids, mask, _), (next_ids, next_mask, start) = steps(1)[:2]
    session.run(["logits"], feeds_at(ids, mask, 0), kv_cache=cache)
    held = cache.length
    past = cache.inputs[0]
    with pytest.raises(octet.OctetError, match="input '%s' is held by the KV cache" % past):
        session.run(["logits"], {**feeds_at(next_ids, next_mask, start),
                                 past: np.zeros((1, cfg.kv_heads, held, cfg.head_dim),
                                                np.float32)}, kv_cache=cache)
    with pytest.raises(octet.OctetError, match="made by another session"):
        octet.InferenceSession(path).run(["logits"], feeds_at(next_ids, next_mask, start),
                                         kv_cache=cache)
    # A cache whose session is gone serves no other, even one made where it was.
    orphan = octet.InferenceSession(path).new_kv_cache()
    with pytest.raises(octet.OctetError, match="made by another session"):
        octet.InferenceSession(path).run(["logits"], feeds_at(ids, mask, 0), kv_cache=orphan)
    two = decoder.batch_feeds(PROMPTS)
    with pytest.raises(octet.OctetError, match="a cache serves one batch size"):
        session.run(["logits"], feeds_at(two["input_ids"][:, -1:],
                                         np.ones((2, held + 1), np.int64), held), kv_cache=cache)
    with pytest.raises(octet.OctetError, match="kv_cache must come from new_kv_cache"):
        session.run(["logits"], feeds_at(next_ids, next_mask, start), kv_cache={})
    assert cache.length == held
    # After the failures the cache continues as if they had not been tried.
    expected = session.run(["logits"], {**feeds_at(next_ids, next_mask, start),
                                        **_presents_after(session, cfg, ids, mask)})[0]
    got = session.run(["logits"], feeds_at(next_ids, next_mask, start), kv_cache=cache)[0]
    assert got.tobytes() == expected.tobytes()

    # No cache to hold: the whole-sequence form, and the cached form without the rewrites.
    with pytest.raises(octet.OctetError, match="no KV cache octet can hold"):
        octet.InferenceSession(paths["plain", "fp32"]).new_kv_cache()
    monkeypatch.setenv("OCTET_QDQ", "0")
    with pytest.raises(octet.OctetError, match="no KV cache octet can hold"):
        octet.InferenceSession(path).new_kv_cache()
    with pytest.raises(octet.OctetError, match="reserve_rows must be an integer"):
        session.new_kv_cache(reserve_rows=-1)


def _presents_after(session, cfg, ids, mask):
    """The past inputs after the graph's run of the prompt."""
    outputs = [o.name for o in session.get_outputs()]
    results = session.run(None, {**feeds_at(ids, mask, 0), **decoder.empty_past(cfg, 1)})
    return {name.replace("present", "past_key_values"): value
            for name, value in zip(outputs, results) if name.startswith("present.")}


def test_generate_holds_the_cache_and_gives_the_same_tokens(tiny):
    _, paths = tiny
    path = paths["cached", "q4_qdq_b32"]
    held = generate.Generator(path, threads=2)
    fed = generate.Generator(path, threads=2, kv_cache=False)
    assert held.holds_cache and not fed.holds_cache
    prompt = "Hello, world"
    assert held.generate(prompt, 10, stop_at_eos=False).ids == \
        fed.generate(prompt, 10, stop_at_eos=False).ids


def test_a_past_read_elsewhere_stays_an_input(tiny, tmp_path):
    """A layer whose past is also read by another node keeps its Concat: the cache holds the
    other layers only, and octet generate feeds the presents back instead."""
    import onnx
    cfg, paths = tiny
    model = onnx.load(paths["cached", "fp32"])
    model.graph.node.append(onnx.helper.make_node("Shape", ["past_key_values.0.key"], ["held"]))
    model.graph.output.append(onnx.helper.make_tensor_value_info("held", onnx.TensorProto.INT64,
                                                                 [4]))
    path = tmp_path / "shape_of_past.onnx"
    onnx.save(model, path)
    cache = octet.InferenceSession(str(path)).new_kv_cache()
    assert sorted(cache.inputs) == ["past_key_values.1.key", "past_key_values.1.value"]
    (tmp_path / "shape_of_past.tokenizer.json").write_bytes(
        Path(decoder.tokenizer_file(cfg)).read_bytes())
    generator = generate.Generator(str(path))
    assert not generator.holds_cache
    assert generator.generate("Hello", 4, stop_at_eos=False).ids == \
        generate.Generator(paths["cached", "fp32"]).generate("Hello", 4, stop_at_eos=False).ids


def test_presents_that_are_not_outputs(tiny, tmp_path):
    """A model that does not output a layer's presents: the cache holds that layer too, and
    runs with it give the logits of the full model's runs."""
    import onnx
    _, paths = tiny
    model = onnx.load(paths["cached", "fp32"])
    kept = [o for o in model.graph.output if not o.name.startswith("present.1.")]
    del model.graph.output[:]
    model.graph.output.extend(kept)
    path = tmp_path / "fewer_outputs.onnx"
    onnx.save(model, path)
    session = octet.InferenceSession(str(path), threads=2)
    full = octet.InferenceSession(paths["cached", "fp32"], threads=2)
    cache, full_cache = session.new_kv_cache(), full.new_kv_cache()
    assert len(cache.inputs) == 4 and sorted(cache.outputs) == ["present.0.key",
                                                                "present.0.value"]
    for i, (ids, mask, start) in enumerate(steps(1)):
        feeds = feeds_at(ids, mask, start)
        wanted = ["logits"] + (cache.outputs if i % 2 else [])
        got = session.run(wanted, feeds, kv_cache=cache)
        expected = full.run(wanted, feeds, kv_cache=full_cache)
        assert all(a.tobytes() == b.tobytes() for a, b in zip(got, expected))
