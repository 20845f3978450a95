"""Byte-level BPE tokenizer read from a `tokenizer.json` (written by the environment's prepare step).

Ids: 0 is <pad>, 1 is <eos>, 2..257 are the 256 byte values, and merge number r (in the order
the merges were learned) creates id 258 + r. Text is first split into pieces (words with their
leading space, single digits, runs of punctuation, runs of whitespace); merges never cross pieces.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

PAD_ID = 0
EOS_ID = 1
BYTE_OFFSET = 2
FIRST_MERGE_ID = BYTE_OFFSET + 256
PIECES = re.compile(r" ?[A-Za-z_]+| ?[0-9]| ?[^\sA-Za-z_0-9]+|\s+(?!\S)|\s+")


def split_pieces(text: str) -> list[str]:
    return PIECES.findall(text)


class Tokenizer:
    def __init__(self, merges: list[tuple[int, int]]) -> None:
        self.merges = [tuple(m) for m in merges]
        self.vocab_size = FIRST_MERGE_ID + len(self.merges)
        self.pad_id, self.eos_id = PAD_ID, EOS_ID

    @classmethod
    def from_dir(cls, folder: str | Path) -> "Tokenizer":
        data = json.loads((Path(folder) / "tokenizer.json").read_text())
        if data.get("type") != "byte_bpe":
            raise ValueError(f"{folder}/tokenizer.json is not a byte_bpe tokenizer")
        return cls(data["merges"])

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``: every piece starts as its bytes, then the merges are applied in
        the order they were learned, each to every occurrence (left to right)."""
        pieces = [[b + BYTE_OFFSET for b in piece.encode("utf-8")] for piece in split_pieces(text)]
        for rank, (a, b) in enumerate(self.merges):
            new = FIRST_MERGE_ID + rank
            for ids in pieces:
                i = 0
                while i < len(ids) - 1:
                    if ids[i] == a and ids[i + 1] == b:
                        ids[i:i + 2] = [new]
                    i += 1
        return [t for ids in pieces for t in ids]

    def decode(self, ids: list[int]) -> str:
        table: dict[int, bytes] = {BYTE_OFFSET + i: bytes([i]) for i in range(256)}
        for rank, (a, b) in enumerate(self.merges):
            table[FIRST_MERGE_ID + rank] = table[a] + table[b]
        return b"".join(table.get(i, b"") for i in ids).decode("utf-8", errors="replace")
