"""BERT's uncased WordPiece tokenizer, written out so that no tokenizers/transformers
package is needed: basic tokenization (clean, CJK spacing, lowercase, strip accents,
split punctuation) then greedy longest-match-first word pieces with the "##" prefix,
as transformers.BertTokenizer does for all-MiniLM-L6-v2 (do_lower_case=True)."""

import unicodedata

import numpy as np

MAX_CHARS_PER_WORD = 100


def _is_whitespace(ch):
    return ch in " \t\n\r" or unicodedata.category(ch) == "Zs"


def _is_control(ch):
    return ch not in "\t\n\r" and unicodedata.category(ch).startswith("C")


def _is_punctuation(ch):
    cp = ord(ch)
    # BERT counts every non-alphanumeric ASCII character as punctuation.
    if 33 <= cp <= 47 or 58 <= cp <= 64 or 91 <= cp <= 96 or 123 <= cp <= 126:
        return True
    return unicodedata.category(ch).startswith("P")


def _is_cjk(cp):
    return (0x4E00 <= cp <= 0x9FFF or 0x3400 <= cp <= 0x4DBF or 0x20000 <= cp <= 0x2A6DF
            or 0x2A700 <= cp <= 0x2B73F or 0x2B740 <= cp <= 0x2B81F or 0x2B820 <= cp <= 0x2CEAF
            or 0xF900 <= cp <= 0xFAFF or 0x2F800 <= cp <= 0x2FA1F)


def _basic_tokens(text):
    cleaned = []
    for ch in text:
        cp = ord(ch)
        if cp == 0 or cp == 0xFFFD or _is_control(ch):
            continue
        if _is_cjk(cp):
            cleaned.append(" %s " % ch)
        else:
            cleaned.append(" " if _is_whitespace(ch) else ch)
    tokens = []
    for word in "".join(cleaned).split():
        word = unicodedata.normalize("NFD", word.lower())
        word = "".join(ch for ch in word if unicodedata.category(ch) != "Mn")
        current = ""
        for ch in word:
            if _is_punctuation(ch):
                if current:
                    tokens.append(current)
                tokens.append(ch)
                current = ""
            else:
                current += ch
        if current:
            tokens.append(current)
    return tokens


class WordPieceTokenizer:
    def __init__(self, vocab_path):
        with open(vocab_path, encoding="utf-8") as f:
            self.vocab = {line.rstrip("\n"): i for i, line in enumerate(f)}
        self.unk, self.cls, self.sep, self.pad = (self.vocab[t] for t in
                                                   ("[UNK]", "[CLS]", "[SEP]", "[PAD]"))

    def _word_pieces(self, word):
        if len(word) > MAX_CHARS_PER_WORD:
            return [self.unk]
        pieces, start = [], 0
        while start < len(word):
            end = len(word)
            while end > start:
                piece = word[start:end] if start == 0 else "##" + word[start:end]
                if piece in self.vocab:
                    pieces.append(self.vocab[piece])
                    break
                end -= 1
            if end == start:
                return [self.unk]  # one unmatched part makes the whole word unknown
            start = end
        return pieces

    def encode(self, text):
        """Token ids of one sentence with [CLS] ... [SEP]."""
        ids = [self.cls]
        for word in _basic_tokens(text):
            ids += self._word_pieces(word)
        return ids + [self.sep]

    def batch(self, sentences, seq_len):
        """input_ids, attention_mask, token_type_ids (int64, [len(sentences), seq_len]),
        truncated to seq_len (keeping the final [SEP]) and padded with [PAD]."""
        n = len(sentences)
        input_ids = np.full((n, seq_len), self.pad, dtype=np.int64)
        mask = np.zeros((n, seq_len), dtype=np.int64)
        for row, sentence in enumerate(sentences):
            ids = self.encode(sentence)
            if len(ids) > seq_len:
                ids = ids[:seq_len - 1] + [self.sep]
            input_ids[row, :len(ids)] = ids
            mask[row, :len(ids)] = 1
        return {"input_ids": input_ids, "attention_mask": mask,
                "token_type_ids": np.zeros((n, seq_len), dtype=np.int64)}
