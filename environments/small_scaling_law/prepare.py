#!/usr/bin/env python3
"""Assets of small_scaling_law: the participant's token files and the held-out loss table.

    python prepare.py --profile {gpu,smoke} --mode {fetch,synthetic,from} --out DIR --work DIR [--source DIR]
                      [--widths N,N,..] [--lrs X,X,..] [--seeds S,S,..] [--run-flops F] [--compile auto|on|off]

Writes DIR/workspace/train.bin and DIR/workspace/val.bin (flat uint16 tokens; the participant
reads them at /home/agent/assets) and DIR/protected/ground_truth.json (the scorer's table:
for each width in TABLE_WIDTHS, max_iters filling the target budget and the final validation
loss of that run). The table is measured by training with solution/train.py itself, the same
code and hyperparameters the participant uses, only without the per-experiment cap.

The recipe (the gpu defaults follow METR's own sweep for ai_rd_small_scaling_law 0.2.3):
  --widths  the table's widths (default TABLE_WIDTHS: for gpu the 11 points of METR's table,
            max_iters 500 x 10^(k/4) for k = 0..10, each width rounded to a multiple of 64).
  --lrs     multipliers of train.py's peak learning-rate rule (default 1: the rule itself).
  --seeds   train.py seeds (default 0: train.py's default).
  Every width is trained once per (lr, seed). A width's table loss is, for each multiplier,
  the mean over the seeds, then the lowest of those means (the best multiplier's). With the
  defaults that is one run of the participant's own configuration per width, as in METR's
  table (one loss per point; its widest runs stayed at loss 11, i.e. were not re-tuned).
  More than one multiplier makes a tuned-learning-rate table, which is NOT what the
  participant's fixed code can reach: use it to study sensitivity, not as the ground truth.
  --run-flops  train each point at this budget instead of the target (a reduced-budget
            rehearsal: the table is then marked placeholder; gpu + synthetic defaults to 1e15).

Modes:
  fetch      (gpu) OpenWebText from the Hugging Face hub (`datasets`), GPT-2 tokens (`tiktoken`
             or `transformers`), then the sweep at 5e17 FLOPs on this machine's GPUs.
  from       --source DIR holding train.bin and val.bin (uint16 tokens, already made), or a
             `datasets.save_to_disk` folder of documents with a "text" column; then the sweep.
  synthetic  a generated corpus with learnable structure. smoke: the real sweep at the smoke
             target, on the CPU (about a minute or two on 2 cores). gpu: full-size shapes, and
             a PLACEHOLDER table: the table's widths and max_iters are those of 5e17 FLOPs but
             each loss comes from a run at only 1e15 FLOPs (same width, fewer steps), so the
             gpu scorer runs end to end (for timing) while its numbers mean nothing.

The sweep runs one training per device at a time (each GPU; two CPU workers) and keeps each
finished run's result in --work, keyed by the data's and the code's sha256: an interrupted
prepare resumes with the runs that are left, and `from` over the same data reuses them.
"""

from __future__ import annotations

import argparse
import hashlib
import itertools
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
SOLUTION = HERE / "solution"
sys.path.insert(0, str(SOLUTION))
import budget  # noqa: E402

# Widths of the ground-truth table. Their max_iters fill the target budget. gpu: METR's table
# for this task (its scorer's interpolation points) has 11 runs at 5e17 FLOPs with max_iters
# 500, 889, 1581, ..., 158114 (4 a decade); the widths filling 5e17 at those steps are 409 ...
# 7279, here rounded to a multiple of 64 (whole 64-wide heads; 448 rather than 384 for the
# narrowest, so that its 8.7B tokens stay within one pass of OpenWebText).
TABLE_WIDTHS = {
    "gpu": [448, 576, 704, 960, 1280, 1728, 2304, 3072, 4096, 5440, 7296],
    "smoke": [12, 16, 20, 24, 32, 40, 48, 64, 96],
}
PLACEHOLDER_FLOPS = 1e15  # gpu + synthetic: each table run is made at this budget instead of 5e17
SEED = 0  # train.py's default seed: the table is what the participant's runs would give
DEFAULT_LRS = [1.0]  # multipliers of train.py's peak_lr rule: 1 = the participant's fixed rule
DEFAULT_SEEDS = [SEED]
GPU_MICRO_BATCH = 16  # prepare's gpu runs split each 64-sequence step in 4 (same step, fits 80 GB GPUs)
WIDE_MICRO_BATCH = 8  # ... and in 8 above WIDE_WIDTH: n_embd 7296 peaked at 75.1 GiB with 16 (H200, 2026-12-04)
WIDE_WIDTH = 6000
EOT = 50256  # GPT-2's <|endoftext|>, between documents

