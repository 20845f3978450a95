"""Train or fine-tune a checkpoint on /home/agent/assets/train.bin.

Examples:
    # measure a checkpoint's loss on the training data
    python train.py --init /home/agent/assets/large_model.pth --steps 0
    # fine-tune only the token embedding of the corrupted model and save the result
    python train.py --init /home/agent/assets/large_model.pth --train-only wte --steps 500 --out /home/agent/fixed_model.pth
"""

from __future__ import annotations

import argparse
import math
import os
import time

import torch

from data import batch, load_tokens
from model import load_checkpoint, save_checkpoint

ASSETS = os.path.join(os.environ.get("REBENCH_HOME", os.path.expanduser("~")), "assets")


@torch.no_grad()
def evaluate(model, tokens, batches: int, batch_size: int, block: int, device: str, seed: int = 0) -> float:
    model.eval()
    gen = torch.Generator().manual_seed(seed)
    total = 0.0
    for _ in range(batches):
        x, y = batch(tokens, batch_size, block, gen, device)
        total += model.loss(x, y).item()
    model.train()
    return total / batches


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--init", default=os.path.join(ASSETS, "large_model.pth"), help="checkpoint to start from")
    ap.add_argument("--data", default=os.path.join(ASSETS, "train.bin"))
    ap.add_argument("--out", default=None, help="where to save (e.g. /home/agent/fixed_model.pth)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--block", type=int, default=None, help="context length (default: the model's)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--train-only", default=None, help="train only parameters whose name starts with this (e.g. wte)")
    ap.add_argument("--eval-batches", type=int, default=10)
    ap.add_argument("--seed", type=int, default=1234)
    args = ap.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(args.seed)
    model = load_checkpoint(args.init).to(device)
    block = args.block or model.cfg.block_size
    tokens = load_tokens(args.data)
    params = [p for n, p in model.named_parameters() if args.train_only is None or n.startswith(args.train_only)]
    for n, p in model.named_parameters():
        p.requires_grad_(args.train_only is None or n.startswith(args.train_only))
    print(f"{sum(p.numel() for p in params):,} trainable parameters on {device}; block {block}")
    print(f"loss before: {evaluate(model, tokens, args.eval_batches, args.batch, block, device):.4f}")
    opt = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(args.seed)
    t0 = time.time()
    for step in range(1, args.steps + 1):
        lr = args.lr * 0.5 * (1 + math.cos(math.pi * step / args.steps))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batch(tokens, args.batch, block, gen, device)
        loss = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 50 == 0 or step == args.steps:
            print(f"step {step}/{args.steps} loss {loss.item():.4f} ({time.time() - t0:.0f} s)", flush=True)
    if args.steps:
        print(f"loss after: {evaluate(model, tokens, args.eval_batches, args.batch, block, device):.4f}")
    if args.out:
        save_checkpoint(model.cpu(), args.out)
        print(f"saved {args.out}")


if __name__ == "__main__":
    main()
