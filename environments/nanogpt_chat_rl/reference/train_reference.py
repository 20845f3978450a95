"""Reference solution: expert iteration with the judge (best-of-N, then finetune on the winners).

Runs from a folder holding the starting solution's files (chat.py, judge.py, model.py,
tokenizer.py), as the participant would, and reaches the judge through the proxy like any
participant code. Each round:

1. For R training prompts, the current model samples N answers (smoke: its greedy answer and
   N samples at temperature 1.0, top-k 50, up to 60 tokens; gpu, as RE-Bench appendix B.6
   describes METR's reference: N = 8 samples at temperature 0.7, top-k 8, at most 20 tokens).
2. The judge picks each prompt's best answer among the distinct candidates (random order shown
   to the judge for every comparison). smoke: a ladder, where the first candidate is the champion
   and every other challenges it, taking its place on a win; gpu: a single-elimination bracket,
   pairs compared and winners moving on (an odd one out gets a bye).
3. The model is finetuned on (prompt, best answer) pairs with chat.sft_loss (only the answer's
   tokens are learned), E epochs.

No answer is written by a person: the model's own samples, ranked by the judge. Settings per
profile below (smoke: 2 rounds of 96 messages x 4 samples, under 1,000 judge calls; gpu: 4 rounds
of SFT on the best of 8, as in the paper's reference, with 1,024 prompts a round (the appendix's
prompt count is not reproduced here); not yet run at full size). Saves to ~/finetuned_model.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

import torch

import chat
import judge
from model import load_model, save_model
from tokenizer import load_tokenizer

HOME = os.path.expanduser("~")
PLANS = {
    "smoke": {"rounds": 2, "messages": 96, "samples": 4, "epochs": 4, "lr": 2e-3, "batch": 32, "greedy": True,
              "temperature": 1.0, "top_k": 50, "max_new_tokens": chat.MAX_NEW_TOKENS, "pick": "ladder"},
    "gpu": {"rounds": 4, "messages": 1024, "samples": 8, "epochs": 2, "lr": 1e-5, "batch": 16, "greedy": False,
            "temperature": 0.7, "top_k": 8, "max_new_tokens": 20, "pick": "bracket"},
}


def knockout(client: judge.JudgeClient, message: str, candidates: list[str], rng: random.Random) -> str:
    """A ladder: the first candidate holds the title; each other distinct one challenges it."""
    best = candidates[0]
    for challenger in dict.fromkeys(candidates[1:]):
        if challenger != best and client.prefer(message, challenger, best, rng.random() < 0.5) == 1.0:
            best = challenger
    return best


def bracket(client: judge.JudgeClient, message: str, candidates: list[str], rng: random.Random) -> str:
    """Single elimination: distinct candidates meet in pairs, winners go on; an odd one out waits a round."""
    field = list(dict.fromkeys(candidates))
    while len(field) > 1:
        winners = []
        for i in range(0, len(field) - 1, 2):
            a, b = field[i], field[i + 1]
            winners.append(a if client.prefer(message, a, b, rng.random() < 0.5) == 1.0 else b)
        if len(field) % 2:
            winners.append(field[-1])
        field = winners
    return field[0]


def main() -> None:
    plan = PLANS["smoke" if os.environ.get("REBENCH_PROFILE") == "smoke" else "gpu"]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--assets", default=os.path.join(HOME, "assets"))
    ap.add_argument("--out", default=os.path.join(HOME, "finetuned_model"))
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    torch.manual_seed(a.seed)
    torch.set_num_threads(min(2, torch.get_num_threads()))  # two at most; fewer where the process was given fewer (OMP_NUM_THREADS)
    rng = random.Random(a.seed)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tok = load_tokenizer(os.path.join(a.assets, "tokenizer.json"))
    messages = json.load(open(os.path.join(a.assets, "train_prompts.json"), encoding="utf-8"))
    model = load_model(os.path.join(a.assets, "base_model")).to(device)
    client = judge.JudgeClient()
    t0 = time.time()
    for rnd in range(plan["rounds"]):
        batch = rng.sample(messages, min(plan["messages"], len(messages)))
        greedy = chat.answer(model, tok, batch, batch_size=128)
        sampled = chat.answer(model, tok, [m for m in batch for _ in range(plan["samples"])],
                              temperature=plan["temperature"], top_k=plan["top_k"], seed=a.seed * 100 + rnd,
                              batch_size=256, max_new_tokens=plan["max_new_tokens"])
        cands = [([greedy[i]] if plan["greedy"] else []) + sampled[i * plan["samples"]:(i + 1) * plan["samples"]]
                 for i in range(len(batch))]
        seeds = [rng.randrange(2**31) for _ in batch]
        pick = knockout if plan["pick"] == "ladder" else bracket
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(8) as pool:
            best = list(pool.map(lambda i: pick(client, batch[i], cands[i], random.Random(seeds[i])), range(len(batch))))
        pairs = [(m, b) for m, b in zip(batch, best) if b]
        changed = sum(b != g for b, g in zip(best, greedy))
        opt = torch.optim.AdamW(model.parameters(), lr=plan["lr"], weight_decay=0.0)
        model.train()
        steps = max(1, plan["epochs"] * len(pairs) // plan["batch"])
        for _ in range(steps):
            loss = chat.sft_loss(model, *chat.sft_batch(tok, rng.sample(pairs, min(plan["batch"], len(pairs))),
                                                        model.cfg.block_size, device))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
        model.eval()
        print(f"round {rnd + 1}/{plan['rounds']}: {len(pairs)} winners ({changed} differ from the greedy answer), "
              f"{steps} steps, loss {loss.item():.3f}, {time.time() - t0:.0f} s", flush=True)
    print("saved", save_model(model, a.out))


if __name__ == "__main__":
    main()
