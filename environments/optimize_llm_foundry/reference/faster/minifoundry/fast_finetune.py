"""The faster smoke finetune (reference solution): the same training, in one process.

    python3 -m minifoundry.fast_finetune CONFIG.toml --train_data ROWS.jsonl --base_model DIR --out trained_model [key=value ...]

What differs from the starting pipeline, none of it changing the update rule:
- one process: tokenize, train and write trained_model/ without a checkpoint round trip;
- the tokenizer caches pieces and merges by rank (the same ids);
- each global batch is one microbatch, padded to its longest example instead of max_seq_len;
- no activation checkpointing (recomputation), no evaluation (its loss was only printed);
The loss is still the sum over target tokens divided by the global batch's target count, the data
order still comes from the same seeded generator, and the optimizer, schedule and clipping are
the starting solution's.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from functools import lru_cache
from pathlib import Path

import torch
import torch.nn.functional as F

from .model import CausalLM
from .safetensors_io import save_file
from .tokenizer import BYTE_OFFSET, FIRST_MERGE_ID, Tokenizer, split_pieces
from .train import IGNORE, duration, load_config, load_model, lr_factor, target_tokens


class FastTokenizer(Tokenizer):
    def __init__(self, merges) -> None:
        super().__init__(merges)
        self.ranks = {tuple(m): r for r, m in enumerate(self.merges)}
        self._piece = lru_cache(maxsize=None)(self._encode_piece)

    def _encode_piece(self, piece: str) -> tuple[int, ...]:
        ids = [b + BYTE_OFFSET for b in piece.encode("utf-8")]
        while len(ids) > 1:
            best = min(((self.ranks.get(p, 1 << 30), i) for i, p in enumerate(zip(ids, ids[1:]))), default=(1 << 30, 0))
            rank = best[0]
            if rank == 1 << 30:
                break
            a, b = self.merges[rank]
            out, i = [], 0
            while i < len(ids):
                if i < len(ids) - 1 and ids[i] == a and ids[i + 1] == b:
                    out.append(FIRST_MERGE_ID + rank)
                    i += 2
                else:
                    out.append(ids[i])
                    i += 1
            ids = out
        return tuple(ids)

    def encode(self, text: str) -> list[int]:
        return [t for piece in split_pieces(text) for t in self._piece(piece)]


def collate(samples: list[dict]) -> tuple[torch.Tensor, torch.Tensor]:
    length = max(len(s["prompt"]) + len(s["response"]) for s in samples)
    ids = torch.zeros((len(samples), length), dtype=torch.long)
    targets = torch.full((len(samples), length), IGNORE, dtype=torch.long)
    for row, s in enumerate(samples):
        seq = s["prompt"] + s["response"]
        ids[row, : len(seq)] = torch.tensor(seq)
        targets[row, len(s["prompt"]) - 1 : len(seq) - 1] = torch.tensor(s["response"])
    return ids, targets


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config")
    ap.add_argument("--train_data", required=True)
    ap.add_argument("--base_model", required=True)
    ap.add_argument("--out", required=True)
    a, overrides = ap.parse_known_args(argv)
    cfg = load_config(a.config, overrides)
    t0 = time.time()
    torch.set_num_threads(int(cfg.get("num_threads", 1)))
    torch.manual_seed(int(cfg["seed"]))
    max_seq_len = int(cfg["max_seq_len"])

    tok = FastTokenizer(Tokenizer.from_dir(a.base_model).merges)
    samples = []
    for line in Path(a.train_data).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            prompt, response = tok.encode(row["prompt"]), tok.encode(row["response"]) + [tok.eos_id]
            samples.append({"prompt": prompt, "response": response[: max_seq_len - len(prompt)]})

    model = load_model(a.base_model)
    model.train()
    global_bs = int(cfg["global_train_batch_size"])
    per_epoch = len(samples) // global_bs
    total = duration(cfg["max_duration"], per_epoch)
    o, s = cfg["optimizer"], cfg["scheduler"]
    opt = torch.optim.AdamW(model.parameters(), lr=float(o["lr"]), betas=tuple(o["betas"]), eps=float(o["eps"]),
                            weight_decay=float(o["weight_decay"]))
    warmup = duration(s["t_warmup"], per_epoch)
    clip = float(cfg["gradient_clipping"]["clipping_threshold"])
    gen = torch.Generator().manual_seed(int(cfg["seed"]))
    step = 0
    while step < total:
        order = torch.randperm(len(samples), generator=gen).tolist()
        for start in range(0, per_epoch * global_bs, global_bs):
            if step >= total:
                break
            batch = [samples[i] for i in order[start : start + global_bs]]
            ids, targets = collate(batch)
            logits = model(ids)
            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction="sum") / target_tokens(batch)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for group in opt.param_groups:
                group["lr"] = float(o["lr"]) * lr_factor(step, warmup, total, float(s["alpha_f"]))
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    save_file(model.state_dict(), out / "model.safetensors")
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(Path(a.base_model) / name, out / name)
    print(f"{step} batches, {torch.get_num_threads()} thread(s), {time.time() - t0:.1f} s; wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
