"""Compile and run the stand-in model's programs against the smoke problems' tests.

    python3 reference/check_smoke_programs.py [--smoke DIR] [--harness DIR] [--only SLUG]

For every problem in DIR (default protected/smoke): good.rs must pass every test; bad.rs must
fail in the way problem.toml declares (bad_kind: compile_error, wrong_answer or timeout), and
must pass the public tests exactly when bad_passes_public is true (the failure a scaffold cannot
see by testing on the examples). Prints one JSON line per program and a summary; exits 1 on any
mismatch. Uses solution/rust_harness.py (--harness names its folder), so it needs rustc; the
integration test runs it inside the environment's container, with the container's rustc.
"""

from __future__ import annotations

import argparse
import json
import sys
import tomllib
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--smoke", type=Path, default=HERE.parent / "protected" / "smoke")
    ap.add_argument("--harness", type=Path, default=HERE.parent / "solution")
    ap.add_argument("--only", default=None)
    ap.add_argument("--parallel", type=int, default=0)
    a = ap.parse_args(argv)
    sys.path.insert(0, str(a.harness))
    sys.dont_write_bytecode = True
    import rust_harness as h  # noqa: PLC0415

    jobs = []
    for toml in sorted(a.smoke.glob("*/problem.toml")):
        if a.only and toml.parent.name != a.only:
            continue
        doc = tomllib.loads(toml.read_text(encoding="utf-8"))
        tests = doc["public_tests"] + doc["hidden_tests"]
        for variant in ("good", "bad"):
            jobs.append((toml.parent.name, variant, doc, (toml.parent / f"{variant}.rs").read_text(), tests))

    def check(job):
        slug, variant, doc, source, tests = job
        v = h.evaluate(source, tests, doc["time_limit"], memory_bytes=doc["memory_limit_bytes"])
        want = "passed" if variant == "good" else doc["bad_kind"]
        problems = []
        if v.outcome != want:
            problems.append(f"outcome {v.outcome}, expected {want}: {v.detail[:300]}")
        if variant == "bad" and v.outcome not in ("compile_error",):
            on_public = h.evaluate(source, doc["public_tests"], doc["time_limit"], memory_bytes=doc["memory_limit_bytes"])
            if on_public.passed != doc["bad_passes_public"]:
                problems.append(f"on the public tests: {on_public.outcome}, but bad_passes_public = {doc['bad_passes_public']}")
        return {"problem": slug, "program": f"{variant}.rs", "outcome": v.outcome, "compile_seconds": v.compile_seconds,
                "run_seconds": v.run_seconds, "ok": not problems, "problems": problems}

    with ThreadPoolExecutor(a.parallel or h.available_cpus()) as pool:
        results = list(pool.map(check, jobs))
    for r in results:
        print(json.dumps(r))
    bad = [r for r in results if not r["ok"]]
    print(json.dumps({"programs": len(results), "mismatches": len(bad)}))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
