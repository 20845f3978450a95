"""Reading a 3.2 MB all_runs.jsonl (METR's published per-run results), against plain json.loads.

A file the size of METR's published one is generated first (not timed), from the six real rows in
tests/fixtures/metr/: their shape, with run ids, scores, models and budgets varied; a share of
the rows (``--re-bench``, default 0.3) are RE-Bench families, the rest another suite's, as in
the published file. Two cases: that mix, and every row a RE-Bench row (every row validated and
made a run: the worst case). Measured: ``read_published`` (parse, validate, make the runs).
Baseline, same run, interleaved: ``json.loads`` of every line of the same file. Also printed, one
pass: the comparison of the runs read (``compare`` without bootstrap) and the paper's view.
Goal: reading within 2 s.
"""

from __future__ import annotations

import json
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, dump, header, load, median, parser, verdict  # noqa: E402

SAMPLE = ROOT / "tests" / "fixtures" / "metr" / "metr-all-runs-sample.jsonl"
FAMILIES = ["ai_rd_fix_embedding", "ai_rd_optimize_llm_foundry", "ai_rd_triton_cumsum", "ai_rd_small_scaling_law",
            "ai_rd_restricted_mlm", "ai_rd_nanogpt_chat_rl", "ai_rd_rust_codecontests_inference"]
MODELS = ["Claude 3 Opus", "Claude 3.5 Sonnet (New)", "GPT-4o", "o1-preview", "Claude 3.7 Sonnet", "o3"]
BUDGETS = [1800, 7200, 28800]


def generate(path: Path, size_bytes: int, re_bench: float, seed: int = 0) -> int:
    rng = random.Random(seed)
    base = [json.loads(x) for x in SAMPLE.read_text().splitlines()]
    n = written = 0
    with path.open("w", encoding="utf-8") as f:
        while written < size_bytes:
            row = dict(rng.choice(base))
            if rng.random() < re_bench:
                fam = rng.choice(FAMILIES)
            else:
                fam = f"other_suite_{rng.randrange(150)}"
            row.update(run_id=f"gen_{n}", task_family=fam, task_id=f"{fam}/main", alias=rng.choice(MODELS),
                       score=round(rng.random() * 1.2, 10), time_limit=rng.choice(BUDGETS))
            row["completed_at"] = row["started_at"] + row["time_limit"] * 1000
            line = json.dumps(row, separators=(",", ":")) + "\n"
            f.write(line)
            written += len(line.encode())
            n += 1
    return n


def baseline(path: Path) -> int:
    with path.open("r", encoding="utf-8") as f:
        return len([json.loads(line) for line in f if line.strip()])


def main() -> None:
    ap = parser(__doc__.splitlines()[0], runs=5)
    ap.add_argument("--mb", type=float, default=3.2, help="file size in MB (default 3.2, the published file's)")
    ap.add_argument("--re-bench", type=float, default=0.3, help="share of RE-Bench rows in the mixed case")
    args = ap.parse_args()
    from rebench_tui.compare.analysis import compare
    from rebench_tui.compare.paper_view import paper_rows
    from rebench_tui.compare.published_runs import read_published
    from rebench_tui.compare.runs import EnvResolver

    header(f"reading a {args.mb:g} MB all_runs.jsonl vs json.loads of every line")
    resolver = EnvResolver()
    base = Path(__file__).resolve().parent / ".tmp"
    base.mkdir(parents=True, exist_ok=True)
    out: dict = {}
    ok = True
    with tempfile.TemporaryDirectory(dir=base) as d:
        for case, share in (("mixed", args.re_bench), ("all RE-Bench", 1.0)):
            path = Path(d) / f"{case.replace(' ', '_')}.jsonl"
            rows = generate(path, int(args.mb * 1e6), share)
            print(f"   {case}: {rows:,} rows, {path.stat().st_size / 1e6:.2f} MB, {share:.0%} RE-Bench")
            runs = []
            for r in range(args.runs):
                order = ("ours", "json") if r % 2 == 0 else ("json", "ours")
                t: dict[str, float] = {}
                for which in order:
                    t0 = time.perf_counter()
                    got = read_published(path, resolver) if which == "ours" else baseline(path)
                    t[which] = time.perf_counter() - t0
                    if which == "ours":
                        n_runs = len(got.runs)
                runs.append({"read_s": t["ours"], "json_s": t["json"], "load": load()})
                print(f"     run {r + 1}: read_published {t['ours']:.3f} s ({n_runs:,} runs), json.loads {t['json']:.3f} s "
                      f"= {t['ours'] / t['json']:.2f}x; {runs[-1]['load']}")
            ours, raw = median([x["read_s"] for x in runs]), median([x["json_s"] for x in runs])
            got = read_published(path, resolver)
            t0 = time.perf_counter()
            c = compare(got.runs, budgets=BUDGETS, n_boot=0)
            t_cmp = time.perf_counter() - t0
            t0 = time.perf_counter()
            view = paper_rows(c)
            t_view = time.perf_counter() - t0
            print(f"     median of {len(runs)}: read_published {ours:.3f} s vs json.loads {raw:.3f} s = {ours / raw:.2f}x; "
                  f"then (one pass) compare without bootstrap {t_cmp:.2f} s, the paper's view ({len(view)} rows) {t_view:.2f} s")
            ok = ok and ours <= 2.0
            out[case] = {"rows": rows, "read_s": ours, "json_s": raw, "compare_s": t_cmp, "paper_view_s": t_view,
                         "runs": runs}
    print(f"   goal: reading within 2 s: {verdict(ok)}")
    dump(args.json, out)


if __name__ == "__main__":
    main()
