"""Train the model in model.py on ~/assets/train.bin and save it where get_trained_model() looks.

    python train.py                      # continue from the current weights, default settings
    python train.py --scratch --steps 5000 --batch-size 128 --lr 3e-3
    python train.py --seconds 1800       # stop after half an hour whatever --steps says

Only the scored forward pass is restricted; this script may use any operation (softmax in the
loss, Adam, ...). It imports ``model`` from this folder and uses its ``build``, ``save_checkpoint``
and ``get_trained_model``; a model with ``trunk`` and ``head`` gets logits only at the masked
positions (see masked_logits), which is much cheaper than the full (batch, 128, 50257) output.

Data: train.bin is a flat array of GPT-2 token ids (numpy uint16). A batch is random 128-token
windows; in each window exactly 19 positions (15%, rounded) are chosen at random and replaced by
the mask id 50256, the same scheme the scorer uses on its held-out data. The last 1% of train.bin
(at most 2M tokens) is kept out of training here and used for the loss this script prints as
"held-out", which estimates the scorer's loss (score = ln(loss - 1.5)).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).absolute().parent
sys.path.insert(0, str(HERE))
import model as M  # noqa: E402 - the model.py next to this file

SEQ_LEN = 128
MASK_ID = 50256
MASKED_PER_SEQ = round(0.15 * SEQ_LEN)  # 19
ASSETS = HERE.parent / "assets"


def load_tokens(path: str | Path) -> np.ndarray:
    return np.memmap(path, dtype=np.uint16, mode="r")


def sample_windows(tokens: np.ndarray, batch_size: int, rng: np.random.Generator) -> torch.Tensor:
    """(batch_size, 128) int64 windows starting at random offsets."""
    starts = rng.integers(0, len(tokens) - SEQ_LEN, size=batch_size)
    return torch.from_numpy(tokens[starts[:, None] + np.arange(SEQ_LEN)].astype(np.int64))


def mask_windows(ids: torch.Tensor, rng: np.random.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """(inputs with 19 positions per row set to MASK_ID, boolean mask of those positions)."""
    order = np.argsort(rng.random(tuple(ids.shape)), axis=1)[:, :MASKED_PER_SEQ]
    mask = np.zeros(tuple(ids.shape), dtype=bool)
    np.put_along_axis(mask, order, True, axis=1)
    mask_t = torch.from_numpy(mask)
    return ids.masked_fill(mask_t, MASK_ID), mask_t


def masked_logits(net: torch.nn.Module, inputs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Logits (n_masked, vocab) at the masked positions, computed only there when the model allows
    it: a model with ``head`` and ``masked_hidden(ids, mask)`` (hidden vectors at the masked
    positions only) or ``trunk(ids)`` (at all positions) never builds the full 50257-wide output."""
    if hasattr(net, "head") and hasattr(net, "masked_hidden"):
        return net.head(net.masked_hidden(inputs, mask))
    if hasattr(net, "head") and hasattr(net, "trunk"):
        return net.head(net.trunk(inputs)[mask])
    return net(inputs)[mask]


