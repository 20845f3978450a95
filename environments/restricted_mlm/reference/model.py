"""Reference solution: a ReLU MLP over a window of neighbouring token embeddings.

A drop-in replacement for the starting solution's model.py (same API: CONFIGS, build,
save_checkpoint, load_checkpoint, get_trained_model). Each position sees the concatenated
embeddings of the tokens from `window` positions before it to `window` positions after it (the
sequence is padded with zeros at both ends), plus the average of the whole sequence, and a
residual ReLU MLP maps that to a vector that is multiplied with the token embeddings (tied
output layer) to give the logits. Only allowed operations: embedding, cat, slicing, zeros, sum,
multiplication by a constant, linear layers, ReLU, addition.

Train it with the starting solution's train.py (see train_reference.py next to this file); it
loads checkpoint.pt next to itself and has no fallback.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB_SIZE = 50257
SEQ_LEN = 128
HERE = Path(__file__).absolute().parent
CHECKPOINT = HERE / "checkpoint.pt"
ARCH = "window_mlp"

CONFIGS = {
    "full": {"d_embed": 256, "window": 4, "d_hidden": 2048, "n_layers": 2, "d_out": 256, "tied": True},
    "tiny": {"d_embed": 32, "window": 3, "d_hidden": 256, "n_layers": 1, "d_out": 32, "tied": True},
}


class WindowMLP(nn.Module):
    def __init__(self, d_embed: int, window: int, d_hidden: int, n_layers: int, d_out: int, tied: bool = False,
                 vocab_size: int = VOCAB_SIZE, seq_len: int = SEQ_LEN) -> None:
        super().__init__()
        self.config = {"d_embed": d_embed, "window": window, "d_hidden": d_hidden, "n_layers": n_layers,
                       "d_out": d_out, "tied": tied, "vocab_size": vocab_size, "seq_len": seq_len}
        self.window = window
        self.tok = nn.Embedding(vocab_size, d_embed)
        self.inp = nn.Linear((2 * window + 2) * d_embed, d_hidden)
        self.blocks = nn.ModuleList(
            nn.ModuleDict({"up": nn.Linear(d_hidden, d_hidden), "down": nn.Linear(d_hidden, d_hidden)})
            for _ in range(n_layers)
        )
        self.out = nn.Linear(d_hidden, d_out)
        self.head = nn.Linear(d_out, vocab_size)
        nn.init.normal_(self.tok.weight, std=0.1)
        if tied:  # the output layer reuses the token embeddings (as GPT-2 does): half the parameters
            assert d_out == d_embed, "tied embeddings need d_out == d_embed"
            self.head.weight = self.tok.weight

    def _mlp(self, features: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.inp(features))
        for block in self.blocks:
            x = x + block["down"](F.relu(block["up"](x)))
        return F.relu(self.out(x))

    def _padded(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Embeddings padded with `window` zero vectors at both ends, and the sequence average."""
        e = self.tok(ids)  # (B, T, d)
        pad = e.new_zeros(e.shape[0], self.window, e.shape[2])
        average = e.sum(dim=1, keepdim=True) * (1.0 / ids.shape[1])  # a sum times 1/T: no division
        return torch.cat([pad, e, pad], dim=1), average

    def trunk(self, ids: torch.Tensor) -> torch.Tensor:
        """Hidden vectors (B, T, d_out) at every position: the scored forward pass."""
        padded, average = self._padded(ids)
        B, T = ids.shape
        windows = [padded[:, i: i + T] for i in range(2 * self.window + 1)]
        return self._mlp(torch.cat(windows + [average.expand(B, T, -1)], dim=-1))

    def masked_hidden(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The same vectors at the masked positions only, (n_masked, d_out): what training needs,
        at a fraction of the cost. (Used by train.py; not part of the scored forward pass.)"""
        padded, average = self._padded(ids)
        b, t = mask.nonzero(as_tuple=True)
        windows = [padded[b, t + i] for i in range(2 * self.window + 1)]
        return self._mlp(torch.cat(windows + [average[b, 0]], dim=-1))

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(ids))


def build(config: str | dict = "full") -> WindowMLP:
    return WindowMLP(**(CONFIGS[config] if isinstance(config, str) else config))


def save_checkpoint(model: WindowMLP, path: str | Path) -> None:
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    tmp = Path(str(path) + ".tmp")
    torch.save({"arch": ARCH, "config": model.config, "state_dict": state}, tmp)
    tmp.replace(path)


def load_checkpoint(path: str | Path) -> WindowMLP:
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if ckpt.get("arch") != ARCH:
        raise ValueError(f"{path} holds a {ckpt.get('arch')!r} model, not {ARCH!r}")
    model = WindowMLP(**ckpt["config"])
    model.load_state_dict(ckpt["state_dict"])
    return model


def get_trained_model() -> nn.Module:
    if not CHECKPOINT.exists():
        raise FileNotFoundError(f"{CHECKPOINT} is missing: run train_reference.py first")
    return load_checkpoint(CHECKPOINT).eval()
