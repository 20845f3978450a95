"""Stage 2 (smoke profile): finetune the base model on the tokenized split.

    python3 -m minifoundry.train CONFIG.toml [key=value ...]

Overrides use dotted keys and TOML values (``optimizer.lr=2e-3``, ``save_folder=ftout``,
``data_local=finetuning_tokens``). Writes SAVE_FOLDER/latest-rank0.pt, a checkpoint with the
model, optimizer and scheduler states, like Composer's.

Training: AdamW, linear warmup then cosine decay, gradient clipping by global norm. The loss is
the cross-entropy of the response tokens (prompt tokens and padding are not targets), summed over
every token of a global batch and divided by that batch's number of target tokens, so a global
batch gives the same update however it is split into microbatches.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import tomllib
from pathlib import Path

import torch
import torch.nn.functional as F

from .model import CausalLM, ModelConfig
from .safetensors_io import load_file
from .tokenizer import PAD_ID

IGNORE = -100


# -- configuration -------------------------------------------------------------------------
def load_config(path: str, overrides: list[str]) -> dict:
    cfg = tomllib.loads(Path(path).read_text())
    for item in overrides:
        key, sep, raw = item.partition("=")
        if not sep:
            raise SystemExit(f"override {item!r} is not key=value")
        try:
            value = tomllib.loads(f"v = {raw}")["v"]
        except tomllib.TOMLDecodeError:
            value = raw  # a bare string
        node = cfg
        *parents, leaf = key.split(".")
        for p in parents:
            node = node.setdefault(p, {})
        node[leaf] = value
    return cfg


def duration(value: str, per_epoch: int) -> int:
    """Batches in a duration written as '2ep' or '30ba'."""
    if value.endswith("ep"):
        return int(value[:-2]) * per_epoch
    if value.endswith("ba"):
        return int(value[:-2])
    raise ValueError(f"duration {value!r}: use e.g. 2ep or 30ba")


# -- data ----------------------------------------------------------------------------------
def load_split(data_local: str, split: str) -> list[dict]:
    path = Path(data_local) / split / "samples.json"
    if not path.is_file():
        raise SystemExit(f"{path} does not exist: run the data preparation first")
    return json.loads(path.read_text())["samples"]


def collate(samples: list[dict], max_seq_len: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Inputs and next-token targets, padded to max_seq_len: prompt positions and padding are IGNORE."""
    ids = torch.full((len(samples), max_seq_len), PAD_ID, dtype=torch.long)
    targets = torch.full((len(samples), max_seq_len), IGNORE, dtype=torch.long)
    for row, s in enumerate(samples):
        seq = s["prompt"] + s["response"]
        ids[row, : len(seq)] = torch.tensor(seq)
        # position p predicts token p + 1; only response tokens are targets
        targets[row, len(s["prompt"]) - 1 : len(seq) - 1] = torch.tensor(s["response"])
    return ids, targets


def target_tokens(samples: list[dict]) -> int:
    return sum(len(s["response"]) for s in samples)


# -- schedule ------------------------------------------------------------------------------
def lr_factor(step: int, warmup: int, total: int, alpha_f: float) -> float:
    if step < warmup:
        return (step + 1) / warmup
    progress = (step - warmup) / max(1, total - warmup)
    return alpha_f + (1 - alpha_f) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))


# -- model ---------------------------------------------------------------------------------
def load_model(folder: str) -> CausalLM:
    mcfg = ModelConfig.from_json(Path(folder) / "config.json")
    model = CausalLM(mcfg)
    state = load_file(Path(folder) / "model.safetensors")
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise SystemExit(f"{folder}: weights do not fit the config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return model


@torch.no_grad()
def evaluate(model: CausalLM, samples: list[dict], batch_size: int, max_seq_len: int) -> float:
    model.eval()
    total, count = 0.0, 0
    for i in range(0, len(samples), batch_size):
        chunk = samples[i : i + batch_size]
        ids, targets = collate(chunk, max_seq_len)
        logits = model(ids)
        total += F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction="sum").item()
        count += target_tokens(chunk)
    model.train()
    return total / max(1, count)