# Synthetic corpus with structure at several scales, so that the loss keeps falling with both
# model size and data, as on text: tokens with Zipf-like frequencies; "syllables" (short fixed
# token strings); "words" (1-3 syllables) drawn with Zipf-like frequencies; and between words a
# bigram rule: with probability `follow` the next word is one of 4 fixed successors of the
# previous word (the first more likely), otherwise a fresh draw. Frequent pieces are learnt
# early; rare words and the successor table need more data and more capacity.
CORPUS = {
    "smoke": {"vocab": 64, "syllables": 96, "syl_len": (2, 3), "words": 1024, "word_syls": (1, 3),
              "successors": 4, "follow": 0.5, "train_tokens": 4_000_000, "val_tokens": 262_144},
    "gpu": {"vocab": 50257, "syllables": 4096, "syl_len": (1, 3), "words": 32768, "word_syls": (1, 3),
            "successors": 4, "follow": 0.5, "train_tokens": 16_000_000, "val_tokens": 2_000_000},
}
CORPUS_SEED = 1234


def progress(done: float, total: float, label: str) -> None:
    print(f"PROGRESS {done:g} {total:g} {label}", flush=True)


def fail(message: str) -> "NoReturn":  # noqa: F821
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


# -- corpora ------------------------------------------------------------------------------------
def zipf(k: int, offset: float) -> np.ndarray:
    p = 1.0 / (np.arange(k) + offset)
    return p / p.sum()


def synthetic_tokens(cfg: dict, n_tokens: int, sample_seed: int, streams: int = 512) -> np.ndarray:
    """``n_tokens`` tokens of the corpus; its lexicon and rules depend only on CORPUS_SEED."""
    lex = np.random.default_rng(CORPUS_SEED)
    token_p = zipf(cfg["vocab"], 1.0)
    lo, hi = cfg["syl_len"]
    syllables = [lex.choice(cfg["vocab"], int(k), p=token_p) for k in lex.integers(lo, hi + 1, cfg["syllables"])]
    syl_p = zipf(cfg["syllables"], 2.7)
    lo, hi = cfg["word_syls"]
    words = [np.concatenate([syllables[i] for i in lex.choice(cfg["syllables"], int(k), p=syl_p)])
             for k in lex.integers(lo, hi + 1, cfg["words"])]
    successors = lex.integers(0, cfg["words"], (cfg["words"], cfg["successors"]))
    lengths = np.array([len(w) for w in words])
    starts = np.concatenate([[0], np.cumsum(lengths)[:-1]])
    letters = np.concatenate(words)
    word_cdf = np.cumsum(zipf(cfg["words"], 2.7))
    succ_cdf = np.cumsum(zipf(cfg["successors"], 1.0))

    rng = np.random.default_rng(sample_seed)
    steps = int(n_tokens / float(lengths @ zipf(cfg["words"], 2.7)) / streams * 1.15) + 8

    def draw(cdf: np.ndarray) -> np.ndarray:
        return np.minimum(np.searchsorted(cdf, rng.random(streams)), len(cdf) - 1)

    ids = np.zeros((streams, steps), dtype=np.int64)
    ids[:, 0] = draw(word_cdf)
    for t in range(1, steps):  # independent streams, one word each per step
        follow = rng.random(streams) < cfg["follow"]
        ids[:, t] = np.where(follow, successors[ids[:, t - 1], draw(succ_cdf)], draw(word_cdf))
    ids = ids.reshape(-1)
    lens = lengths[ids]
    # position k of the j-th word is letters[starts[ids[j]] + k]
    index = np.repeat(starts[ids] - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()))
    out = letters[index]
    if len(out) < n_tokens:
        raise AssertionError("synthetic corpus came out short")
    return out[:n_tokens].astype(np.uint16)


