"""GPT-2 style byte-level BPE: pre-tokenizer regexes, byte-to-unicode mapping, merges by
rank. Reads the small JSON the model builders write beside a decoder model
(`<model>.tokenizer.json`, see tools/models); needs nothing beyond the standard library, so
`octet generate` and the builders share this one implementation.

Special tokens are handled by id: encode never parses them out of the text; decode writes
them as their literal text unless asked to skip them."""

import functools
import json
import os
import re
import sys
import unicodedata

FORMAT = "octet-bpe-1"

# Unicode's White_Space property (what \s means to llama.cpp and to Rust's regex); Python's
# \s also matches U+001C..U+001F, which are not White_Space.
_WHITE_SPACE = ("\\t\\n\\x0b\\x0c\\r \\x85\\xa0\\u1680\\u2000-\\u200a\\u2028\\u2029\\u202f"
                "\\u205f\\u3000")


def bytes_to_unicode():
    """GPT-2's map of the 256 byte values to printable characters: printable Latin-1 bytes map
    to themselves, the others to U+0100 onwards in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + \
        list(range(0xAE, 0xFF + 1))
    mapping, extra = {}, 0
    for b in range(256):
        if b in keep:
            mapping[b] = chr(b)
        else:
            mapping[b] = chr(256 + extra)
            extra += 1
    return mapping


@functools.lru_cache(maxsize=None)
def _category_class(prefix):
    """A Python character class body for the code points whose Unicode general category
    starts with `prefix` ("L" letters, "N" numbers): re has no \\p{...}."""
    ranges, start, prev = [], None, None
    for cp in range(sys.maxunicode + 1):
        if unicodedata.category(chr(cp)).startswith(prefix):
            if start is None:
                start = cp
            prev = cp
        elif start is not None:
            ranges.append((start, prev))
            start = None
    if start is not None:
        ranges.append((start, prev))
    return "".join(re.escape(chr(a)) if a == b else "%s-%s" % (re.escape(chr(a)), re.escape(chr(b)))
                   for a, b in ranges)


def translate_pattern(pattern):
    """llama.cpp / Rust regex syntax -> Python re: \\p{L}, \\p{N} and \\s as explicit classes
    (inside a class [...] only the class body is inserted)."""
    classes = {"\\p{L}": _category_class("L"), "\\p{N}": _category_class("N"), "\\s": _WHITE_SPACE}
    out, i, in_class = [], 0, False
    while i < len(pattern):
        for key, body in classes.items():
            if pattern.startswith(key, i):
                out.append(body if in_class else "[" + body + "]")
                i += len(key)
                break
        else:
            c = pattern[i]
            if c == "\\":
                if pattern.startswith("\\S", i):  # not White_Space
                    out.append("[^" + _WHITE_SPACE + "]")
                else:
                    out.append(pattern[i:i + 2])
                i += 2
                continue
            if c == "[" and not in_class:
                in_class = True
            elif c == "]" and in_class:
                in_class = False
            out.append(c)
            i += 1
    return "".join(out)


def _split(pieces, regex):
    """llama.cpp's regex split: each piece becomes its matches and the text between them."""
    out = []
    for piece in pieces:
        pos = 0
        for m in regex.finditer(piece):
            if m.start() > pos:
                out.append(piece[pos:m.start()])
            if m.end() > m.start():
                out.append(m.group())
            pos = m.end()
        if pos < len(piece):
            out.append(piece[pos:])
    return out


class Tokenizer:
    def __init__(self, tokens, merges, pre_tokenizer, special_ids=(), bos_id=None, eos_id=None):
        self.tokens = list(tokens)
        self.ids = {t: i for i, t in enumerate(self.tokens)}
        self.ranks = {tuple(m.split(" ")): r for r, m in enumerate(merges)}
        self.merges = list(merges)
        self.pre_tokenizer = list(pre_tokenizer)
        self.special_ids = sorted(special_ids)
        self.bos_id, self.eos_id = bos_id, eos_id
        self._byte_char = bytes_to_unicode()
        self._char_byte = {c: b for b, c in self._byte_char.items()}
        self._regexes = None

    @classmethod
    def from_file(cls, path):
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
        if data.get("format") != FORMAT:
            raise ValueError("%s: not an %s tokenizer file" % (path, FORMAT))
        return cls(data["tokens"], data["merges"], data["pre_tokenizer"],
                   data.get("special_ids", ()), data.get("bos_id"), data.get("eos_id"))

    def to_json(self):
        return {"format": FORMAT, "tokens": self.tokens, "merges": self.merges,
                "pre_tokenizer": self.pre_tokenizer, "special_ids": self.special_ids,
                "bos_id": self.bos_id, "eos_id": self.eos_id}

    def save(self, path):
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(self.to_json(), f, ensure_ascii=False, separators=(",", ":"))
        os.replace(tmp, path)

    def pre_tokenize(self, text):
        if self._regexes is None:  # building the \p classes takes ~1 s: only when encoding
            self._regexes = [re.compile(translate_pattern(p)) for p in self.pre_tokenizer]
        pieces = [text] if text else []
        for regex in self._regexes:
            pieces = _split(pieces, regex)
        return pieces

    def _bpe(self, word):
        parts = list(word)
        while len(parts) > 1:
            ranked = [(self.ranks.get(pair, len(self.ranks)), i)
                      for i, pair in enumerate(zip(parts, parts[1:]))]
            rank, i = min(ranked)
            if rank == len(self.ranks):
                break
            parts[i:i + 2] = [parts[i] + parts[i + 1]]
        return parts

    def encode(self, text):
        ids = []
        for piece in self.pre_tokenize(text):
            word = "".join(self._byte_char[b] for b in piece.encode("utf-8"))
            for part in self._bpe(word):
                if part not in self.ids:  # a byte no merge covers and the vocabulary lacks
                    raise ValueError("the vocabulary cannot encode byte(s) %r of %r" % (
                        bytes(self._char_byte[c] for c in part), piece))
                ids.append(self.ids[part])
        return ids

    def decode_bytes(self, ids, skip_special=False):
        special = set(self.special_ids) if skip_special else ()
        out = bytearray()
        for i in ids:
            if i in special:
                continue
            token = self.tokens[i]
            if i in self.special_ids:
                out += token.encode("utf-8")
            else:
                out += bytes(self._char_byte[c] for c in token)
        return bytes(out)

    def decode(self, ids, skip_special=False):
        return self.decode_bytes(ids, skip_special).decode("utf-8", errors="replace")


def tokenizer_path(model_path):
    """Where a decoder model's tokenizer lies: `<dir>/<name up to its first dot>.tokenizer.json`
    (every form of one model, e.g. smollm2-135m.cached.a8w8.onnx, shares it)."""
    directory, name = os.path.split(os.path.abspath(model_path))
    return os.path.join(directory, name.split(".", 1)[0] + ".tokenizer.json")
