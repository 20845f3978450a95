"""Key-to-screen latency while 5,000 file writes/s land in the workspace, and no file record lost.

A real session of the toy_score fixture (local runtime: the watcher is the same host-side
watchdog watcher whichever runtime runs the container) is shown by the real app under Textual's
Pilot, with the real file watcher on. A separate process (as a participant's training run
would be) appends a line to one of ``--files`` log files in ``workspace/flood/``, round-robin,
at ``--rate`` writes/s for ``--seconds`` s (appends, as a training run logs: rewriting a file in
place makes ext4 write it out on close, which caps a writer near 5,000/s by itself). Meanwhile the key ``p`` (pause/resume: it writes an
audit row and repaints the countdown) is pressed every ~20 ms; one latency is from the key event
entering the app through Pilot's driver to the countdown showing the new state with every
widget's pending messages and refreshes processed (Pilot's wait for the screen; see
``key_to_screen``). Baseline, same run: the same presses with no file traffic.

Counting records: the watcher coalesces raw events per path within one drain (every 0.2 s) and
skips writes that leave the content as it was, so rows < writes by design. No record is lost when
(a) every path written has at least one row, (b) each path's last row carries the sha256 of the
file's final content, (c) no path has more rows than writes, and (d) the file rows in the audit
log equal the changes the watcher produced (``FileWatcher.total_changes``). Also reported: how
long after the flood ends the last change is recorded (record lag).

Audit writers, same run (``--audit both``, the default): each run is done with the current writer
(``new``) and with the previous group commit kept in ``benchmarks/baseline/`` (``old``), back to
back, so both see the same minute's load.
"""

from __future__ import annotations

import asyncio
import hashlib
import inspect
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import AUDIT_CHOICES, ROOT, audit_option, dump, header, load, median, parser, pct, sessions_use_audit, verdict  # noqa: E402

SIZE = (140, 42)

WRITER = r"""
import os, sys, time
root, rate, seconds, n_files = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
os.makedirs(root, exist_ok=True)
start = time.monotonic(); done = 0; tick = 0.01
while True:
    now = time.monotonic() - start
    if now >= seconds:
        break
    due = int(min(now + tick, seconds) * rate)
    while done < due:
        i = done % n_files
        with open(os.path.join(root, f"f{i:04d}.log"), "a") as fh:  # a training run appending to its logs
            fh.write(f"step {done} loss {1.0 / (done + 1):.6f}\n")
        done += 1
    time.sleep(max(0.0, tick - (time.monotonic() - start - now)))
print(done, time.monotonic() - start, flush=True)
"""


def make_session(folder: Path):
    from rebench_tui.catalog import load_catalog
    from rebench_tui.clock import SystemClock
    from rebench_tui.runtime.local import LocalRuntime
    from rebench_tui.runtime.images import Recipes
    from rebench_tui.session import Session

    env = load_catalog(ROOT / "tests" / "fixtures" / "environments", Recipes.load(ROOT / "images").names).get("toy_score")
    return Session.create(env, "smoke", LocalRuntime(), folder, clock=SystemClock())


async def key_to_screen(pilot, app, key: str, changed) -> float:
    """Seconds from a key event entering the app (as Pilot sends it: through the driver) to the
    handler's effect being visible and every widget having processed its pending messages and
    refreshes (Pilot's own wait for the screen). ``pilot.press`` itself is not the clock: it also
    waits for the whole process to go CPU-idle (at least 2 x 20 ms), which under a file flood
    never happens."""
    from textual import events

    t = time.perf_counter()
    ev = events.Key(key, key)
    ev.set_sender(app)
    app._driver.send_message(ev)
    while not changed():
        if time.perf_counter() - t > 30:
            raise RuntimeError("the key press did not reach the screen in 30 s")
        await asyncio.sleep(0.0005)
    await pilot._wait_for_screen()
    return time.perf_counter() - t


async def press_loop(pilot, app, stop: asyncio.Event | None, n: int | None, gap: float) -> list[float]:
    from rebench_tui.tui.widgets.countdown import Countdown

    countdown = app.query_one(Countdown)
    lat = []
    while (stop is None and len(lat) < n) or (stop is not None and not stop.is_set()):
        was_paused = countdown.has_class("paused")
        lat.append(await key_to_screen(pilot, app, "p", lambda: countdown.has_class("paused") != was_paused))
        await asyncio.sleep(gap)
    return lat