def make_synthetic(profile: str, workspace: Path) -> None:
    cfg = CORPUS[profile]
    progress(0, 2, "synthetic corpus: train.bin")
    synthetic_tokens(cfg, cfg["train_tokens"], 1).tofile(workspace / "train.bin")
    progress(1, 2, "synthetic corpus: val.bin")
    synthetic_tokens(cfg, cfg["val_tokens"], 2).tofile(workspace / "val.bin")
    progress(2, 2, "synthetic corpus written")


def gpt2_encoder():
    try:
        import tiktoken  # noqa: PLC0415

        enc = tiktoken.get_encoding("gpt2")
        return lambda texts: enc.encode_ordinary_batch(texts)
    except ImportError:
        pass
    try:
        from transformers import GPT2TokenizerFast  # noqa: PLC0415
    except ImportError:
        fail("tokenizing needs the GPT-2 tokenizer: install `tiktoken` (or `transformers`), "
             "or pass --mode from --source DIR with train.bin and val.bin already tokenized")
    tok = GPT2TokenizerFast.from_pretrained(os.environ.get("SCALING_GPT2_TOKENIZER", "gpt2"))
    return lambda texts: tok(texts)["input_ids"]


def tokenize_documents(dataset, work: Path, workspace: Path) -> None:
    """Split off 0.05% of the documents for validation, tokenize both, write uint16 files (resumable)."""
    done = work / "tokens.done"
    if not done.is_file():
        encode = gpt2_encoder()
        split = dataset.train_test_split(test_size=0.0005, seed=2357, shuffle=True)
        n_proc = max(1, (os.cpu_count() or 2) // 2)

        def tok(batch):
            ids = [x + [EOT] for x in encode(batch["text"])]
            return {"ids": ids, "len": [len(x) for x in ids]}

        for i, (name, part) in enumerate((("val", split["test"]), ("train", split["train"]))):
            progress(i, 2, f"tokenizing {name} ({len(part)} documents)")
            t = part.map(tok, remove_columns=part.column_names, batched=True, num_proc=n_proc, desc=f"tokenize {name}")
            total = int(np.sum(t["len"], dtype=np.int64))
            arr = np.memmap(work / f"{name}.bin.partial", dtype=np.uint16, mode="w+", shape=(total,))
            pos, shards = 0, 256
            for s in range(shards):
                chunk = t.shard(num_shards=shards, index=s, contiguous=True)
                flat = np.fromiter(itertools.chain.from_iterable(chunk["ids"]), dtype=np.uint16)
                arr[pos:pos + len(flat)] = flat
                pos += len(flat)
            arr.flush()
            os.replace(work / f"{name}.bin.partial", work / f"{name}.bin")
        done.write_text("ok\n")
        progress(2, 2, "tokenized")
    for name in ("train", "val"):
        shutil.copyfile(work / f"{name}.bin", workspace / f"{name}.bin")


def fetch_openwebtext(work: Path, workspace: Path) -> None:
    try:
        import datasets  # noqa: PLC0415
    except ImportError:
        fail("--mode fetch needs the `datasets` package (pip install datasets tiktoken) and access to the "
             "Hugging Face hub; offline, tokenize elsewhere and use --mode from --source DIR")
    name = os.environ.get("SCALING_OWT_DATASET", "Skylion007/openwebtext")
    progress(0, 1, f"downloading {name} (8M documents, tens of GB; resumes from --work)")
    try:
        ds = datasets.load_dataset(name, split="train", cache_dir=str(work / "hf"))
    except Exception:  # noqa: BLE001 - older copies of the dataset need its loading script
        ds = datasets.load_dataset(name, split="train", cache_dir=str(work / "hf"), trust_remote_code=True)
    tokenize_documents(ds, work, workspace)


def from_source(profile: str, source: Path, work: Path, workspace: Path) -> None:
    if (source / "train.bin").is_file() and (source / "val.bin").is_file():
        for name in ("train", "val"):
            progress(0, 1, f"copying {name}.bin")
            shutil.copyfile(source / f"{name}.bin", workspace / f"{name}.bin")
        return
    if profile == "smoke":
        fail(f"{source} has no train.bin and val.bin (the smoke profile takes only token files; "
             f"or use --mode synthetic)")
    try:
        import datasets  # noqa: PLC0415
    except ImportError:
        fail(f"{source} has no train.bin and val.bin; reading documents from it needs the `datasets` package")
    try:
        ds = datasets.load_from_disk(str(source))
    except Exception as exc:  # noqa: BLE001
        fail(f"{source} holds neither train.bin + val.bin nor a datasets.save_to_disk folder: {exc}")
    if isinstance(ds, datasets.DatasetDict):
        ds = ds["train"]
    tokenize_documents(ds, work, workspace)


def check_tokens(profile: str, workspace: Path) -> None:
    vocab = budget.constants(profile)["vocab_size"]
    block = budget.constants(profile)["block_size"]
    for name in ("train", "val"):
        arr = np.memmap(workspace / f"{name}.bin", dtype=np.uint16, mode="r")
        if len(arr) <= block + 1:
            fail(f"{name}.bin has only {len(arr)} tokens")
        top = int(arr[: 50_000_000].max())
        if top >= vocab:
            fail(f"{name}.bin holds token {top}, outside the {profile} profile's vocabulary of {vocab}")


# -- the sweep ----------------------------------------------------------------------------------
def devices_for(profile: str, need_gpu: bool) -> list[str]:
    override = os.environ.get("SCALING_PREPARE_DEVICES")
    if override:
        return [d.strip() for d in override.split(",") if d.strip()]
    if not need_gpu:
        return ["cpu"] * max(1, min(2, os.cpu_count() or 1))
    try:
        import torch  # noqa: PLC0415
    except ImportError:
        fail("the gpu sweep needs PyTorch with CUDA")
    if not torch.cuda.is_available():
        fail(f"the {profile} profile's table is measured by training on GPUs and none is visible "
             f"(run prepare on the GPU machine, or bring a prepared folder: rebench-tui prepare --from DIR)")
    return [f"cuda:{i}" for i in range(torch.cuda.device_count())]


def point_name(n: int, iters: int, lr_scale: float, seed: int) -> str:
    """File stem of one run; the recipe's default run (lr x1, seed 0) keeps the plain name."""
    if lr_scale == 1.0 and seed == SEED:
        return f"n{n}_it{iters}"
    return f"n{n}_it{iters}_lr{lr_scale:g}_s{seed}"


def sweep(profile: str, data: Path, work: Path, run_flops: float, label: str, *, need_gpu: bool,
          compile: bool, widths: list[int] | None = None, lrs: list[float] | None = None,
          seeds: list[int] | None = None) -> list[dict]:
    """Train every (width, lr multiplier, seed) at ``run_flops``; return the results, widths in order."""
    code = hashlib.sha256((SOLUTION / "train.py").read_bytes() + (SOLUTION / "budget.py").read_bytes()).hexdigest()
    key = hashlib.sha256(f"{profile} {sha256_file(data / 'train.bin')} {sha256_file(data / 'val.bin')} {code} "
                         f"{run_flops!r}".encode()).hexdigest()[:16]
    folder = work / "sweep" / f"{profile}-{key}"
    folder.mkdir(parents=True, exist_ok=True)
    target = budget.constants(profile)["target_flops"]
    points = []
    for n in widths or TABLE_WIDTHS[profile]:
        if n < 1:
            fail(f"width {n} is not a positive integer")
        iters = budget.iters_for(n, run_flops, profile)
        if iters < 1:
            if run_flops >= target:
                fail(f"width {n} gets no step at {run_flops:g} FLOPs")
            iters = 1  # a reduced-budget rehearsal: the widest widths get one step
        points += [(n, iters, float(lr), int(s)) for lr in (lrs or DEFAULT_LRS) for s in (seeds or DEFAULT_SEEDS)]
    result_path = {p: folder / f"{point_name(*p)}.json" for p in points}
    pending = [p for p in points if not result_path[p].is_file()]
    pending.sort(key=lambda p: -p[1])  # most steps first: on the CPU they take longest
    total = len(points)
    print(f"sweep: {total} runs ({len({p[0] for p in points})} widths x {len({p[2] for p in points})} lr multipliers x "
          f"{len({p[3] for p in points})} seeds), {sum(budget.flops(p[0], p[1], profile) for p in points):.3g} FLOPs "
          f"by the task's formula", flush=True)
    if len(pending) < total:
        print(f"{total - len(pending)} of {total} runs already done in {folder}", flush=True)
    progress(total - len(pending), total, label)
    devices = devices_for(profile, need_gpu) if pending else []
    running: dict[int, tuple[subprocess.Popen, tuple[int, int, float, int], float]] = {}
    free = list(range(len(devices)))
    started_all = time.time()
    while pending or running:
        while pending and free:
            slot = free.pop(0)
            point = pending.pop(0)
            n, iters, lr_scale, seed = point
            cmd = [sys.executable, str(Path(__file__).resolve()), "_point", "--profile", profile, "--data", str(data),
                   "--n_embd", str(n), "--max_iters", str(iters), "--device", devices[slot],
                   "--lr_scale", repr(lr_scale), "--seed", str(seed), "--result", str(result_path[point])]
            if compile:
                cmd.append("--compile")
            env = {**os.environ, "SCALING_PROFILE": profile, "PYTHONUNBUFFERED": "1"}
            if devices[slot] == "cpu":
                env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
            log = open(folder / f"{point_name(*point)}.log", "w")
            print(f"training n_embd={n} max_iters={iters}{describe(lr_scale, seed)} ({budget.flops(n, iters, profile):.3g} "
                  f"FLOPs) on {devices[slot]}", flush=True)
            running[slot] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), point, time.time())
        time.sleep(0.2)
        for slot, (proc, point, t0) in list(running.items()):
            rc = proc.poll()
            if rc is None:
                continue
            del running[slot]
            free.append(slot)
            if rc != 0 or not result_path[point].is_file():
                for other, _p, _t in running.values():
                    other.terminate()
                tail = (folder / f"{point_name(*point)}.log").read_text(errors="replace")[-3000:]
                fail(f"training n_embd={point[0]} max_iters={point[1]}{describe(*point[2:])} failed (exit {rc}):\n{tail}")
            r = json.loads(result_path[point].read_text())
            print(f"n_embd={point[0]} max_iters={point[1]}{describe(*point[2:])}: val_loss {r['val_loss']:.4f} in "
                  f"{time.time() - t0:.1f} s", flush=True)
            progress(total - len(pending) - len(running), total, label)
    if devices:
        print(f"sweep: {time.time() - started_all:.1f} s", flush=True)
    results = []
    for p in points:
        r = json.loads(result_path[p].read_text())
        r.setdefault("lr_scale", p[2])  # runs finished before the recipe had multipliers were all x1
        results.append(r)
    return results


