#!/usr/bin/env python3
"""Train one small GPT and report its final validation loss.

    python train.py --n_embd 256 --max_iters 2000 [--out result.json] [--device cuda:3]

Everything except the width (--n_embd) and the number of steps (--max_iters) is fixed: 4 layers,
the context length and batch size of the profile (see budget.py), AdamW with a linear warm-up
and a cosine decay that both scale with max_iters, and a fixed seed. So the final loss is a
function of (n_embd, max_iters) alone, up to the noise of a fixed-seed run.

Runs whose FLOPs (budget.flops: n_layer * n_embd^2 * 72 * block_size * batch_size * max_iters)
exceed the per-experiment cap are refused before anything is trained.

Data: train.bin and val.bin, flat uint16 token arrays, in --data_dir (default
$SCALING_DATA_DIR, else $REBENCH_HOME/assets, else ~/assets).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import budget  # noqa: E402

EXIT_OVER_CAP = 3


class OverCap(Exception):
    pass


def n_heads(n_embd: int, head_dim: int) -> int:
    """Attention heads for a width: about n_embd / head_dim, at least 1, dividing n_embd."""
    h = max(1, n_embd // head_dim)
    while n_embd % h:
        h -= 1
    return h


class SelfAttention(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.n_head = n_head
        self.qkv = nn.Linear(n_embd, 3 * n_embd, bias=False)
        self.proj = nn.Linear(n_embd, n_embd, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.n_head, c // self.n_head).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).contiguous().view(b, t, c))


class Block(nn.Module):
    def __init__(self, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(n_embd)
        self.attn = SelfAttention(n_embd, n_head)
        self.ln2 = nn.LayerNorm(n_embd)
        self.fc = nn.Linear(n_embd, 4 * n_embd, bias=False)
        self.out = nn.Linear(4 * n_embd, n_embd, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """Token and position embeddings, pre-norm blocks, a final norm, and a head tied to the token embedding."""

    def __init__(self, vocab_size: int, block_size: int, n_layer: int, n_embd: int, n_head: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab_size, n_embd)
        self.pos = nn.Embedding(block_size, n_embd)
        self.blocks = nn.ModuleList(Block(n_embd, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(n_embd)
        self.head = nn.Linear(n_embd, vocab_size, bias=False)
        self.head.weight = self.tok.weight
        for name, p in self.named_parameters():
            if p.dim() == 2:
                # residual-stream outputs start smaller so the sum over layers stays of unit scale
                std = 0.02 / math.sqrt(2 * n_layer) if name.endswith(("proj.weight", "out.weight")) else 0.02
                nn.init.normal_(p, mean=0.0, std=std)

    def forward(self, idx: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.ln_f(x))
        return F.cross_entropy(logits.float().view(-1, logits.shape[-1]), targets.reshape(-1))


def default_data_dir() -> str:
    if os.environ.get("SCALING_DATA_DIR"):
        return os.environ["SCALING_DATA_DIR"]
    home = os.environ.get("REBENCH_HOME") or os.path.expanduser("~")
    return os.path.join(home, "assets")


def load_split(data_dir: str, split: str) -> np.ndarray:
    path = os.path.join(data_dir, f"{split}.bin")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no {path}: the token files are train.bin and val.bin in the assets folder "
                                f"(pass --data_dir or set SCALING_DATA_DIR)")
    return np.memmap(path, dtype=np.uint16, mode="r")


def lr_at(it: int, max_iters: int, peak: float) -> float:
    warmup = max(1, round(budget.WARMUP_FRACTION * max_iters))
    if it < warmup:
        return peak * (it + 1) / warmup
    progress = (it - warmup) / max(1, max_iters - warmup)
    low = peak * budget.MIN_LR_FRACTION
    return low + 0.5 * (1.0 + math.cos(math.pi * min(1.0, progress))) * (peak - low)


def peak_lr(n_embd: int, c: dict) -> float:
    return c["lr"] * min(1.0, c["lr_width"] / n_embd)


@torch.no_grad()
def evaluate(model: nn.Module, val: np.ndarray, c: dict, device: str, amp) -> float:
    """Mean loss over the first eval_tokens of val.bin, in non-overlapping windows (the same every time)."""
    t = c["block_size"]
    n_seq = max(1, min(c["eval_tokens"] // t, (len(val) - 1) // t))
    model.eval()
    total, count = 0.0, 0
    for start in range(0, n_seq, c["eval_batch"]):
        rows = range(start, min(n_seq, start + c["eval_batch"]))
        x = np.stack([val[r * t:(r + 1) * t] for r in rows]).astype(np.int64)
        y = np.stack([val[r * t + 1:(r + 1) * t + 1] for r in rows]).astype(np.int64)
        with amp():
            loss = model(torch.from_numpy(x).to(device), torch.from_numpy(y).to(device))
        total += float(loss) * len(rows)
        count += len(rows)
    model.train()
    return total / count


def train(n_embd: int, max_iters: int, *, profile: str | None = None, data_dir: str | None = None,
          device: str | None = None, seed: int = 0, enforce_cap: bool = True, compile: bool = False,
          micro_batch: int | None = None, log_every: int = 0, log=print) -> dict:
    """Train one model; return its final validation loss and timings. Raises OverCap over the cap."""
    profile = profile or budget.profile_name()
    c = budget.constants(profile)
    if int(n_embd) != n_embd or n_embd < 1 or int(max_iters) != max_iters or max_iters < 1:
        raise ValueError("n_embd and max_iters must be positive integers")
    n_embd, max_iters = int(n_embd), int(max_iters)
    flops = budget.flops(n_embd, max_iters, profile)
    if enforce_cap and flops > c["cap_flops"]:
        raise OverCap(f"refusing to train: n_embd={n_embd}, max_iters={max_iters} needs {flops:.4g} FLOPs, over the "
                      f"per-experiment cap of {c['cap_flops']:.4g} FLOPs ({profile} profile); at this width at most "
                      f"max_iters={budget.iters_for(n_embd, c['cap_flops'], profile)} is allowed")
    device = device or ("cuda" if torch.cuda.is_available() else "cpu")
    data_dir = data_dir or default_data_dir()
    train_data, val_data = load_split(data_dir, "train"), load_split(data_dir, "val")
    b, t = c["batch_size"], c["block_size"]
    micro = micro_batch or b
    if micro < 1 or b % micro:
        raise ValueError(f"--micro_batch must divide the batch size {b}")
    if len(train_data) <= t + 1 or len(val_data) <= t + 1:
        raise ValueError(f"the token files in {data_dir} are shorter than one context ({t + 1} tokens)")

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    cuda = device.startswith("cuda")
    if cuda:
        if torch.device(device).index is not None:
            torch.cuda.set_device(torch.device(device))  # so synchronize() waits for this GPU
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True

    def amp():
        return torch.autocast("cuda", dtype=torch.bfloat16) if cuda else torch.autocast("cpu", enabled=False)

    n_head = n_heads(n_embd, c["head_dim"])
    model = GPT(c["vocab_size"], t, c["n_layer"], n_embd, n_head).to(device)
    n_params = sum(p.numel() for p in model.parameters())
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt_kwargs = {"fused": True} if cuda else {}
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": budget.WEIGHT_DECAY},
                             {"params": no_decay, "weight_decay": 0.0}], lr=peak_lr(n_embd, c), betas=budget.BETAS,
                            **opt_kwargs)
    step_model = torch.compile(model) if compile else model
    peak = peak_lr(n_embd, c)

    def batch():
        ix = rng.integers(0, len(train_data) - t - 1, size=b)
        x = np.stack([train_data[i:i + t] for i in ix]).astype(np.int64)
        y = np.stack([train_data[i + 1:i + 1 + t] for i in ix]).astype(np.int64)
        x, y = torch.from_numpy(x), torch.from_numpy(y)
        if cuda:
            return x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device, non_blocking=True)
        return x, y

    started = time.perf_counter()
    warm = min(5, max_iters // 5)  # steady-state throughput is timed from this step on
    warm_at = started
    x, y = batch()
    for it in range(max_iters):
        if it == warm and warm:
            if cuda:
                torch.cuda.synchronize()
            warm_at = time.perf_counter()
        for group in opt.param_groups:
            group["lr"] = lr_at(it, max_iters, peak)
        if micro == b:
            with amp():
                loss = step_model(x, y)
            loss.backward()
        else:  # the same step, its batch split into parts whose gradients add up (less memory)
            parts, loss = b // micro, 0.0
            for xs, ys in zip(x.split(micro), y.split(micro)):
                with amp():
                    part = step_model(xs, ys) / parts
                part.backward()
                loss = loss + part.detach()
        x, y = batch()  # the next batch is read while the GPU works
        torch.nn.utils.clip_grad_norm_(model.parameters(), budget.GRAD_CLIP)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if log_every and (it % log_every == 0 or it == max_iters - 1):
            log(f"iter {it}/{max_iters} loss {float(loss.detach()):.4f} lr {lr_at(it, max_iters, peak):.2e} "
                f"{time.perf_counter() - started:.1f}s")
    if cuda:
        torch.cuda.synchronize()
    train_s = time.perf_counter() - started
    val_loss = evaluate(model, val_data, c, device, amp)
    if not math.isfinite(val_loss):
        log("warning: the validation loss is not finite")
    tokens = max_iters * b * t
    steady_s = (time.perf_counter() - warm_at) if warm else train_s
    steady_tokens = (max_iters - warm) * b * t
    return {
        "profile": profile, "n_embd": n_embd, "max_iters": max_iters, "n_head": n_head, "n_layer": c["n_layer"],
        "flops": flops, "params": n_params, "seed": seed, "val_loss": val_loss, "tokens": tokens,
        "train_seconds": round(train_s, 3), "tokens_per_s": tokens / train_s, "flops_per_s": flops / train_s,
        "steady_tokens_per_s": steady_tokens / steady_s,
        "steady_flops_per_s": flops * (max_iters - warm) / max_iters / steady_s,
        "device": str(device), "peak_lr": peak, "micro_batch": micro,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n_embd", type=int, required=True, help="model width")
    ap.add_argument("--max_iters", type=int, required=True, help="training steps")
    ap.add_argument("--out", help="write the result (val_loss, flops, timings) as JSON here")
    ap.add_argument("--device", help="cuda, cuda:N or cpu (default: cuda if available)")
    ap.add_argument("--data_dir", help="folder with train.bin and val.bin")
    ap.add_argument("--seed", type=int, default=0, help="initialisation and batch-order seed")
    ap.add_argument("--compile", action="store_true", help="torch.compile the model (faster long runs on GPU)")
    ap.add_argument("--micro_batch", type=int, help="split each step's batch into parts of this many sequences and "
                    "add their gradients (the same step, less memory); must divide the batch size")
    ap.add_argument("--log_every", type=int, default=0, help="print the training loss every N steps")
    args = ap.parse_args(argv)
    try:
        result = train(args.n_embd, args.max_iters, data_dir=args.data_dir, device=args.device, seed=args.seed,
                       compile=args.compile, micro_batch=args.micro_batch, log_every=args.log_every)
    except OverCap as exc:
        print(exc, file=sys.stderr)
        return EXIT_OVER_CAP
    except (ValueError, FileNotFoundError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.out:
        with open(args.out, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
