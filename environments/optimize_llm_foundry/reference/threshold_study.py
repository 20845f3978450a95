"""How far the smoke profile's weights move under harmless and harmful changes: the evidence for
the smoke profile's maximum norm_diff (0.3, an L1 norm, in protected/score.py; figures in reference/README.md,
raw results in reference/threshold_study_results.json).

    python reference/threshold_study.py ASSETS_DIR [--out results.json]

ASSETS_DIR is a prepared smoke folder (the one holding workspace/ and protected/, e.g.
~/.cache/rebench-tui/assets/optimize_llm_foundry/smoke). Each variant trains with the faster
reference pipeline (reference/faster/minifoundry/fast_finetune.py: about 8 s on one idle core)
and is compared with the protected reference run exactly as protected/score.py compares.

Harmless (float reordering only): the faster pipeline itself (unpadded batches, one microbatch,
no recomputation), with 2 threads, and with the global batch split into microbatches of 2.
Harmful (behaviour changes): learning rate x1.25 and x0.8, another data-order seed, 5% of the rows
left out, 1 batch fewer, warmup 8 instead of 10 batches, no gradient clipping, weight decay 0.01.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ENV = Path(__file__).resolve().parents[1]


def load_scorer():
    # score.py imports the scorer helpers (rebench_scorer) first thing: the repository's copy
    os.environ.setdefault("REBENCH_SCORER_LIB", str(ENV.parents[1] / "rebench_tui" / "runtime" / "lib"))
    spec = importlib.util.spec_from_file_location("olf_score", ENV / "protected" / "score.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


VARIANTS = [
    # name, overrides, rows kept (fraction), harmful
    ("faster pipeline (1 thread)", [], 1.0, False),
    ("faster pipeline, 2 threads", ["num_threads=2"], 1.0, False),
    ("faster pipeline, microbatches of 2", ["device_train_microbatch_size=2"], 1.0, False),
    ("learning rate x1.25", ["optimizer.lr=1.25e-3"], 1.0, True),
    ("learning rate x0.8", ["optimizer.lr=0.8e-3"], 1.0, True),
    ("data order seed 18", ["seed=18"], 1.0, True),
    ("5% of the rows left out", [], 0.95, True),
    ("1 batch fewer", ["max_duration=\"99ba\""], 1.0, True),
    ("warmup 8 batches", ["scheduler.t_warmup=\"8ba\""], 1.0, True),
    ("no gradient clipping", ["gradient_clipping.clipping_threshold=1e9"], 1.0, True),
    ("weight decay 0.01", ["optimizer.weight_decay=0.01"], 1.0, True),
]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("assets", type=Path)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--python", default=sys.executable)
    a = ap.parse_args()
    scorer = load_scorer()
    reference, _ = scorer.load_weights(a.assets / "protected" / "reference_model")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        sol = Path(tmp) / "solution"
        shutil.copytree(ENV / "solution", sol, ignore=shutil.ignore_patterns("__pycache__"))
        shutil.copytree(ENV / "reference" / "faster", sol, dirs_exist_ok=True)
        rows = (a.assets / "workspace" / "train_data.jsonl").read_text().splitlines()
        for name, overrides, keep, harmful in VARIANTS:
            data = Path(tmp) / "rows.jsonl"
            kept = rows if keep == 1.0 else [r for i, r in enumerate(rows) if i % round(1 / (1 - keep)) != 0]
            data.write_text("\n".join(kept) + "\n")
            out = Path(tmp) / "trained_model"
            shutil.rmtree(out, ignore_errors=True)
            cmd = [a.python, "-m", "minifoundry.fast_finetune", "finetune_smoke.toml", "--train_data", str(data),
                   "--base_model", str(a.assets / "workspace" / "base_model"), "--out", str(out), *overrides]
            if "device_train_microbatch_size=2" in overrides:
                cmd = [a.python, "-c", MICRO_SCRIPT, *cmd[3:]]
            r = subprocess.run(cmd, cwd=sol, capture_output=True, text=True, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
            if r.returncode != 0:
                print(r.stderr[-2000:], file=sys.stderr)
                return 1
            trained, _ = scorer.load_weights(out)
            d = scorer.compare(trained, reference)
            results.append({"variant": name, "harmful": harmful, "norm_diff": d["norm_diff"], "l2_norm_sum": d["l2_norm_sum"],
                            "max_scalar_diff": d["max_scalar_diff"], "rows": len(kept)})
            print(f"{name:40s} norm_diff (L1) {d['norm_diff']:.3e}  l2_norm_sum {d['l2_norm_sum']:.3e}  "
                  f"max_scalar_diff {d['max_scalar_diff']:.3e}  "
                  f"({'harmful' if harmful else 'harmless'})", flush=True)
    if a.out:
        a.out.write_text(json.dumps(results, indent=2) + "\n")
    return 0


# The faster pipeline with each global batch split into microbatches (sums of gradients in another order).
MICRO_SCRIPT = r"""
import sys
import minifoundry.fast_finetune as ff
src = open(ff.__file__).read()
one = ("            ids, targets = collate(batch)\n            logits = model(ids)\n"
       "            loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction=\"sum\") / target_tokens(batch)\n"
       "            loss.backward()\n")
pairs = ("            for m in range(0, len(batch), 2):\n                ids, targets = collate(batch[m:m + 2])\n"
         "                logits = model(ids)\n"
         "                loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=IGNORE, reduction=\"sum\") / target_tokens(batch)\n"
         "                loss.backward()\n")
assert one in src, "fast_finetune.py changed: update threshold_study.py"
ns = {"__name__": "minifoundry.fast_finetune_pairs", "__package__": "minifoundry"}
exec(compile(src.replace(one, pairs), ff.__file__, "exec"), ns)
sys.exit(ns["main"]([a for a in sys.argv[1:] if a != "device_train_microbatch_size=2"]))
"""

if __name__ == "__main__":
    sys.exit(main())