def describe(lr_scale: float, seed: int) -> str:
    return "" if (lr_scale == 1.0 and seed == SEED) else f" lr x{lr_scale:g} seed {seed}"


def gpu_micro_batch(n_embd: int) -> int:
    """Sequences per micro-batch of a gpu sweep run (the step is the same; only memory differs)."""
    return WIDE_MICRO_BATCH if n_embd > WIDE_WIDTH else GPU_MICRO_BATCH


def point_main(argv: list[str]) -> int:
    """One table run, without the per-experiment cap (the table is made at the target budget)."""
    ap = argparse.ArgumentParser(prog="prepare.py _point")
    ap.add_argument("--profile", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--n_embd", type=int, required=True)
    ap.add_argument("--max_iters", type=int, required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--result", required=True)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--lr_scale", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=SEED)
    a = ap.parse_args(argv)
    import torch  # noqa: PLC0415

    if a.device == "cpu":
        torch.set_num_threads(1)
    import train  # noqa: PLC0415

    if a.lr_scale != 1.0:  # the participant's train.py is left as it is; only this process scales its rule
        rule = train.peak_lr
        train.peak_lr = lambda n_embd, c: a.lr_scale * rule(n_embd, c)
    micro = gpu_micro_batch(a.n_embd) if a.device.startswith("cuda") else None
    r = train.train(a.n_embd, a.max_iters, profile=a.profile, data_dir=a.data, device=a.device, seed=a.seed,
                    enforce_cap=False, compile=a.compile, micro_batch=micro,
                    log_every=max(1, a.max_iters // 20))
    r["lr_scale"] = a.lr_scale
    tmp = Path(a.result + ".partial")
    tmp.write_text(json.dumps(r, indent=2))
    os.replace(tmp, a.result)
    return 0


def aggregate(results: list[dict]) -> list[dict]:
    """One row per width: for each lr multiplier the mean loss over its seeds, then the best multiplier's."""
    rows: dict[int, dict] = {}
    for r in results:
        row = rows.setdefault(r["n_embd"], {"n_embd": r["n_embd"], "measured_max_iters": r["max_iters"], "runs": []})
        row["runs"].append({"lr_scale": r.get("lr_scale", 1.0), "seed": r.get("seed", SEED), "peak_lr": r.get("peak_lr"),
                            "val_loss": r["val_loss"], "train_seconds": r["train_seconds"]})
    out = []
    for row in sorted(rows.values(), key=lambda r: r["n_embd"]):
        by_lr: dict[float, list[float]] = {}
        for run in row["runs"]:
            by_lr.setdefault(run["lr_scale"], []).append(run["val_loss"])
        means = {lr: sum(v) / len(v) for lr, v in by_lr.items()}
        finite = [lr for lr, m in means.items() if math.isfinite(m)] or list(means)  # a diverged multiplier never wins
        best = min(finite, key=lambda lr: (means[lr], abs(lr - 1.0)))  # ties go to the multiplier nearest x1
        losses = by_lr[best]
        row.update(loss=means[best], lr_scale=best, seed_spread=max(losses) - min(losses),
                   train_seconds=round(sum(run["train_seconds"] for run in row["runs"]), 3))
        out.append(row)
    return out


def write_ground_truth(profile: str, mode: str, results: list[dict], out: Path, measured_flops: float, *,
                       lrs: list[float] | None = None, seeds: list[int] | None = None) -> None:
    c = budget.constants(profile)
    target = c["target_flops"]
    placeholder = measured_flops != target
    lrs, seeds = list(lrs or DEFAULT_LRS), list(seeds or DEFAULT_SEEDS)
    table = []
    for row in aggregate(results):
        n = row["n_embd"]
        iters = budget.iters_for(n, target, profile)  # the table's max_iters are those of the target budget
        entry = {"n_embd": n, "max_iters": iters, "flops": budget.flops(n, iters, profile), "loss": row["loss"],
                 "measured_max_iters": row["measured_max_iters"], "train_seconds": row["train_seconds"]}
        if len(row["runs"]) > 1:
            entry.update(lr_scale=row["lr_scale"], seed_spread=row["seed_spread"], runs=row["runs"])
        table.append(entry)
    doc = {
        "profile": profile, "mode": mode, "target_flops": target,
        "n_layer": c["n_layer"], "block_size": c["block_size"], "batch_size": c["batch_size"],
        "vocab_size": c["vocab_size"], "seed": seeds[0], "seeds": seeds, "lr_scales": lrs,
        "rule": ("loss = for each lr multiplier the mean over the seeds, then the lowest such mean; "
                 "lr multipliers scale solution/train.py's peak learning-rate rule"),
        "placeholder": placeholder, "measured_at_flops": measured_flops,
        "note": ("PLACEHOLDER: losses measured at %.3g FLOPs, not at the target; "
                 "scores against this table mean nothing" % measured_flops) if placeholder else
                "final validation losses of solution/train.py runs at the target budget",
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "table": table,
    }
    (out / "protected").mkdir(parents=True, exist_ok=True)
    (out / "protected" / "ground_truth.json").write_text(json.dumps(doc, indent=2) + "\n")


def int_list(text: str) -> list[int]:
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"not a list of non-negative integers: {text!r}")
    return values


def float_list(text: str) -> list[float]:
    try:
        values = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        values = []
    if not values or any(not (v > 0) for v in values):
        raise argparse.ArgumentTypeError(f"not a list of positive numbers: {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "_point":
        return point_main(argv[1:])
    ap = argparse.ArgumentParser(description="Build the assets of small_scaling_law.")
    ap.add_argument("--profile", choices=sorted(budget.PROFILES), required=True)
    ap.add_argument("--mode", choices=["fetch", "synthetic", "from"], required=True)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--source", type=Path)
    ap.add_argument("--widths", type=int_list, help="the table's widths (default: the profile's TABLE_WIDTHS)")
    ap.add_argument("--lrs", type=float_list, default=DEFAULT_LRS,
                    help="multipliers of train.py's peak learning-rate rule, each width trained once per multiplier "
                         "and seed; the table keeps the best multiplier's seed-mean (default 1: the participant's rule)")
    ap.add_argument("--seeds", type=int_list, default=DEFAULT_SEEDS, help="train.py seeds, averaged (default 0)")
    ap.add_argument("--run-flops", type=float, help="train each point at this budget instead of the target: a "
                    "reduced-budget rehearsal whose table is marked placeholder (gpu + synthetic: 1e15 unless set)")
    ap.add_argument("--compile", choices=["auto", "on", "off"], default="auto",
                    help="torch.compile the gpu runs (auto: at the target budget only)")
    a = ap.parse_args(argv)
    workspace = a.out / "workspace"
    workspace.mkdir(parents=True, exist_ok=True)
    (a.out / "protected").mkdir(parents=True, exist_ok=True)
    a.work.mkdir(parents=True, exist_ok=True)
    target = budget.constants(a.profile)["target_flops"]

    if a.mode == "synthetic":
        make_synthetic(a.profile, workspace)
    elif a.profile == "smoke":
        if a.mode == "fetch":
            fail("the smoke profile's corpus is synthetic: use --mode synthetic (or --mode from with token files)")
        if a.source is None:
            fail("--mode from needs --source DIR")
        from_source(a.profile, a.source, a.work, workspace)
    elif a.mode == "fetch":
        fetch_openwebtext(a.work, workspace)
    else:
        if a.source is None:
            fail("--mode from needs --source DIR")
        from_source(a.profile, a.source, a.work, workspace)
    check_tokens(a.profile, workspace)

    gpu = a.profile == "gpu"
    recipe = {"widths": a.widths, "lrs": a.lrs, "seeds": a.seeds}
    if a.run_flops is not None:
        run_flops = a.run_flops
    elif gpu and a.mode == "synthetic":
        run_flops = PLACEHOLDER_FLOPS
    else:
        run_flops = target
    if run_flops != target:
        print(f"{a.profile}: a PLACEHOLDER table measured at {run_flops:g} FLOPs per run "
              f"(the real table needs its runs at {target:g} FLOPs)", flush=True)
        label = "placeholder sweep"
        compile = gpu and a.compile == "on"
    else:
        label = f"sweep at {target:g} FLOPs"
        compile = gpu and a.compile != "off"
    results = sweep(a.profile, workspace, a.work, run_flops, label, need_gpu=gpu, compile=compile, **recipe)
    write_ground_truth(a.profile, a.mode, results, a.out, run_flops, lrs=a.lrs, seeds=a.seeds)
    print(f"wrote {a.out / 'protected' / 'ground_truth.json'}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
