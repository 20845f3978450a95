"""Export of a 100k-row session to an Inspect ``.eval``, against Inspect writing the same log.

A realistic session folder is generated first (not timed): a real toy_score session (local
runtime, injected clock) whose audit log gets ``--rows`` rows through the real audit writer:
file changes with small diffs (~60%), shell commands as action/observation/log triples with
output (~30%), notes, pauses and resumes, time warnings, 20 real scorings (score log and all),
then the finish. Measured: ``export_inspect`` (read and check the records, build the EvalLog,
write it with Inspect's ``write_eval_log``). Baseline, same run, interleaved: Inspect's own
``write_eval_log`` of the equivalent EvalLog (built beforehand, so only Inspect's writing is
timed). Goal: <= 1.2x baseline. A split (load, build, write) is printed.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, dump, header, load, median, parser, verdict  # noqa: E402

OUTPUT = "".join(f"epoch {i} step {i * 100} loss {2.5 / (i + 1):.4f} val {2.7 / (i + 1):.4f}\n" for i in range(12))


def generate(base: Path, n_rows: int) -> Path:
    from rebench_tui.catalog import load_catalog
    from rebench_tui.clock import FakeClock
    from rebench_tui.runtime.images import Recipes
    from rebench_tui.runtime.local import LocalRuntime
    from rebench_tui.session import Session
    from rebench_tui.trajectory.entries import log

    clock = FakeClock()
    env = load_catalog(ROOT / "tests" / "fixtures" / "environments", Recipes.load(ROOT / "images").names).get("toy_score")
    s = Session.create(env, "smoke", LocalRuntime(), base / "sessions", clock=clock)
    cwd = str(s.workspace)
    scorings_every = max(1, n_rows // 20)
    done, k = s.audit.count, 0
    next_score = scorings_every
    while done < n_rows - 10:
        batch: list[dict] = []
        for _ in range(50):
            k += 1
            path = f"solution/module_{k % 40}.py"
            for j in range(4):  # a few file changes ...
                diff = (f"--- a/{path}\n+++ b/{path}\n@@ -{j + 1},3 +{j + 1},3 @@\n def step():\n-    lr = {k * 1e-5:.5f}\n"
                        f"+    lr = {(k + 1) * 1e-5:.5f}\n     return lr\n")
                batch.append(log(f"modified {path} (2.1 kB)", {"event": "modified", "path": path, "size": 2100 + j,
                                                                 "sha256": f"{k * 4 + j:064x}", "diff": diff, "events": 2},
                                 title="file"))
            cid = f"{1000 + k % 7}-{k}"  # ... and a command with its output
            cmd = f"python train.py --lr {k * 1e-5:.5f} --steps 1200"
            start = int(clock.time() * 1000)
            batch.append({"type": "action", "action": {"type": "run_bash", "args": {"command": cmd}, "id": cid, "cwd": cwd,
                                                        "started_at": start, "shell_pid": 1000 + k % 7, "source": "history"}})
            batch.append({"type": "observation", "observation": {
                "id": cid, "exit_status": 0, "output": OUTPUT, "output_bytes": len(OUTPUT), "truncated": False,
                "started_at": start, "ended_at": start + 42_000, "duration_s": 42.0, "cwd": cwd}})
            batch.append(log(f"$ {cmd}  (exit 0, 42.0 s, in {cwd})", {
                "event": "command", "id": cid, "command": cmd, "exit_status": 0, "cwd": cwd, "duration_s": 42.0,
                "output_head": OUTPUT.splitlines()[:3], "truncated": False}, title="command"))
            clock.advance(3)
        s.audit.append_many(batch)
        done = s.audit.count
        if k % 400 == 0:
            s.note(f"after {k} runs: the smaller learning rate is steadier")
        if k % 1000 == 0:
            s.pause("lunch")
            clock.advance(600)
            s.resume()
        if done >= next_score:
            next_score += scorings_every
            (s.workspace / "solution" / "answer.txt").write_text(f"{10 - done / n_rows * 8:.3f}\n")
            s.score()
    s.finish("submitted")
    s.lock.release()
    return s.folder


def main() -> None:
    ap = parser(__doc__.splitlines()[0], runs=3)
    ap.add_argument("--rows", type=int, default=100_000)
    args = ap.parse_args()
    from inspect_ai.log import write_eval_log

    from rebench_tui.trajectory.export_inspect import build_eval_log, export_inspect
    from rebench_tui.trajectory.session_records import SessionRecords

    header(f"export of a {args.rows:,}-row session to Inspect .eval vs Inspect's own writer")
    base = Path(__file__).resolve().parent / ".tmp"
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=base) as d:
        d = Path(d)
        t = time.perf_counter()
        folder = generate(d, args.rows)
        n = sum(1 for _ in open(folder / "audit.jsonl", encoding="utf-8"))
        size = (folder / "audit.jsonl").stat().st_size
        print(f"   generated {n:,} rows ({size / 1e6:.0f} MB audit.jsonl) in {time.perf_counter() - t:.1f} s")
        t = time.perf_counter()
        rec = SessionRecords.load(folder)
        t_load = time.perf_counter() - t
        t = time.perf_counter()
        eval_log = build_eval_log(rec)
        t_build = time.perf_counter() - t
        events = len(eval_log.samples[0].events)
        del rec
        runs = []
        for r in range(args.runs):
            t = time.perf_counter()
            write_eval_log(eval_log, str(d / f"inspect-{r}.eval"))
            raw = time.perf_counter() - t
            t = time.perf_counter()
            export_inspect(folder, d / f"export-{r}.eval")
            ours = time.perf_counter() - t
            runs.append({"export_s": ours, "inspect_s": raw, "load": load()})
            print(f"   run {r + 1}: export {ours:.2f} s, Inspect write_eval_log {raw:.2f} s = {ours / raw:.2f}x; {runs[-1]['load']}")
        sizes = ((d / "export-0.eval").stat().st_size, (d / "inspect-0.eval").stat().st_size)
    ours, raw = median([x["export_s"] for x in runs]), median([x["inspect_s"] for x in runs])
    print(f"   split (one pass): load+check records {t_load:.2f} s, build EvalLog ({events:,} events) {t_build:.2f} s, "
          f"write (Inspect) ~{raw:.2f} s; .eval {sizes[0] / 1e6:.1f} MB (Inspect's own: {sizes[1] / 1e6:.1f} MB)")
    print(f"   median of {len(runs)}: export {ours:.2f} s vs Inspect {raw:.2f} s = {ours / raw:.2f}x")
    print(f"   goal <= 1.2x: {verdict(ours <= 1.2 * raw)}")
    dump(args.json, {"export_s": ours, "inspect_s": raw, "load_s": t_load, "build_s": t_build, "runs": runs})


if __name__ == "__main__":
    main()
