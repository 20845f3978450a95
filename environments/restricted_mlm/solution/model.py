"""The starting masked language model: token embeddings, a bag-of-words context and a ReLU MLP.

The scorer imports this file and calls ``get_trained_model()``. The model it returns maps int64
token ids of shape (batch, 128) to logits of shape (batch, 128, 50257). Its forward pass may only
use the allowed operations (see the instructions): embeddings, linear layers, matmul/einsum, sum,
addition, multiplication, ReLU, and indexing/reshaping. Training code may use anything.

This model sees, at each position, the token there (the mask token 50256 at masked positions),
the position, and the average of all 128 token vectors of the sequence. It never looks at a
masked position's neighbours specifically, so it cannot do much better than predicting which
tokens are common in sequences like this one. That is the starting point to improve on.

Weights: ``get_trained_model()`` loads ``checkpoint.pt`` next to this file if it exists (what
``train.py`` writes), and otherwise the starting checkpoint in ``~/assets/start_checkpoint.pt``.
A checkpoint is a dict ``{"arch", "config", "state_dict"}`` saved with ``torch.save``.
"""

from __future__ import annotations

from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F

VOCAB_SIZE = 50257  # GPT-2's vocabulary
MASK_ID = 50256  # masked positions hold this id (GPT-2's <|endoftext|>)
SEQ_LEN = 128

HERE = Path(__file__).absolute().parent
CHECKPOINT = HERE / "checkpoint.pt"  # written by train.py
START_CHECKPOINT = HERE.parent / "assets" / "start_checkpoint.pt"  # provided, read-only

# "full" is the size of the provided starting checkpoint on the GPU profile; "tiny" on the
# CPU smoke profile. train.py picks one (see its --config).
CONFIGS = {
    "full": {"d_model": 256, "d_hidden": 1024, "n_layers": 2},
    "tiny": {"d_model": 32, "d_hidden": 128, "n_layers": 1},
}
ARCH = "bag_of_words_mlp"


class MLPBlock(nn.Module):
    """x + W2 relu(W1 x): a residual ReLU MLP."""

    def __init__(self, d_model: int, d_hidden: int) -> None:
        super().__init__()
        self.up = nn.Linear(d_model, d_hidden)
        self.down = nn.Linear(d_hidden, d_model)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(F.relu(self.up(x)))


class BagOfWordsMLP(nn.Module):
    def __init__(self, d_model: int, d_hidden: int, n_layers: int,
                 vocab_size: int = VOCAB_SIZE, seq_len: int = SEQ_LEN) -> None:
        super().__init__()
        self.config = {"d_model": d_model, "d_hidden": d_hidden, "n_layers": n_layers,
                       "vocab_size": vocab_size, "seq_len": seq_len}
        self.tok = nn.Embedding(vocab_size, d_model)
        self.pos = nn.Embedding(seq_len, d_model)
        self.context = nn.Linear(d_model, d_model)
        self.blocks = nn.ModuleList(MLPBlock(d_model, d_hidden) for _ in range(n_layers))
        self.head = nn.Linear(d_model, vocab_size)
        self.register_buffer("positions", torch.arange(seq_len), persistent=False)
        nn.init.normal_(self.tok.weight, std=0.02)
        nn.init.normal_(self.pos.weight, std=0.02)

    def trunk(self, ids: torch.Tensor) -> torch.Tensor:
        """Hidden vectors (batch, T, d_model); ``head`` turns them into logits."""
        h = self.tok(ids) + self.pos(self.positions[: ids.shape[1]])
        # The average over the sequence: a sum times 1/T (dividing by T would be rejected).
        average = h.sum(dim=1, keepdim=True) * (1.0 / ids.shape[1])
        x = h + self.context(average)
        for block in self.blocks:
            x = block(x)
        return x

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.trunk(ids))


def build(config: str | dict = "full") -> BagOfWordsMLP:
    cfg = CONFIGS[config] if isinstance(config, str) else config
    return BagOfWordsMLP(**cfg)


def save_checkpoint(model: BagOfWordsMLP, path: str | Path) -> None:
    state = {k: v.detach().cpu() for k, v in model.state_dict().items()}
    tmp = Path(str(path) + ".tmp")
    torch.save({"arch": ARCH, "config": model.config, "state_dict": state}, tmp)
    tmp.replace(path)  # never leave a half-written checkpoint where get_trained_model looks


def load_checkpoint(path: str | Path) -> BagOfWordsMLP:
    ckpt = torch.load(path, map_location="cpu", weights_only=True)
    if ckpt.get("arch") != ARCH:
        raise ValueError(f"{path} holds a {ckpt.get('arch')!r} model, not {ARCH!r}")
    model = BagOfWordsMLP(**ckpt["config"])
    model.load_state_dict(ckpt["state_dict"])
    return model


def get_trained_model() -> nn.Module:
    path = CHECKPOINT if CHECKPOINT.exists() else START_CHECKPOINT
    model = load_checkpoint(path)
    return model.eval()
