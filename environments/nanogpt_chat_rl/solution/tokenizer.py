"""Tokenizers, read from ``~/assets/tokenizer.json`` (no third-party packages).

Two kinds:

* ``gpt2_bpe`` (gpu profile): GPT-2's byte-level BPE, from the vocabulary (token string -> id)
  and merge list shipped with GPT-2. Text is split into pieces with a pattern close to GPT-2's
  (Python's ``re`` has no ``\\p{L}``, so letters are ``[^\\W\\d_]`` and numbers ``\\d``: the pieces
  differ from GPT-2's only for rare characters); each piece's bytes are mapped to printable
  characters and merged pair by pair in merge-list order. ``<|endoftext|>`` is id 50256.
* ``words`` (smoke profile): ids 0-255 are bytes, then one id per listed word piece (such as
  ``" river"``, ``"Human"``, ``":"``), then end-of-text. Text is split into pieces as above; a
  listed piece is one token, any other piece is spelled in bytes.
* ``bytes`` (the gpu profile's random-weight stand-in): one token per byte
  (0-255) plus an end-of-text id. Ids that are neither (only a random-weight model emits them)
  decode to ``" t<id>"`` when ``unknown_as_words`` is set, so answers still have words.

``decode`` never fails: invalid UTF-8 becomes U+FFFD.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path

PIECES = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[^\W\d_]+| ?\d+| ?[^\s\w]+|\s+(?!\S)|\s+""")


def byte_to_char() -> dict[int, str]:
    """GPT-2's reversible map from bytes to printable characters."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


class ByteTokenizer:
    kind = "bytes"

    def __init__(self, eot: int = 256, vocab_size: int = 257, unknown_as_words: bool = False) -> None:
        self.eot = eot
        self.vocab_size = vocab_size
        self.unknown_as_words = unknown_as_words

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids: list[int]) -> str:
        out = bytearray()
        for i in ids:
            if 0 <= i < 256:
                out.append(i)
            elif i != self.eot and self.unknown_as_words:
                out += f" t{i}".encode()
        return out.decode("utf-8", errors="replace")


class WordTokenizer:
    kind = "words"

    def __init__(self, words: list[str]) -> None:
        self.words = list(words)
        self.ids = {w: 256 + i for i, w in enumerate(self.words)}
        self.eot = 256 + len(self.words)
        self.vocab_size = self.eot + 1

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece in PIECES.findall(text):
            i = self.ids.get(piece)
            ids.extend([i] if i is not None else piece.encode("utf-8"))
        return ids

    def decode(self, ids: list[int]) -> str:
        out = bytearray()
        for i in ids:
            if 0 <= i < 256:
                out.append(i)
            elif 256 <= i < self.eot:
                out += self.words[i - 256].encode("utf-8")
        return out.decode("utf-8", errors="replace")


class GPT2Tokenizer:
    kind = "gpt2_bpe"

    def __init__(self, vocab: dict[str, int], merges: list[str], eot_token: str = "<|endoftext|>") -> None:
        self.vocab = vocab
        self.inverse = {i: s for s, i in vocab.items()}
        self.ranks = {tuple(m.split(" ")): r for r, m in enumerate(merges)}
        self.eot = vocab[eot_token]
        self.vocab_size = max(vocab.values()) + 1
        self.b2c = byte_to_char()
        self.c2b = {c: b for b, c in self.b2c.items()}
        self._bpe = lru_cache(maxsize=100_000)(self._bpe_uncached)

    def _bpe_uncached(self, piece: str) -> tuple[str, ...]:
        parts = list(piece)
        while len(parts) > 1:
            pairs = [(self.ranks.get((a, b), 1 << 60), i) for i, (a, b) in enumerate(zip(parts, parts[1:]))]
            rank, first = min(pairs)
            if rank == 1 << 60:
                break
            a, b = parts[first], parts[first + 1]
            merged, i = [], 0
            while i < len(parts):  # merge every occurrence of this pair, left to right
                if i + 1 < len(parts) and parts[i] == a and parts[i + 1] == b:
                    merged.append(a + b)
                    i += 2
                else:
                    merged.append(parts[i])
                    i += 1
            parts = merged
        return tuple(parts)

    def encode(self, text: str) -> list[int]:
        ids: list[int] = []
        for piece in PIECES.findall(text):
            mapped = "".join(self.b2c[b] for b in piece.encode("utf-8"))
            ids.extend(self.vocab[t] for t in self._bpe(mapped))
        return ids

    def decode(self, ids: list[int]) -> str:
        chars = "".join(self.inverse.get(i, "") for i in ids if i != self.eot)
        return bytes(self.c2b[c] for c in chars if c in self.c2b).decode("utf-8", errors="replace")


def load_tokenizer(path: str | Path) -> ByteTokenizer | WordTokenizer | GPT2Tokenizer:
    spec = json.loads(Path(path).read_text(encoding="utf-8"))
    if spec["type"] == "bytes":
        return ByteTokenizer(spec["eot"], spec["vocab_size"], spec.get("unknown_as_words", False))
    if spec["type"] == "words":
        return WordTokenizer(spec["words"])
    if spec["type"] == "gpt2_bpe":
        return GPT2Tokenizer(spec["vocab"], spec["merges"])
    raise ValueError(f"{path}: unknown tokenizer type {spec['type']!r}")
