#!/usr/bin/env python3
"""A scripted answer: small IsoFLOP experiments under the cap, power laws, extrapolation.

    SCALING_PROFILE=smoke python reference/derive_answer.py --data DIR --out answer_smoke.json

Everything goes through solution/train.py's command line, as a participant's runs would, so
every run is under the per-experiment cap.

1. For three budgets (cap/2, cap/sqrt(2), cap), train a handful of widths, each with the
   max_iters that
   fills the budget (PLAN below). Runs with fewer than min_steps steps are skipped: such short runs sit on
   the loss plateau at the start of training and say nothing about the trade-off; runs with
   more than max_steps are the narrowest widths, far below the best one at these budgets and
   the slowest to train.
2. Per budget C, fit a parabola to loss against ln(n_embd); its vertex gives the best width
   n*(C) and its loss L*(C) (the best measured run when the parabola opens downwards or its
   vertex lies outside the widths tried).
3. Fit ln n* = a + b ln C and ln L* = c + d ln C by least squares; evaluate both at the target.
4. Answer: n_embd = round(n*(target)), max_iters = the budget-filling steps at that width,
   loss_prediction = L*(target).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOLUTION = HERE.parent / "solution"

PLAN = {
    # widths tried at every budget, keeping only runs with min_steps <= max_iters <= max_steps
    "smoke": {"widths": [4, 5, 6, 7, 8, 9, 10, 12], "min_steps": 500, "max_steps": 1700},
    "gpu": {"widths": [128, 192, 256, 320, 384, 512, 640, 768], "min_steps": 500, "max_steps": 8000},
}
FRACTIONS = (0.5, 0.7071, 1.0)  # budgets as fractions of the per-experiment cap


def run(train_py: Path, data: str, n_embd: int, max_iters: int, profile: str, threads: int | None) -> dict:
    env = {**os.environ, "SCALING_PROFILE": profile}
    if threads:
        env.update(OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        proc = subprocess.run([sys.executable, str(train_py), "--n_embd", str(n_embd), "--max_iters", str(max_iters),
                               "--data_dir", data, "--out", str(out)], env=env, capture_output=True, text=True)
        if proc.returncode != 0:
            raise SystemExit(f"train.py failed for n_embd={n_embd} max_iters={max_iters} (exit {proc.returncode}):\n"
                             f"{proc.stderr[-2000:]}")
        return json.loads(out.read_text())


def fit_line(xs: list[float], ys: list[float]) -> tuple[float, float]:
    """Least-squares a, b of y = a + b x."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    return my - b * mx, b


def best_of(points: list[tuple[int, float]]) -> tuple[float, float]:
    """(n*, L*) from (width, loss) points of one budget: the vertex of a parabola in ln(width)."""
    points = sorted(points)
    best_n, best_l = min(points, key=lambda p: p[1])
    if len(points) < 3:
        return float(best_n), best_l
    xs = [math.log(n) for n, _ in points]
    ys = [l for _, l in points]
    # least squares for y = c0 + c1 x + c2 x^2 (normal equations, 3x3)
    s = [sum(x**k for x in xs) for k in range(5)]
    t = [sum(y * x**k for x, y in zip(xs, ys)) for k in range(3)]
    m = [[s[0], s[1], s[2]], [s[1], s[2], s[3]], [s[2], s[3], s[4]]]
    c = solve3(m, t)
    if c is None or c[2] <= 0:
        return float(best_n), best_l
    xv = -c[1] / (2 * c[2])
    if not xs[0] <= xv <= xs[-1]:
        return float(best_n), best_l
    return math.exp(xv), c[0] + c[1] * xv + c[2] * xv * xv


def solve3(m: list[list[float]], t: list[float]) -> list[float] | None:
    def det(a):
        return (a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
                + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]))

    d = det(m)
    if abs(d) < 1e-12:
        return None
    out = []
    for col in range(3):
        a = [row[:] for row in m]
        for r in range(3):
            a[r][col] = t[r]
        out.append(det(a) / d)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description="Derive an answer from small experiments under the cap.")
    ap.add_argument("--data", help="folder with train.bin and val.bin (default: train.py's default)")
    ap.add_argument("--out", required=True, help="where to write the answer JSON")
    ap.add_argument("--profile", default=os.environ.get("SCALING_PROFILE", "smoke"), choices=sorted(PLAN))
    ap.add_argument("--solution", default=str(SOLUTION), help="folder with train.py and budget.py")
    ap.add_argument("--workers", type=int, default=2, help="runs at a time (smoke: CPU processes of one thread)")
    ap.add_argument("--log", help="also write every run's result and the fits here (JSON)")
    a = ap.parse_args()
    sys.path.insert(0, a.solution)
    import budget  # noqa: PLC0415

    c = budget.constants(a.profile)
    train_py = Path(a.solution) / "train.py"
    data = a.data or ""
    plan = PLAN[a.profile]
    jobs = []
    for frac in FRACTIONS:
        C = frac * c["cap_flops"]
        for n in plan["widths"]:
            iters = budget.iters_for(n, C, a.profile)
            if plan["min_steps"] <= iters <= plan["max_steps"]:
                jobs.append((C, n, iters))
    threads = 1 if a.profile == "smoke" and a.workers > 1 else None
    started = time.time()
    budgets = ", ".join(f"{f * c['cap_flops']:.3g}" for f in FRACTIONS)
    print(f"{len(jobs)} runs at budgets {budgets} FLOPs", flush=True)

    def one(job):
        C, n, iters = job
        r = run(train_py, data, n, iters, a.profile, threads)
        print(f"  C={C:.3g} n_embd={n} max_iters={iters}: val_loss {r['val_loss']:.4f}", flush=True)
        return C, n, iters, r["val_loss"]

    with ThreadPoolExecutor(max_workers=max(1, a.workers)) as pool:
        results = list(pool.map(one, sorted(jobs, key=lambda j: -j[2])))
    by_budget: dict[float, list[tuple[int, float]]] = {}
    for C, n, _iters, loss in results:
        by_budget.setdefault(C, []).append((n, loss))
    optima = []
    for C in sorted(by_budget):
        n_star, l_star = best_of(by_budget[C])
        optima.append((C, n_star, l_star))
        print(f"budget {C:.3g}: best width {n_star:.2f}, loss {l_star:.4f}", flush=True)
    lnC = [math.log(C) for C, _, _ in optima]
    a_n, b_n = fit_line(lnC, [math.log(n) for _, n, _ in optima])
    a_l, b_l = fit_line(lnC, [math.log(l) for _, _, l in optima])
    target = c["target_flops"]
    n_target = max(1, round(math.exp(a_n + b_n * math.log(target))))
    iters = budget.iters_for(n_target, target, a.profile)
    loss = math.exp(a_l + b_l * math.log(target))
    answer = {"n_embd": n_target, "max_iters": iters, "loss_prediction": round(loss, 4)}
    Path(a.out).write_text(json.dumps(answer, indent=2) + "\n")
    print(f"n* ~ C^{b_n:.3f}, L* ~ C^{b_l:.3f}; answer {answer} ({budget.flops(n_target, iters, a.profile):.4g} FLOPs) "
          f"in {time.time() - started:.1f} s", flush=True)
    if a.log:
        Path(a.log).write_text(json.dumps({"runs": results, "optima": optima, "answer": answer,
                                           "fits": {"n_exponent": b_n, "loss_exponent": b_l}}, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
