"""A starting point: REINFORCE with the judge as the reward. Improve it, or replace it.

Each step takes a batch of training messages (~/assets/train_prompts.json) and samples several
answers to each from the current model. The judge (through the proxy, solution/judge.py) compares
every sample with the *starting* model's greedy answer to the same message, shown in a random
order: reward 1 if the sample wins, 0 if it loses or the verdict stays unreadable (as the scorer
counts it), 1/2 if the two are identical. A sample's advantage is its reward minus the mean reward of that message's
samples; the loss is minus the advantage times the log-probability of the sampled tokens
(averaged over tokens). The model is saved to ~/finetuned_model at the end and every
--save-every steps (the scorer reads model.pt there).

    python train_rl.py                       # the profile's defaults (gpu: 2 GPUs are there; this uses one)
    python train_rl.py --steps 5 --batch 4   # a quick try

Nothing here is tuned. Known weaknesses: no KL penalty to the base model, a weak and fixed
opponent, few samples per message, one judge call per sample.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

import torch
import torch.nn.functional as F

import chat
import judge
from model import generate, load_model, save_model
from tokenizer import load_tokenizer

HOME = os.path.expanduser("~")
DEFAULTS = {  # per profile (REBENCH_PROFILE)
    "gpu": {"steps": 200, "batch": 16, "samples": 4, "lr": 1e-5},
    "smoke": {"steps": 20, "batch": 8, "samples": 4, "lr": 1e-3},
}


def token_logprobs(model, rows: list[tuple[list[int], list[int]]], device) -> torch.Tensor:
    """Mean log-probability of each row's answer tokens given its prompt; rows = (prompt ids, answer ids)."""
    keep = model.cfg.block_size + 1
    seqs = [(p + a)[-keep:] for p, a in rows]
    width = max(len(s) for s in seqs) - 1
    x = torch.zeros(len(rows), width, dtype=torch.long)
    y = torch.zeros(len(rows), width, dtype=torch.long)
    m = torch.zeros(len(rows), width)
    for i, (seq, (_p, a)) in enumerate(zip(seqs, rows)):
        t = len(seq) - 1
        x[i, :t], y[i, :t] = torch.tensor(seq[:-1]), torch.tensor(seq[1:])
        m[i, t - min(len(a), t):t] = 1.0
    x, y, m = x.to(device), y.to(device), m.to(device)
    logp = -F.cross_entropy(model(x).float().transpose(1, 2), y, reduction="none")
    return (logp * m).sum(1) / m.sum(1).clamp(min=1.0)


def main() -> None:
    profile = os.environ.get("REBENCH_PROFILE", "gpu")
    d = DEFAULTS.get(profile, DEFAULTS["gpu"])
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=d["steps"])
    ap.add_argument("--batch", type=int, default=d["batch"], help="messages per step")
    ap.add_argument("--samples", type=int, default=d["samples"], help="answers sampled per message")
    ap.add_argument("--lr", type=float, default=d["lr"])
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--save-every", type=int, default=50)
    ap.add_argument("--assets", default=os.path.join(HOME, "assets"))
    ap.add_argument("--out", default=os.path.join(HOME, "finetuned_model"))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()

    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.manual_seed(a.seed)
    rng = random.Random(a.seed)
    tok = load_tokenizer(os.path.join(a.assets, "tokenizer.json"))
    messages = json.load(open(os.path.join(a.assets, "train_prompts.json"), encoding="utf-8"))
    model = load_model(os.path.join(a.assets, "base_model")).to(device)
    client = judge.JudgeClient()
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0)
    print(f"the starting model answers {len(messages)} training messages (the opponent)...", flush=True)
    opponent = dict(zip(messages, chat.answer(model, tok, messages, batch_size=64)))
    gen = torch.Generator(device=device).manual_seed(a.seed)
    t0 = time.time()
    for step in range(a.steps):
        batch = rng.sample(messages, min(a.batch, len(messages)))
        prompts = [tok.encode(chat.format_prompt(m)) for m in batch for _ in range(a.samples)]
        model.eval()
        outs = generate(model, prompts, chat.MAX_NEW_TOKENS, tok.eot, temperature=a.temperature, generator=gen,
                        batch_size=len(prompts))
        texts = [chat.clean_answer(tok.decode(o)) for o in outs]
        items, which = [], []
        rewards = [0.5] * len(texts)
        for i, text in enumerate(texts):
            msg = batch[i // a.samples]
            if text != opponent[msg]:
                items.append((msg, text, opponent[msg], rng.random() < 0.5))
                which.append(i)
        for i, r in zip(which, judge.prefer_many(client, items)):
            rewards[i] = r
        r = torch.tensor(rewards, device=device).view(len(batch), a.samples)
        adv = (r - r.mean(1, keepdim=True)).flatten()
        model.train()
        rows = [(p, o) for p, o in zip(prompts, outs) if o]
        keep = torch.tensor([bool(o) for o in outs], device=device)
        loss = -(adv[keep] * token_logprobs(model, rows, device)).mean() if rows else torch.zeros((), device=device)
        opt.zero_grad(set_to_none=True)
        if loss.requires_grad:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        print(f"step {step + 1}/{a.steps}: mean reward {r.mean().item():.3f}, judge calls {len(items)}, "
              f"{time.time() - t0:.0f} s", flush=True)
        if (step + 1) % a.save_every == 0:
            save_model(model, a.out)
    print("saved", save_model(model, a.out))


if __name__ == "__main__":
    main()