def split(tokens: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    held = min(2_000_000, len(tokens) // 100)
    held = max(held, 4 * SEQ_LEN)
    return tokens[:-held], tokens[-held:]


@torch.no_grad()
def evaluate(net: torch.nn.Module, tokens: np.ndarray, batches: int, batch_size: int, device: str,
             seed: int = 1234) -> float:
    rng = np.random.default_rng(seed)
    was_training = net.training
    net.eval()
    total, count = 0.0, 0
    for _ in range(batches):
        ids = sample_windows(tokens, batch_size, rng)
        inputs, mask = mask_windows(ids, rng)
        inputs, mask, ids = inputs.to(device), mask.to(device), ids.to(device)
        logits = masked_logits(net, inputs, mask).float()
        total += F.cross_entropy(logits, ids[mask], reduction="sum").item()
        count += int(mask.sum())
    net.train(was_training)
    return total / count


def train(net: torch.nn.Module, tokens: np.ndarray, *, steps: int, batch_size: int, lr: float, device: str,
          seed: int = 0, seconds: float | None = None, log_every: int = 50, weight_decay: float = 0.0,
          progress=None, log=print) -> dict:
    """AdamW with a short warm-up and a cosine decay; returns a summary. Deterministic for a seed on one machine."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    net.to(device).train()
    params = list(net.parameters())
    try:  # the fused AdamW (one kernel for all parameters) is several times faster, on CPUs too
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, betas=(0.9, 0.98), fused=True)
    except (RuntimeError, TypeError, ValueError):  # a torch or device without it
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, betas=(0.9, 0.98))
    warmup = max(1, steps // 20)
    on_gpu = device.startswith("cuda")
    autocast = torch.autocast("cuda", dtype=torch.bfloat16) if on_gpu else torch.autocast("cpu", enabled=False)
    started = time.time()
    running, done = None, 0
    for step in range(steps):
        if seconds is not None and time.time() - started > seconds:
            log(f"stopping after {step} steps: --seconds {seconds:g} reached")
            break
        if step < warmup:
            scale = (step + 1) / warmup
        else:  # cosine from 1 down to 0.1
            scale = 0.1 + 0.45 * (1 + math.cos(math.pi * (step - warmup) / max(1, steps - warmup)))
        for group in opt.param_groups:
            group["lr"] = lr * scale
        ids = sample_windows(tokens, batch_size, rng)
        inputs, mask = mask_windows(ids, rng)
        inputs, mask, ids = inputs.to(device), mask.to(device), ids.to(device)
        with autocast:
            logits = masked_logits(net, inputs, mask)
        loss = F.cross_entropy(logits.float(), ids[mask])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        value = loss.item()
        running = value if running is None else 0.95 * running + 0.05 * value
        done = step + 1
        if progress is not None:
            progress(done, steps)
        if log_every and (done % log_every == 0 or done == steps):
            log(f"step {done}/{steps}  loss {running:.4f}  lr {lr * scale:.2e}  {time.time() - started:.0f}s")
    net.eval()
    return {"steps": done, "train_loss": running, "seconds": round(time.time() - started, 1)}


def init_output_bias(net: torch.nn.Module, tokens: np.ndarray, sample: int = 10_000_000) -> None:
    """Start the output layer's bias at the log unigram frequencies: a model that has learnt
    nothing else then already predicts common tokens, which shortens training a lot."""
    bias = getattr(getattr(net, "head", None), "bias", None)
    if bias is None:
        return
    counts = np.bincount(np.asarray(tokens[:sample]), minlength=bias.numel()).astype(np.float64)
    freq = (counts + 0.1) / (counts.sum() + 0.1 * bias.numel())
    with torch.no_grad():
        bias.copy_(torch.from_numpy(np.log(freq)).to(bias.dtype))


def default_config() -> str:
    """'tiny' when the assets were prepared for the CPU smoke profile, else 'full'."""
    info = ASSETS / "data_info.json"
    try:
        return "tiny" if json.loads(info.read_text())["profile"] == "smoke" else "full"
    except (OSError, ValueError, KeyError):
        return "full"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=str(ASSETS / "train.bin"))
    ap.add_argument("--out", default=str(M.CHECKPOINT), help="where to save (default: checkpoint.pt next to model.py)")
    ap.add_argument("--scratch", action="store_true", help="start from a new model instead of the current weights")
    ap.add_argument("--config", default="auto", help="model size for --scratch: a name in model.CONFIGS, or auto")
    ap.add_argument("--steps", type=int, default=2000)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=2e-3)
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--seconds", type=float, default=None, help="stop after this many seconds of training")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--eval-batches", type=int, default=20)
    args = ap.parse_args(argv)

    tokens = load_tokens(args.data)
    train_part, held_out = split(tokens)
    if args.scratch:
        torch.manual_seed(args.seed)
        net = M.build(default_config() if args.config == "auto" else args.config)
        init_output_bias(net, train_part)
    else:
        net = M.get_trained_model()
    n_params = sum(p.numel() for p in net.parameters())
    print(f"{len(tokens):,} tokens in {args.data}; model {type(net).__name__} with {n_params:,} parameters on {args.device}")
    net.to(args.device)
    before = evaluate(net, held_out, args.eval_batches, 32, args.device)
    print(f"held-out loss before: {before:.4f}")
    summary = train(net, train_part, steps=args.steps, batch_size=args.batch_size, lr=args.lr, device=args.device,
                    seed=args.seed, seconds=args.seconds, weight_decay=args.weight_decay)
    after = evaluate(net, held_out, args.eval_batches, 32, args.device)
    print(f"held-out loss after: {after:.4f}  (score would be about ln({after:.3f} - 1.5) = "
          f"{math.log(after - 1.5) if after > 1.5 else float('nan'):.3f})")
    M.save_checkpoint(net.cpu(), args.out)
    print(f"saved {args.out} ({summary['steps']} steps, {summary['seconds']} s)")


if __name__ == "__main__":
    main()
