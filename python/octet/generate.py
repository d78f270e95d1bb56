"""`octet generate MODEL --prompt TEXT`: greedy decoding of a decoder-only language model.

The model is one ONNX file in the layout Hugging Face optimum exports (the builders of
tools/models write it): inputs `input_ids`, `attention_mask` and optionally `position_ids`
(int64 [batch, seq]), and for the KV-cache form `past_key_values.{i}.key` / `.value`
[batch, kv_heads, past_seq, head_dim] with outputs `logits` [batch, seq, vocab] and
`present.{i}.key` / `.value`. A model without the cache inputs is run on the whole sequence
at every step. When octet can hold the cache itself (InferenceSession.new_kv_cache), each
step appends to it in place; otherwise the presents are fed back as the next step's past.
The session computes the logits of the last position only where the model's LM head allows
(InferenceSession's last_row_outputs: the same bits, without the product over the prompt's
other positions). The tokenizer is the JSON file beside the model (octet.bpe.tokenizer_path)
or the one named with --tokenizer. docs/usage.md, "octet generate".

From Python:

    from octet.generate import Generator
    result = Generator("smollm2-135m.cached.onnx", threads=2).generate("Hello", max_tokens=16)
    print(result.text, result.prefill_ms, result.decode_ms)
"""

import argparse
import dataclasses
import os
import re
import sys
import time

import numpy as np

from . import _command
from .bpe import Tokenizer, tokenizer_path
from ._command import CommandError

HELP = """\
Greedy decoding: encodes PROMPT with the model's tokenizer, runs the prompt through MODEL
(prefill), then generates up to N tokens one at a time, reusing the KV cache when the model
has one, and stops early at the tokenizer's end-of-sequence token. The text streams to
stdout as it is decoded; a progress line, then the prefill and decode times (ms per token)
go to stderr. Ctrl-C stops decoding and prints what was generated so far.

MODEL must be a decoder in the layout of Hugging Face optimum's ONNX export (input_ids,
attention_mask, optional position_ids, past_key_values.{i}.key/.value -> logits,
present.{i}.key/.value), as tools/models/build_smollm2.py and build_qwen3.py write it. Its
tokenizer is <dir>/<model name up to its first dot>.tokenizer.json unless --tokenizer names
one. The prompt plus N tokens must fit the model's context (its `context` metadata).
--float-matmul int8 runs the float MatMuls of constant weights on the int8 route (a 4-bit
DequantizeLinear -> MatMul at accuracy level 4, the arithmetic ONNX Runtime's default
options give it: faster, a little further from the float model; docs/usage.md).

Exit status: 0 when it decoded, 1 when it failed, 2 on a usage error, 130 when interrupted."""

_PAST = re.compile(r"^past_key_values\.(\d+)\.(key|value)$")


@dataclasses.dataclass
class Generation:
    prompt_ids: list
    ids: list                 # the generated tokens (the prompt excluded)
    text: str                 # the generated tokens decoded
    prefill_ms: float         # the prompt's run
    decode_ms: list           # one entry per generated token after the first
    stopped: str              # "eos", "max_tokens" or "interrupted"