async def one_run(base: Path, rate: int, seconds: float, n_files: int, in_process: bool = False) -> dict:
    from rebench_tui.tui.app import RebenchApp

    s = make_session(base / "sessions")
    if "separate_process" in inspect.signature(s.start_watching).parameters:  # older trees: one design only
        s.start_watching(separate_process=not in_process)  # the app keeps the watcher already running
    flood = s.workspace / "flood"
    app = RebenchApp(s, watch_files=True)
    out: dict = {}
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()  # the watcher is running
        out["idle"] = await press_loop(pilot, app, None, 60, 0.02)
        proc = await asyncio.create_subprocess_exec(sys.executable, "-c", WRITER, str(flood), str(rate), str(seconds),
                                                    str(n_files), stdout=subprocess.PIPE)
        stop = asyncio.Event()
        presser = asyncio.create_task(press_loop(pilot, app, stop, None, 0.02))
        line = (await proc.stdout.readline()).decode().split()
        await proc.wait()
        t_end = time.perf_counter()
        stop.set()
        out["flood"] = await presser
        out["writes"], out["write_s"] = int(line[0]), float(line[1])
        # record lag: until the watcher has recorded the final content of every file
        final = {f"flood/{p.name}": hashlib.sha256(p.read_bytes()).hexdigest() for p in flood.iterdir()}
        while True:
            last = {}
            for r in _file_rows(s.folder / "audit.jsonl"):
                last[r["path"]] = r.get("sha256")
            if all(last.get(k) == v for k, v in final.items()):
                break
            if time.perf_counter() - t_end > 120:
                break
            await asyncio.sleep(0.05)
        out["record_lag_s"] = time.perf_counter() - t_end
        out["total_changes"] = s.watcher.total_changes if s.watcher else None
        out["raw_events"] = s.watcher.total_events if s.watcher else None
        await pilot.press("q")
        await pilot.pause()
        app.exit()
    rows = [r for r in _file_rows(s.folder / "audit.jsonl") if r["path"].startswith("flood/")]
    per: dict[str, list[dict]] = {}
    for r in rows:
        per.setdefault(r["path"], []).append(r)
    writes_per = {f"flood/f{i:04d}.log": out["writes"] // n_files + (1 if i < out["writes"] % n_files else 0) for i in range(n_files)}
    problems = []
    for path, n in writes_per.items():
        if n and path not in per:
            problems.append(f"{path}: written {n}x, no row")
        elif n and per[path][-1].get("sha256") != final.get(path):
            problems.append(f"{path}: last row is not the final content")
        elif len(per.get(path, [])) > n:
            problems.append(f"{path}: {len(per[path])} rows for {n} writes")
    all_file_rows = len(list(_file_rows(s.folder / "audit.jsonl")))
    if out["total_changes"] is not None and all_file_rows != out["total_changes"]:
        problems.append(f"{all_file_rows} file rows in the log, the watcher produced {out['total_changes']}")
    out["file_rows"] = len(rows)
    out["problems"] = problems
    return out


def _file_rows(path: Path):
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            c = row["content"]
            if c.get("type") == "log" and (c.get("attributes") or {}).get("title") == "file":
                yield c["content"][1]


def main() -> None:
    ap = parser(__doc__.splitlines()[0], runs=3)
    ap.add_argument("--rate", type=int, default=5000, help="file writes per second (default 5000)")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--files", type=int, default=500, help="distinct files written round-robin (default 500)")
    ap.add_argument("--in-process", action="store_true",
                    help="run the file watcher in the app's process (the design before the file recorder process)")
    audit_option(ap)
    args = ap.parse_args()
    writers = AUDIT_CHOICES[args.audit]
    header(f"key-to-screen latency under {args.rate} file writes/s for {args.seconds:g} s ({args.files} files), "
           f"audit writer {' vs '.join(writers)}" + (" [watcher in the app's process]" if args.in_process else ""))
    base = Path(__file__).resolve().parent / ".tmp"
    base.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict]] = {w: [] for w in writers}
    for r in range(args.runs):
        for w in (writers if r % 2 == 0 else writers[::-1]):  # alternate which goes first
            with tempfile.TemporaryDirectory(dir=base) as d, sessions_use_audit(w):
                res = asyncio.run(one_run(Path(d), args.rate, args.seconds, args.files, args.in_process))
            res["load"] = load()
            idle, flood = res.pop("idle"), res.pop("flood")
            res.update(idle_p50_ms=pct(idle, 50) * 1e3, idle_p99_ms=pct(idle, 99) * 1e3, p50_ms=pct(flood, 50) * 1e3,
                       p99_ms=pct(flood, 99) * 1e3, max_ms=max(flood) * 1e3, presses=len(flood))
            runs[w].append(res)
            print(f"   run {r + 1} [{w}]: writes {res['writes']} in {res['write_s']:.1f} s; presses {res['presses']}; "
                  f"key p50 {res['p50_ms']:.1f} ms p99 {res['p99_ms']:.1f} ms max {res['max_ms']:.0f} ms "
                  f"(idle p50 {res['idle_p50_ms']:.1f} p99 {res['idle_p99_ms']:.1f}); file rows {res['file_rows']} "
                  f"(raw events {res['raw_events']}); record lag {res['record_lag_s']:.2f} s; "
                  f"{'no record lost' if not res['problems'] else 'PROBLEMS: ' + '; '.join(res['problems'][:5])}; {res['load']}",
                  flush=True)
    summary = {}
    for w in writers:
        m = {k: median([x[k] for x in runs[w]]) for k in ("p50_ms", "p99_ms", "idle_p50_ms", "idle_p99_ms", "record_lag_s", "file_rows")}
        lost = any(x["problems"] for x in runs[w])
        summary[w] = {"median": m, "lost": lost, "runs": runs[w]}
        print(f"   [{w}] median of {len(runs[w])}: under load p50 {m['p50_ms']:.1f} ms, p99 {m['p99_ms']:.1f} ms; "
              f"baseline (no file traffic) p50 {m['idle_p50_ms']:.1f} ms, p99 {m['idle_p99_ms']:.1f} ms; "
              f"record lag {m['record_lag_s']:.2f} s")
        print(f"   [{w}] goal p99 <= 50 ms: {verdict(m['p99_ms'] <= 50)}; goal no audit record lost: {verdict(not lost)}")
    dump(args.json, summary)


if __name__ == "__main__":
    main()
