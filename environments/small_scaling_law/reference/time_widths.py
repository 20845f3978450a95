#!/usr/bin/env python3
"""Time a few training steps at each width of the ground-truth recipe; project its GPU-hours.

    python time_widths.py --data DIR --out timing.json [--profile gpu] [--widths N,..] [--steps 12]
                          [--compile] [--deadline SECONDS]
    python time_widths.py --summary timing.json [timing_compiled.json ...] [--lrs 3] [--seeds 2]

The first form trains each width for --steps steps exactly as prepare.py's sweep does (its
micro-batches on a GPU, no per-experiment cap), in one process and without the final
evaluation, and records the steady-state rate (from train.py: steps after the first few).
The second form turns such files into the hours of the recipe: one run per width at the
target budget takes target / (steady FLOP/s by the task's formula). Where a width was also
timed with --compile, that rate is used; another width gets the compiled/plain ratio of the
nearest width timed both ways.
The cost of widths x lr multipliers x seeds is the per-width sum times lrs x seeds.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE.parent / "solution"))
import budget  # noqa: E402
import prepare  # noqa: E402


def measure(a: argparse.Namespace) -> int:
    import torch  # noqa: PLC0415

    import train  # noqa: PLC0415

    train.evaluate = lambda *args, **kwargs: float("nan")  # timing only: no evaluation pass
    cuda = torch.cuda.is_available()
    device = "cuda" if cuda else "cpu"
    widths = a.widths or prepare.TABLE_WIDTHS[a.profile]
    target = budget.constants(a.profile)["target_flops"]
    rows, started = [], time.time()
    doc = {"profile": a.profile, "steps": a.steps, "compile": a.compile, "target_flops": target, "rows": rows,
           "torch": torch.__version__, "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    if cuda:
        doc["gpu"] = torch.cuda.get_device_name(0)
    for n in widths:
        Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")  # after every width: a killed run keeps what it timed
        if a.deadline and time.time() - started > a.deadline:
            print(f"n_embd={n}: skipped (past the {a.deadline:g} s deadline)", flush=True)
            rows.append({"n_embd": n, "skipped": "deadline"})
            continue
        t0 = time.time()
        try:
            r = train.train(n, a.steps, profile=a.profile, data_dir=a.data, device=device, enforce_cap=False,
                            compile=a.compile, micro_batch=prepare.gpu_micro_batch(n) if cuda else None,
                            log=lambda *_: None)
        except (RuntimeError, MemoryError) as exc:  # out of memory: record it and go on
            print(f"n_embd={n}: failed: {str(exc).splitlines()[0][:200]}", flush=True)
            rows.append({"n_embd": n, "error": str(exc).splitlines()[0][:200]})
            if cuda:
                torch.cuda.empty_cache()
            continue
        row = {k: r[k] for k in ("n_embd", "max_iters", "n_head", "params", "train_seconds", "steady_tokens_per_s",
                                 "steady_flops_per_s", "micro_batch", "device")}
        row.update(compile=a.compile, wall_seconds=round(time.time() - t0, 2),
                   true_flops_ratio=true_flops_ratio(n, a.profile),
                   hours_per_target_run=target / r["steady_flops_per_s"] / 3600)
        if cuda:
            row["max_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 1)
            torch.cuda.reset_peak_memory_stats()
            torch.cuda.empty_cache()
        rows.append(row)
        print(f"n_embd={n}{' compiled' if a.compile else ''}: {a.steps} steps in {row['wall_seconds']} s, steady "
              f"{row['steady_tokens_per_s']:.4g} tokens/s, {row['steady_flops_per_s']:.4g} FLOP/s by the formula "
              f"(x{row['true_flops_ratio']:.2f} counting the output layer and attention): "
              f"{row['hours_per_target_run']:.2f} GPU-hours for one {target:g}-FLOP run", flush=True)
    Path(a.out).write_text(json.dumps(doc, indent=2) + "\n")
    return 0


def true_flops_ratio(n: int, profile: str) -> float:
    """(formula + output layer + attention scores) / formula FLOPs per token."""
    c = budget.constants(profile)
    formula = 72 * c["n_layer"] * n * n
    return (formula + 6 * n * c["vocab_size"] + 12 * c["n_layer"] * c["block_size"] * n) / formula


def summary(a: argparse.Namespace) -> int:
    docs = [json.loads(Path(f).read_text()) for f in a.summary]
    plain = {r["n_embd"]: r for d in docs if not d["compile"] for r in d["rows"] if "steady_flops_per_s" in r}
    comp = {r["n_embd"]: r for d in docs if d["compile"] for r in d["rows"] if "steady_flops_per_s" in r}
    ratios = [comp[n]["steady_flops_per_s"] / plain[n]["steady_flops_per_s"] for n in comp if n in plain]
    speedup = statistics.median(ratios) if ratios else None
    target = docs[0]["target_flops"]
    widths = sorted(set(plain) | set(comp) | {r["n_embd"] for d in docs for r in d["rows"]})
    print(f"| n_embd | max_iters at {target:g} | plain FLOP/s | compiled FLOP/s | GPU-hours per run |")
    print("|---:|---:|---:|---:|---:|")
    total, missing = 0.0, []
    for n in widths:
        p, c = plain.get(n), comp.get(n)
        if c:
            rate, how = c["steady_flops_per_s"], "compiled"
        elif p and speedup:  # the compiled/plain ratio of the nearest width timed both ways
            near = min((m for m in comp if m in plain), key=lambda m: abs(math.log(m / n)))
            ratio = comp[near]["steady_flops_per_s"] / plain[near]["steady_flops_per_s"]
            rate, how = p["steady_flops_per_s"] * ratio, f"plain x{ratio:.2f} of {near}"
        elif p:
            rate, how = p["steady_flops_per_s"], "plain"
        else:
            missing.append(n)
            print(f"| {n} | {budget.iters_for(n, target, docs[0]['profile'])} | - | - | not timed |")
            continue
        hours = target / rate / 3600
        total += hours
        p_text = f"{p['steady_flops_per_s']:.3g}" if p else "-"
        c_text = f"{c['steady_flops_per_s']:.3g}" if c else "-"
        print(f"| {n} | {budget.iters_for(n, target, docs[0]['profile'])} | {p_text} | {c_text} | {hours:.2f} ({how}) |")
    if speedup:
        print(f"compiled / plain rate: median {speedup:.2f} over {len(ratios)} widths timed both ways")
    print(f"one run per width ({len(widths) - len(missing)} widths timed): {total:.1f} GPU-hours; "
          f"x {a.lrs} lr multipliers x {a.seeds} seeds: {total * a.lrs * a.seeds:.1f} GPU-hours"
          + (f" (widths {missing} not timed, not counted)" if missing else ""))
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="gpu", choices=sorted(budget.PROFILES))
    ap.add_argument("--data", help="folder with train.bin and val.bin")
    ap.add_argument("--out", help="write the timings here (JSON)")
    ap.add_argument("--widths", type=prepare.int_list)
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--compile", action="store_true")
    ap.add_argument("--deadline", type=float, help="skip the widths left after this many seconds")
    ap.add_argument("--summary", nargs="+", help="timing files to summarise instead of measuring")
    ap.add_argument("--lrs", type=int, default=1, help="(summary) number of lr multipliers in the recipe")
    ap.add_argument("--seeds", type=int, default=1, help="(summary) number of seeds in the recipe")
    a = ap.parse_args(argv)
    if a.summary:
        return summary(a)
    if not (a.data and a.out):
        ap.error("--data and --out are needed to measure")
    return measure(a)


if __name__ == "__main__":
    sys.exit(main())
