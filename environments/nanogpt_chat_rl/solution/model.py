"""A GPT-2-style decoder (pre-norm blocks, learned positions, output layer tied to the token
embedding) with a key/value cache for fast batched generation.

Saved models are folders holding ``model.pt``: ``torch.save({"config": {...}, "state_dict": {...}})``.
Use :func:`save_model` and :func:`load_model`; the scorer loads ``model.pt`` with
``torch.load(weights_only=True)`` into its own copy of this class, so only the weights (and a
configuration equal to the base model's) count: changing this file does not change how you are
scored.
"""

from __future__ import annotations

import math
import os
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

WEIGHTS = "model.pt"


@dataclass
class GPTConfig:
    vocab_size: int = 50257
    block_size: int = 1024
    n_layer: int = 12
    n_head: int = 12
    n_embd: int = 768


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        if cfg.n_embd % cfg.n_head:
            raise ValueError("n_embd must be a multiple of n_head")
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd)
        self.out = nn.Linear(cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, cache: list | None) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        if cache is not None:
            if cache:  # append to what earlier steps computed
                k = torch.cat([cache[0], k], dim=2)
                v = torch.cat([cache[1], v], dim=2)
            cache[:] = [k, v]
        if mask is None:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(y.transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.norm_a = nn.LayerNorm(cfg.n_embd)
        self.attn = Attention(cfg)
        self.norm_b = nn.LayerNorm(cfg.n_embd)
        self.up = nn.Linear(cfg.n_embd, 4 * cfg.n_embd)
        self.down = nn.Linear(4 * cfg.n_embd, cfg.n_embd)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None = None, cache: list | None = None) -> torch.Tensor:
        x = x + self.attn(self.norm_a(x), mask, cache)
        return x + self.down(F.gelu(self.up(self.norm_b(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, cfg: GPTConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.tok = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.pos = nn.Embedding(cfg.block_size, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.norm = nn.LayerNorm(cfg.n_embd)
        for m in self.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                nn.init.normal_(m.weight, 0.0, 0.02)
            if isinstance(m, nn.Linear):
                nn.init.zeros_(m.bias)
        for name, p in self.named_parameters():  # residual branches start small (GPT-2's scaled init)
            if name.endswith(("attn.out.weight", "down.weight")):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * cfg.n_layer))

    def forward(self, idx: torch.Tensor, pos: torch.Tensor | None = None, mask: torch.Tensor | None = None,
                cache: list | None = None) -> torch.Tensor:
        """Logits (batch, time, vocab). Without ``mask`` attention is plainly causal over ``idx``;
        generation passes positions, a boolean mask (batch, 1, time, keys) and a per-layer cache."""
        if pos is None:
            pos = torch.arange(idx.shape[1], device=idx.device)
        x = self.tok(idx) + self.pos(pos)
        for i, block in enumerate(self.blocks):
            x = block(x, mask, None if cache is None else cache[i])
        return self.norm(x) @ self.tok.weight.T


# -- saving and loading --------------------------------------------------------------------------
def save_model(model: GPT, folder: str) -> str:
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, WEIGHTS)
    tmp = path + ".tmp"
    state = {k: v.detach().to("cpu") for k, v in model.state_dict().items()}
    torch.save({"config": asdict(model.cfg), "state_dict": state}, tmp)
    os.replace(tmp, path)  # a scoring that starts meanwhile never sees half a file
    return path


def load_model(folder: str, map_location: str = "cpu") -> GPT:
    ckpt = torch.load(os.path.join(folder, WEIGHTS), map_location=map_location, weights_only=True)
    model = GPT(GPTConfig(**ckpt["config"]))
    model.load_state_dict(ckpt["state_dict"])
    return model


# -- generation ---------------------------------------------------------------------------------
@torch.no_grad()
def generate(model: GPT, prompts: list[list[int]], max_new_tokens: int, eot: int, *, temperature: float = 0.0,
             top_k: int | None = None, generator: torch.Generator | None = None, batch_size: int = 32,
             device: str | torch.device | None = None) -> list[list[int]]:
    """New tokens for each prompt (token ids), at most ``max_new_tokens``, stopping after ``eot``
    (which is kept). temperature 0 is greedy. Prompts are left-padded within a batch; padded
    positions are masked out, so a prompt's answer does not depend on its neighbours (up to float
    rounding). Prompts longer than block_size - max_new_tokens keep their last tokens."""
    device = device or next(model.parameters()).device
    keep = model.cfg.block_size - max_new_tokens
    if keep < 1:
        raise ValueError(f"block_size {model.cfg.block_size} leaves no room for {max_new_tokens} new tokens")
    results: list[list[int]] = []
    for start in range(0, len(prompts), batch_size):
        chunk = [list(p[-keep:]) or [eot] for p in prompts[start:start + batch_size]]
        b, width = len(chunk), max(len(p) for p in chunk)
        ids = torch.zeros(b, width, dtype=torch.long)
        real = torch.zeros(b, width, dtype=torch.bool)
        for i, p in enumerate(chunk):
            ids[i, width - len(p):] = torch.tensor(p)
            real[i, width - len(p):] = True
        ids, real = ids.to(device), real.to(device)
        pos = (real.long().cumsum(1) - 1).clamp(min=0)
        causal = torch.ones(width, width, dtype=torch.bool, device=device).tril()
        eye = torch.eye(width, dtype=torch.bool, device=device)
        mask = (causal & real[:, None, :]) | eye  # padding attends to itself only (no empty rows)
        cache: list = [[] for _ in model.blocks]
        logits = model(ids, pos, mask[:, None], cache)[:, -1]
        last = pos[:, -1]
        out = torch.zeros(b, max_new_tokens, dtype=torch.long, device=device)
        done = torch.zeros(b, dtype=torch.bool, device=device)
        n = 0
        for step in range(max_new_tokens):
            nxt = _pick(logits.float(), temperature, top_k, generator)
            nxt = torch.where(done, torch.full_like(nxt, eot), nxt)
            out[:, step] = nxt
            n = step + 1
            done |= nxt == eot
            if bool(done.all()) or step + 1 == max_new_tokens:
                break
            real = torch.cat([real, torch.ones(b, 1, dtype=torch.bool, device=device)], dim=1)
            last = last + 1
            logits = model(nxt[:, None], last[:, None], real[:, None, None, :], cache)[:, -1]
        for row in out[:, :n].tolist():
            results.append(row[:row.index(eot) + 1] if eot in row else row)
    return results


def _pick(logits: torch.Tensor, temperature: float, top_k: int | None, generator: torch.Generator | None) -> torch.Tensor:
    if temperature <= 0:
        return logits.argmax(-1)
    logits = logits / temperature
    if top_k:
        kth = torch.topk(logits, min(top_k, logits.shape[-1]), dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    probs = torch.softmax(logits, dim=-1)
    if generator is not None and generator.device.type != probs.device.type:
        # Sample where the generator lives (a CPU generator for CUDA logits, or the reverse);
        # compare types only: a generator made with device="cuda" reports "cuda", the logits "cuda:0".
        return torch.multinomial(probs.to(generator.device), 1, generator=generator).squeeze(1).to(probs.device)
    return torch.multinomial(probs, 1, generator=generator).squeeze(1)
