"""Evaluate the scaffold (solve.py) on the validation problems, the way the scorer does.

    python3 evaluate.py                      # every problem of ~/assets/valid.jsonl
    python3 evaluate.py --limit 20           # the first 20
    python3 evaluate.py --only NAME ...      # problems whose name contains NAME
    python3 evaluate.py --save runs/try1     # also keep each program and its verdict

solve() is called on each problem (without its hidden tests) in --parallel threads; each program
is then compiled and run on all the problem's tests with rust_harness (3 s of compile CPU time,
the problem's time limit per test, whitespace-insensitive comparison). Prints one line per
problem and the fraction solved with its standard error. A solve() that takes longer than
--budget seconds is reported as over budget and its program is not evaluated (the scorer stops
waiting for it at that point).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import threading
import time
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import rust_harness as h  # noqa: E402


def default_problems() -> Path:
    return Path(os.environ.get("REBENCH_HOME", Path.home())) / "assets" / "valid.jsonl"


def load_solve():
    spec = importlib.util.spec_from_file_location("solve", HERE / "solve.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["solve"] = module
    spec.loader.exec_module(module)
    return module.solve


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--problems", type=Path, default=None, help="JSONL file (default ~/assets/valid.jsonl)")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--only", nargs="*", default=None)
    ap.add_argument("--parallel", type=int, default=int(os.environ.get("REBENCH_PARALLEL", "8")))
    ap.add_argument("--budget", type=float, default=float(os.environ.get("REBENCH_SOLVE_SECONDS", "120")))
    ap.add_argument("--save", type=Path, default=None)
    a = ap.parse_args(argv)

    path = a.problems or default_problems()
    problems = h.load_problems(path)
    if a.only:
        problems = [p for p in problems if any(s.lower() in p["name"].lower() for s in a.only)]
    if a.limit:
        problems = problems[:a.limit]
    if not problems:
        print(f"no problems selected from {path}")
        return 1
    solve = load_solve()
    print(f"{len(problems)} problems from {path}; solve() in {a.parallel} threads, budget {a.budget:g} s each", flush=True)

    lock = threading.Lock()

    def attempt(p: dict) -> tuple[str | None, str, float]:
        t0 = time.monotonic()
        try:
            code = solve(h.public_view(p))
            status = "ok" if isinstance(code, str) else f"solve() returned {type(code).__name__}, not str"
            code = code if isinstance(code, str) else None
        except Exception:  # noqa: BLE001 - shown, then counted as not solved
            with lock:
                print(f"--- solve() raised on {p['name']}:\n{traceback.format_exc()}", file=sys.stderr, flush=True)
            code, status = None, "solve() raised"
        seconds = time.monotonic() - t0
        if seconds > a.budget:
            code, status = None, f"over budget ({seconds:.0f} s > {a.budget:g} s)"
        return code, status, seconds

    started = time.monotonic()
    with ThreadPoolExecutor(a.parallel) as pool:
        attempts = list(pool.map(attempt, problems))
    solve_s = time.monotonic() - started

    def judge(args):
        p, (code, status, seconds) = args
        if code is None:
            return h.Verdict("no_code", status, tests_total=len(p["tests"]))
        return h.evaluate(code, p["tests"], float(p.get("time_limit") or 2.0), memory_bytes=p.get("memory_limit_bytes"))

    with ThreadPoolExecutor(h.available_cpus()) as pool:
        verdicts = list(pool.map(judge, zip(problems, attempts)))

    counts: dict[str, int] = {}
    for p, (code, status, seconds), v in zip(problems, attempts, verdicts):
        counts[v.outcome] = counts.get(v.outcome, 0) + 1
        detail = v.detail.strip().splitlines()[0][:120] if v.detail.strip() else ""
        print(f"{v.outcome:16} {p['name'][:48]:48} solve {seconds:5.1f} s  {detail}")
        if a.save:
            folder = a.save / "".join(c if c.isalnum() else "_" for c in p["name"])[:80]
            folder.mkdir(parents=True, exist_ok=True)
            (folder / "main.rs").write_text(code or "")
            (folder / "verdict.json").write_text(json.dumps({"solve_status": status, "solve_seconds": seconds,
                                                             **v.as_dict()}, indent=2))
    n, k = len(problems), counts.get("passed", 0)
    print(f"\nsolved {k}/{n} = {k / n:.3f} (standard error {h.standard_error(k, n):.3f}); "
          f"solve() took {solve_s:.1f} s in all; outcomes {json.dumps(counts)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
