"""`octet generate` and octet.generate.Generator on the tiny Qwen3-architecture decoder
(tools/models/build_qwen3.py --tiny): the tokens are ONNX Runtime's greedy decode of the same
file, the KV-cache and whole-sequence forms agree, and every failure is one line naming it."""

import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "models"))
sys.path.insert(0, str(ROOT / "tools"))

import build_qwen3  # noqa: E402
import decoder  # noqa: E402

from octet import generate  # noqa: E402

PROMPT = "Hello, world"


@pytest.fixture(scope="module")
def tiny():
    cfg, paths = build_qwen3.build(2, tiny=True, variants=("fp32", "nbits_b32_acc4"))
    return cfg, paths


def cli(*args):
    return subprocess.run([sys.executable, "-m", "octet.cli", "generate", *map(str, args)],
                          capture_output=True, text=True, timeout=300)


def test_tokens_are_ort_greedy_decode(tiny):
    cfg, paths = tiny
    path = paths["cached", "fp32"]
    result = generate.Generator(path).generate(PROMPT, max_tokens=12, stop_at_eos=False)
    expected = decoder.greedy(cfg, decoder.ort_session(path), result.prompt_ids, 12)
    assert result.ids == expected
    assert len(result.decode_ms) == 11 and result.prefill_ms > 0
    assert result.stopped == "max_tokens"


def test_whole_sequence_form_gives_the_same_tokens(tiny):
    _, paths = tiny
    cached = generate.Generator(paths["cached", "fp32"], threads=2).generate(PROMPT, 6, stop_at_eos=False)
    whole = generate.Generator(paths["plain", "fp32"]).generate(PROMPT, 6, stop_at_eos=False)
    assert cached.ids == whole.ids


def test_cli_streams_text_and_prints_the_times(tiny):
    _, paths = tiny
    out = cli(paths["cached", "nbits_b32_acc4"], "--prompt", PROMPT, "--max-tokens", 5,
              "--ignore-eos")
    assert out.returncode == 0, out.stderr
    assert "prefill:" in out.stderr and "ms/token" in out.stderr and "stopped: max_tokens" in \
        out.stderr
    # The command prints what the API generates (whose tokens the first test checks against ORT).
    text = generate.Generator(paths["cached", "nbits_b32_acc4"]).generate(
        PROMPT, 5, stop_at_eos=False).text
    assert out.stdout == text + "\n"


def test_float_matmul_int8_runs_the_int8_route(tiny):
    """--float-matmul int8: the session is octet's forward route (its logits are that
    session's, not the float run's), and the command prints what that Generator generates."""
    import octet
    _, paths = tiny
    path = paths["cached", "fp32"]
    forward = generate.Generator(path, float_matmul="int8")
    result = forward.generate(PROMPT, 4, stop_at_eos=False)
    feeds = {"input_ids": np.array([result.prompt_ids], np.int64),
             "attention_mask": np.ones((1, len(result.prompt_ids)), np.int64),
             "position_ids": np.arange(len(result.prompt_ids), dtype=np.int64)[None]}
    feeds.update({name: np.zeros(shape, np.float32) for name, (_, shape) in forward.past.items()})
    feeds = {k: v for k, v in feeds.items() if k in forward.inputs}
    logits = {route: octet.InferenceSession(path, float_matmul=route).run(["logits"], feeds)[0]
              for route in ("float", "int8")}
    assert logits["int8"].tobytes() != logits["float"].tobytes()
    assert int(np.argmax(logits["int8"][0, -1])) == result.ids[0]
    cache = {name: np.zeros(shape, np.float32) for name, (_, shape) in forward.past.items()}
    assert forward._run(result.prompt_ids, 0, cache).tobytes() == \
        logits["int8"][0, -1].tobytes()
    out = cli(path, "--prompt", PROMPT, "--max-tokens", 4, "--ignore-eos", "--float-matmul",
              "int8")
    assert out.returncode == 0, out.stderr
    assert out.stdout == result.text + "\n"
    out = cli(path, "--prompt", PROMPT, "--float-matmul", "int4")
    assert out.returncode == 2 and "--float-matmul" in out.stderr


def test_interrupt_keeps_what_was_generated(tiny):
    _, paths = tiny
    seen = []

    def on_token(result):
        seen.append(result.ids[-1])
        if len(seen) == 3:
            raise KeyboardInterrupt

    result = generate.Generator(paths["cached", "fp32"]).generate(PROMPT, 10, on_token,
                                                                  stop_at_eos=False)
    assert result.stopped == "interrupted" and result.ids == seen


def test_errors_name_the_problem(tiny, tmp_path):
    _, paths = tiny
    model = paths["cached", "fp32"]
    relu = onnx.helper.make_model(onnx.helper.make_graph(
        [onnx.helper.make_node("Relu", ["x"], ["y"])], "relu",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])]),
        opset_imports=[onnx.helper.make_opsetid("", 17)], ir_version=8)
    onnx.save(relu, tmp_path / "relu.onnx")
    out = cli(tmp_path / "relu.onnx", "--prompt", "x")
    assert out.returncode == 1 and "is not a decoder octet generate understands" in out.stderr
    assert "input 'input_ids'" in out.stderr and len(out.stderr.splitlines()) == 1

    lonely = tmp_path / "lonely.onnx"
    shutil.copy(model, lonely)
    out = cli(lonely, "--prompt", "x")
    assert out.returncode == 1 and "no tokenizer for" in out.stderr
    assert "lonely.tokenizer.json does not exist" in out.stderr

    short = onnx.load(model)
    for prop in short.metadata_props:
        if prop.key == "context":
            prop.value = "8"
    onnx.save(short, tmp_path / "short.onnx")
    shutil.copy(decoder.tokenizer_file(tiny[0]), tmp_path / "short.tokenizer.json")
    out = cli(tmp_path / "short.onnx", "--prompt", PROMPT, "--max-tokens", 4)
    assert out.returncode == 1
    assert "the prompt (12 tokens) plus 4 new tokens is 16 tokens, beyond the model's " \
           "context of 8" in out.stderr

    out = cli(model, "--prompt", PROMPT, "--max-tokens", 0)
    assert out.returncode == 2 and "--max-tokens" in out.stderr
    out = cli(model)
    assert out.returncode == 2 and "--prompt" in out.stderr


def test_help_is_true():
    out = subprocess.run([sys.executable, "-m", "octet.cli", "generate", "--help"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for option in ("--prompt", "--max-tokens", "--threads", "--tokenizer", "--ignore-eos",
                   "--float-matmul"):
        assert option in out.stdout
