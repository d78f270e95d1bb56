"""A token's logits do not depend on how its sequence reaches octet: the whole sequence in
one run, a prefix run alone, the sequence split into runs with the presents fed back or
with a KV cache octet holds (the prompt, then a token per run, as `octet generate` does),
alone or in a left-padded batch with another sequence: the same bits, on every form of the
tiny Qwen3-architecture decoder (tools/models/build_qwen3.py --tiny), on 1 and 2 threads
and on every ISA path. ONNX Runtime does not promise this; it is what lets a cached
prompt, a re-scored prefix and a decoded token agree bit for bit (docs/design.md, "Row
independence")."""

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "models"))
sys.path.insert(0, str(ROOT / "tools"))

import build_qwen3  # noqa: E402
import decoder  # noqa: E402
import ort_exact  # noqa: E402
import quantize_llm  # noqa: E402

import octet  # noqa: E402

ALL = ("fp32",) + quantize_llm.VARIANTS
FIRST = [72, 101, 108, 108, 111, 44, 32, 119, 111, 114, 108, 100, 33]
OTHER = [256, 7, 300, 0, 511]
# Long enough to cross the float attention's blocks of 48 query rows three times.
LONG = [(37 * i + 11) % 512 for i in range(150)]
# Each sequence, the length of a prefix run alone, and ways to split it into runs.
CASES = [
    (FIRST, 5, ([len(FIRST) - 1, 1], [4, 3, 1, 5], [1] * len(FIRST))),
    (LONG, 100, ([len(LONG) - 1, 1], [50, 47, 53], [97, 1, 1, 51])),
]


def whole(session, cfg, form, sequences):
    """The logits of one run of left-padded sequences, and its attention mask."""
    feeds = decoder.batch_feeds(sequences)
    if form == "cached":
        feeds.update(decoder.empty_past(cfg, len(sequences)))
    return session.run(["logits"], feeds)[0], feeds["attention_mask"]


def in_runs(session, cfg, sequence, sizes, kv_cache):
    """The logits of `sequence` given in runs of `sizes` tokens, each run after the ones
    before it: through the KV cache octet holds, or with the presents fed back."""
    runner = decoder.CachedRunner(cfg, session, [o.name for o in session.get_outputs()],
                                  kv_cache=session.new_kv_cache() if kv_cache else None)
    starts = np.cumsum([0] + sizes[:-1])
    return np.concatenate([runner.step(sequence[s:s + n]) for s, n in zip(starts, sizes)])


def check(paths, cfg, variant, threads):
    """Asserts every way of running each sequence of CASES gives the bits of its whole run."""
    for form in ("plain", "cached"):
        session = octet.InferenceSession(paths[form, variant], threads=threads)
        other = whole(session, cfg, form, [OTHER])[0][0]
        for sequence, prefix_length, splits in CASES:
            case = (variant, form, threads, len(sequence))
            alone = whole(session, cfg, form, [sequence])[0][0]
            prefix = whole(session, cfg, form, [sequence[:prefix_length]])[0][0]
            assert prefix.tobytes() == alone[:prefix_length].tobytes(), case + ("prefix",)
            both, mask = whole(session, cfg, form, [OTHER, sequence])
            assert both[1].tobytes() == alone.tobytes(), case + ("batch",)
            assert both[0][mask[0].astype(bool)].tobytes() == other.tobytes(), \
                case + ("padded batch",)
            if form != "cached":
                continue
            for kv_cache in (False, True):
                for sizes in splits:
                    got = in_runs(session, cfg, sequence, sizes, kv_cache)
                    assert got.tobytes() == alone.tobytes(), case + (kv_cache, sizes)


@pytest.fixture(scope="module")
def tiny():
    return build_qwen3.build(2, tiny=True, variants=ALL)


@pytest.mark.parametrize("variant", ALL)
@pytest.mark.parametrize("threads", [1, 2])
def test_a_tokens_logits_do_not_depend_on_how_its_sequence_is_run(tiny, variant, threads):
    cfg, paths = tiny
    check(paths, cfg, variant, threads)


def test_the_check_sees_a_row_that_changes(tiny, monkeypatch):
    """The comparisons are of bits: a change in the last place of one row fails them."""
    cfg, paths = tiny
    real_run = octet.InferenceSession.run

    def nudged(self, names, feeds, kv_cache=None):
        results = real_run(self, names, feeds, kv_cache=kv_cache)
        if feeds["input_ids"].shape[1] == 1:  # a one-token run: its row one ulp away
            results[0] = np.nextafter(results[0], np.float32(np.inf))
        return results
    monkeypatch.setattr(octet.InferenceSession, "run", nudged)
    with pytest.raises(AssertionError):
        check(paths, cfg, "nbits_b32_acc1", 1)


ISA_SCRIPT = """
import sys
sys.path[:0] = [{here!r}]
import test_token_invariance as t
cfg, paths = t.build_qwen3.build(2, tiny=True, variants=t.ALL)
for variant in t.ALL:
    t.check(paths, cfg, variant, 2)
print("ok")
"""


@pytest.mark.parametrize("isa", ["scalar", "avx2", "avxvnni", "avx512", "avx512vnni"])
def test_every_isa_path(tiny, isa):
    supported, reason = ort_exact.octet_isa_supported(isa)
    if not supported:  # octet's own answer for this CPU, as the C++ tier skips
        pytest.skip(f"OCTET_ISA={isa} cannot run here: {reason}")
    env = dict(os.environ, OCTET_ISA=isa)
    script = ISA_SCRIPT.format(here=str(Path(__file__).parent))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                         timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "ok"