class Generator:
    """A decoder session and its tokenizer. threads, float_matmul, max_tensor_bytes: octet's
    session options (octet.InferenceSession). kv_cache: let octet hold the KV cache when it
    can (the same tokens; False feeds the presents back as the next step's past)."""

    def __init__(self, model, threads=1, tokenizer=None, max_tensor_bytes=None,
                 float_matmul="float", kv_cache=True):
        import octet
        _command.check_model_path(model)
        options = {} if max_tensor_bytes is None else {"max_tensor_bytes": max_tensor_bytes}
        options.update(threads=threads, float_matmul=float_matmul)
        try:
            # Greedy decoding reads the last position's logits only.
            self.session = octet.InferenceSession(model, last_row_outputs=["logits"], **options)
        except octet.OctetError as e:
            if "last_row_outputs" not in str(e):
                raise
            # No output 'logits': _layout says what the model lacks.
            self.session = octet.InferenceSession(model, **options)
        self._layout(model, kv_cache)
        self.context = _context(model)
        path = tokenizer or tokenizer_path(model)
        if not os.path.isfile(path):
            raise CommandError("no tokenizer for %s: %s does not exist (the builders of "
                               "tools/models write it beside the model; or pass --tokenizer)"
                               % (model, path))
        self.tokenizer = Tokenizer.from_file(path)

    def _layout(self, model, kv_cache):
        inputs = {i.name: i for i in self.session.get_inputs()}
        outputs = [o.name for o in self.session.get_outputs()]
        if "input_ids" not in inputs or "logits" not in outputs:
            raise CommandError(
                "%s is not a decoder octet generate understands: it needs an input 'input_ids' "
                "and an output 'logits' (inputs: %s; outputs: %s)"
                % (model, ", ".join(inputs), ", ".join(outputs)))
        self.past = {}  # input name -> (present output name, [1, kv_heads, 0, head_dim])
        for name, arg in inputs.items():
            match = _PAST.match(name)
            if not match:
                continue
            present = "present.%s.%s" % match.groups()
            dims = arg.shape
            if present not in outputs or len(dims) != 4 or not all(
                    isinstance(d, int) for d in (dims[1], dims[3])):
                raise CommandError("%s is not a decoder octet generate understands: cache input "
                                   "'%s' %s needs an output '%s' and the shape [batch, kv_heads, "
                                   "past_seq, head_dim] with kv_heads and head_dim fixed"
                                   % (model, name, dims, present))
            self.past[name] = (present, [1, dims[1], 0, dims[3]])
        known = {"input_ids", "attention_mask", "position_ids"} | set(self.past)
        unknown = [n for n in inputs if n not in known]
        if unknown:
            raise CommandError("%s is not a decoder octet generate understands: unexpected "
                               "input(s) %s" % (model, ", ".join(unknown)))
        self.inputs = set(inputs)
        self.wanted = ["logits"] + [present for present, _ in self.past.values()]
        self.holds_cache = False
        if kv_cache and self.past:
            from . import OctetError
            try:
                held = self.session.new_kv_cache().inputs
            except OctetError:
                held = []
            self.holds_cache = set(held) == set(self.past)

    def _run(self, tokens, start, cache):
        """Logits of the last of `tokens` (positions start..), updating cache (octet's KvCache,
        or {past input: array}) in place."""
        seq = len(tokens)
        feeds = {"input_ids": np.array([tokens], np.int64)}
        if "attention_mask" in self.inputs:
            feeds["attention_mask"] = np.ones((1, start + seq), np.int64)
        if "position_ids" in self.inputs:
            feeds["position_ids"] = np.arange(start, start + seq, dtype=np.int64)[None]
        if not isinstance(cache, dict):
            return self.session.run(["logits"], feeds, kv_cache=cache)[0][0, -1]
        feeds.update(cache)
        results = self.session.run(self.wanted, feeds)
        for (name, _), value in zip(self.past.items(), results[1:]):
            cache[name] = value
        return results[0][0, -1]

    def generate(self, prompt, max_tokens=32, on_token=None, stop_at_eos=True):
        """Greedy decoding of up to max_tokens tokens after `prompt` (a str or token ids).
        on_token(generation) is called after each token."""
        prompt_ids = self.tokenizer.encode(prompt) if isinstance(prompt, str) else list(prompt)
        if not prompt_ids:
            raise CommandError("the prompt is empty: it encodes to no tokens")
        if max_tokens < 1:
            raise CommandError("--max-tokens must be at least 1, got %d" % max_tokens)
        total = len(prompt_ids) + max_tokens
        if self.context is not None and total > self.context:
            raise CommandError("the prompt (%d tokens) plus %d new tokens is %d tokens, beyond "
                               "the model's context of %d" % (len(prompt_ids), max_tokens, total,
                                                             self.context))
        if self.holds_cache:
            cache = self.session.new_kv_cache(reserve_rows=total)
        else:
            cache = {name: np.zeros(shape, np.float32) for name, (_, shape) in self.past.items()}
        result = Generation(prompt_ids, [], "", 0.0, [], "max_tokens")
        try:
            begin = time.perf_counter()
            logits = self._run(prompt_ids, 0, cache)
            result.prefill_ms = 1e3 * (time.perf_counter() - begin)
            while True:
                token = int(np.argmax(logits))
                result.ids.append(token)
                result.text = self.tokenizer.decode(result.ids, skip_special=True)
                if on_token:
                    on_token(result)
                if stop_at_eos and token == self.tokenizer.eos_id:
                    result.stopped = "eos"
                    break
                if len(result.ids) == max_tokens:
                    break
                begin = time.perf_counter()
                if self.past:
                    logits = self._run([token], len(prompt_ids) + len(result.ids) - 1, cache)
                else:
                    logits = self._run(prompt_ids + result.ids, 0, cache)
                result.decode_ms.append(1e3 * (time.perf_counter() - begin))
        except KeyboardInterrupt:
            result.stopped = "interrupted"
        return result


