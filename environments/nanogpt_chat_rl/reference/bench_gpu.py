"""Generation and judge round-trip figures for nanogpt_chat_rl (reference/run_gpu.sh runs it).

1. Batched generation at the gpu profile's size: GPT-2 small shape (our model.py) with random
   weights, N prompts of the held-out kind (prompts.gpu_prompts, byte-tokenized: longer than
   GPT-2's BPE, so an upper bound), 60 new tokens each with no early stop (the worst case), for
   several batch sizes, in float32 and under bfloat16 autocast. Prints seconds, tokens/s and peak
   GPU memory.
2. The judge path over loopback: JudgeClient -> judge proxy -> stand-in judge (both started by
   run_gpu.sh), K comparisons with W parallel workers. Prints comparisons/s.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "solution"))
sys.path.insert(0, os.path.join(HERE, ".."))
import chat  # noqa: E402
import judge  # noqa: E402
import prompts as P  # noqa: E402
from model import GPT, GPTConfig, generate  # noqa: E402
from tokenizer import ByteTokenizer  # noqa: E402


def bench_generation(n: int, batch_sizes: list[int]) -> list[dict]:
    device = "cuda"
    torch.manual_seed(0)
    model = GPT(GPTConfig()).to(device).eval()
    tok = ByteTokenizer(50256, 50257)
    _train, held = P.gpu_prompts(10_000, 0)
    msgs = (held * (n // len(held) + 1))[:n]
    ids = [tok.encode(chat.format_prompt(m)) for m in msgs]
    out = []
    for dtype in ("float32", "bfloat16"):
        for bs in batch_sizes:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            t = time.perf_counter()
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=dtype == "bfloat16"):
                res = generate(model, ids, chat.MAX_NEW_TOKENS, eot=-1, batch_size=bs)  # eot -1: never stops early
            torch.cuda.synchronize()
            s = time.perf_counter() - t
            new = sum(len(r) for r in res)
            row = {"dtype": dtype, "prompts": n, "batch_size": bs, "seconds": round(s, 3), "new_tokens": new,
                   "tokens_per_s": round(new / s), "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 3),
                   "mean_prompt_tokens": round(sum(map(len, ids)) / n, 1)}
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


def bench_judge(url: str, k: int, workers: int) -> dict:
    client = judge.JudgeClient(url, attempts=3)
    _train, held = P.gpu_prompts(10_000, 0)
    items = [(held[i % len(held)], f"answer one about {held[i % len(held)]}", f"another reply number {i}", i % 2 == 0)
             for i in range(k)]
    t = time.perf_counter()
    res = judge.prefer_many(client, items, workers=workers)
    s = time.perf_counter() - t
    row = {"judge_comparisons": k, "workers": workers, "seconds": round(s, 3), "per_s": round(k / s, 1),
           "wins": sum(r == 1.0 for r in res)}
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=256)
    ap.add_argument("--batch-sizes", default="32,64,128,256")
    ap.add_argument("--judge-url", default=None)
    ap.add_argument("--judge-calls", type=int, default=2000)
    a = ap.parse_args()
    print("torch", torch.__version__, "cuda", torch.cuda.is_available(),
          torch.cuda.get_device_name() if torch.cuda.is_available() else "", flush=True)
    if torch.cuda.is_available():
        bench_generation(a.prompts, [int(b) for b in a.batch_sizes.split(",")])
    if a.judge_url:
        for w in (1, 8, 32):
            bench_judge(a.judge_url, a.judge_calls if w > 1 else a.judge_calls // 4, w)


if __name__ == "__main__":
    main()
