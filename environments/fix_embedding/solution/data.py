"""Token data: a flat file of uint16 GPT-2 token ids, read as a memory map."""

from __future__ import annotations

import numpy as np
import torch


def load_tokens(path: str) -> np.ndarray:
    return np.memmap(path, dtype=np.uint16, mode="r")


def batch(tokens: np.ndarray, batch_size: int, block: int, gen: torch.Generator, device: str = "cpu"):
    """Random windows: inputs (batch, block) and the next-token targets, as int64 tensors."""
    starts = torch.randint(0, len(tokens) - block - 1, (batch_size,), generator=gen).tolist()
    rows = np.stack([tokens[s: s + block + 1].astype(np.int64) for s in starts])
    t = torch.from_numpy(rows).to(device)
    return t[:, :-1], t[:, 1:]