def save_checkpoint(folder: Path, model: CausalLM, opt: torch.optim.Optimizer, step: int, epoch: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"ep{epoch}-ba{step}-rank0.pt"
    torch.save({"state": {"model": model.state_dict(), "optimizers": {"AdamW": opt.state_dict()},
                          "timestamp": {"batch": step, "epoch": epoch}},
                "rng": {"torch": torch.get_rng_state()}}, path)
    latest = folder / "latest-rank0.pt"
    if latest.is_symlink() or latest.exists():
        latest.unlink()
    latest.symlink_to(path.name)
    return path


# -- training ------------------------------------------------------------------------------
def train(cfg: dict) -> None:
    torch.set_num_threads(int(cfg.get("num_threads", 1)))
    torch.use_deterministic_algorithms(True)
    torch.manual_seed(int(cfg["seed"]))
    max_seq_len = int(cfg["max_seq_len"])
    model = load_model(cfg["model"]["pretrained_model_name_or_path"])
    model.activation_checkpointing = bool(cfg["model"].get("activation_checkpointing", False))
    model.train()

    train_samples = load_split(cfg["data_local"], cfg["train_loader"]["split"])
    eval_samples = load_split(cfg["data_local"], cfg["eval_loader"]["split"]) if cfg.get("eval_interval", "0") != "0" else []
    global_bs = int(cfg["global_train_batch_size"])
    micro_bs = int(cfg["device_train_microbatch_size"])
    per_epoch = len(train_samples) // global_bs if cfg["train_loader"].get("drop_last", True) else math.ceil(len(train_samples) / global_bs)
    total = duration(cfg["max_duration"], per_epoch)
    epochs = math.ceil(total / per_epoch)

    o = cfg["optimizer"]
    opt = torch.optim.AdamW(model.parameters(), lr=float(o["lr"]), betas=tuple(o["betas"]), eps=float(o["eps"]),
                            weight_decay=float(o["weight_decay"]))
    s = cfg["scheduler"]
    warmup = duration(s["t_warmup"], per_epoch)
    clip = float(cfg["gradient_clipping"]["clipping_threshold"])
    log_every = duration(cfg["callbacks"].get("console_log_interval", "10ba"), per_epoch)
    eval_every = duration(cfg["eval_interval"], per_epoch) if eval_samples else 0
    save_every = duration(cfg.get("save_interval", "1ep"), per_epoch)
    save_folder = Path(cfg["save_folder"])
    loader_gen = torch.Generator().manual_seed(int(cfg["seed"]))  # the data order, and nothing else

    print(f"training: {len(train_samples)} samples, {per_epoch} batches of {global_bs} per epoch, "
          f"{total} batches, microbatches of {micro_bs}, {torch.get_num_threads()} thread(s)", flush=True)
    t0 = time.time()
    step = 0
    for epoch in range(epochs):
        order = torch.randperm(len(train_samples), generator=loader_gen).tolist() if cfg["train_loader"].get("shuffle", True) \
            else list(range(len(train_samples)))
        for start in range(0, per_epoch * global_bs, global_bs):
            if step >= total:
                break
            batch = [train_samples[i] for i in order[start : start + global_bs]]
            n_targets = target_tokens(batch)
            batch_loss = 0.0
            for m in range(0, len(batch), micro_bs):
                ids, targets = collate(batch[m : m + micro_bs], max_seq_len)
                logits = model(ids)
                loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction="sum") / n_targets
                loss.backward()
                batch_loss += loss.item()
            torch.nn.utils.clip_grad_norm_(model.parameters(), clip)
            for group in opt.param_groups:
                group["lr"] = float(o["lr"]) * lr_factor(step, warmup, total, float(s["alpha_f"]))
            opt.step()
            opt.zero_grad(set_to_none=True)
            step += 1
            if step % log_every == 0 or step == total:
                print(f"[batch={step}/{total}] train/loss: {batch_loss:.4f} lr: {opt.param_groups[0]['lr']:.2e} "
                      f"elapsed: {time.time() - t0:.1f}s", flush=True)
            if eval_every and step % eval_every == 0:
                print(f"[batch={step}/{total}] eval/loss: {evaluate(model, eval_samples, int(cfg['device_eval_batch_size']), max_seq_len):.4f}",
                      flush=True)
            if step % save_every == 0 or step == total:
                save_checkpoint(save_folder, model, opt, step, epoch + 1 if step % per_epoch == 0 else epoch)
    print(f"training done: {step} batches in {time.time() - t0:.1f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    train(load_config(argv[0], argv[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