def _context(model):
    """The model's context length from its `context` metadata, or None."""
    import onnx
    proto = onnx.load(model, load_external_data=False)
    for prop in proto.metadata_props:
        if prop.key == "context":
            return int(prop.value)
    return None


def make_parser():
    parser = _command.ArgumentParser(
        prog="octet generate", description=HELP,
        usage="octet generate MODEL --prompt TEXT [--max-tokens N] [--threads N] "
              "[--tokenizer FILE] [--ignore-eos] [--float-matmul {float,int8}]",
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("model", metavar="MODEL")
    parser.add_argument("--prompt", required=True, metavar="TEXT")
    parser.add_argument("--max-tokens", type=int, default=32, metavar="N",
                        help="tokens to generate at most (default 32)")
    parser.add_argument("--threads", type=int, default=1, metavar="N",
                        help="octet's threads (default 1)")
    parser.add_argument("--tokenizer", metavar="FILE",
                        help="the tokenizer JSON (default: beside the model)")
    parser.add_argument("--ignore-eos", action="store_true",
                        help="keep generating past the end-of-sequence token")
    parser.add_argument("--float-matmul", choices=("float", "int8"), default="float",
                        help="float MatMuls of constant weights as written (default) or on "
                             "the int8 route")
    return parser


def main(argv):
    args = make_parser().parse_args(argv)
    if args.threads < 1 or args.max_tokens < 1:
        raise _command.UsageError("--threads and --max-tokens must be at least 1 "
                                  "(see octet generate --help)")
    generator = Generator(args.model, threads=args.threads, tokenizer=args.tokenizer,
                          float_matmul=args.float_matmul)
    progress = _command.Progress()
    shown = [0]

    def on_token(result):
        sys.stdout.write(result.text[shown[0]:])
        sys.stdout.flush()
        shown[0] = len(result.text)
        if not sys.stdout.isatty():
            progress.say("generate: token %d/%d" % (len(result.ids), args.max_tokens))

    result = generator.generate(args.prompt, args.max_tokens, on_token,
                                stop_at_eos=not args.ignore_eos)
    sys.stdout.write("\n")
    progress.done()
    decode = ("%.1f ms/token (median %.1f) over %d tokens"
              % (np.mean(result.decode_ms), np.median(result.decode_ms), len(result.decode_ms))
              if result.decode_ms else "no token after the first")
    sys.stderr.write("prefill: %.1f ms for %d tokens (%.2f ms/token); decode: %s; stopped: %s\n"
                     % (result.prefill_ms, len(result.prompt_ids),
                        result.prefill_ms / len(result.prompt_ids), decode, result.stopped))
    return 130 if result.stopped == "interrupted" else 0


def cli(argv):
    return _command.run(main, argv)
