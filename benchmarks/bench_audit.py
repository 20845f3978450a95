"""Audit rows per second with fsync group commit, and ack latency (append call -> row durable).

Measured: ``AuditLog.append`` from W concurrent writer threads (the watcher, the command
collector, the clock and a scoring write concurrently in a session; 32 writers is the headline),
each call returning only once its own row is fsynced; plus one writer (no one to share with)
and ``append_many`` bursts (the watcher's path). Rows are realistic file-change ``log`` rows
(~600 bytes with a small diff), through the real content validation, hash chain and fsync.

Baselines, same disk, same run: a plain loop of write+fsync per row (pre-serialized lines, no
validation or hashing), and sqlite-utils inserting one row per transaction.

Goal: >= 20,000 rows/s and ack p99 <= 20 ms. ``--audit-module FILE`` measures another
version of audit.py (for before/after: ``git show HEAD:rebench_tui/trajectory/audit.py``).
After every run the log is checked: every row present once, chain intact, calledAt increasing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import dump, header, load, median, parser, pct, verdict  # noqa: E402

from rebench_tui.clock import SystemClock  # noqa: E402
from rebench_tui.trajectory.audit import genesis_hash, line_hash  # noqa: E402
from rebench_tui.trajectory.entries import log  # noqa: E402

DIFF = "--- a/solution/train.py\n+++ b/solution/train.py\n@@ -10,3 +10,3 @@\n-lr = 3e-4\n+lr = 1e-3\n batch = 64\n"


def content(i: int) -> dict:
    return log(f"modified solution/run_{i % 97}.py (1.2 kB)",
               {"event": "modified", "path": f"solution/run_{i % 97}.py", "size": 1234,
                "sha256": f"{i:064x}", "diff": DIFF, "events": 1}, title="file")


def audit_class(module_file: Path | None):
    if module_file is None:
        from rebench_tui.trajectory.audit import AuditLog
        return AuditLog
    spec = importlib.util.spec_from_file_location("rebench_tui.trajectory._audit_under_test", module_file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.AuditLog


def check(path: Path, run_id: int, expected: int) -> str:
    prev, last, n = genesis_hash(run_id), -1, 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            claimed, actual = line_hash(line)
            if row["prevHash"] != prev or claimed != actual or row["calledAt"] <= last:
                return f"BROKEN at line {n + 1}"
            prev, last, n = claimed, row["calledAt"], n + 1
    return "ok" if n == expected else f"{n} rows, expected {expected}"


def writers(cls, folder: Path, n_threads: int, per_thread: int) -> dict:
    path = folder / f"audit-w{n_threads}.jsonl"
    a = cls(path, 7, SystemClock(), usage=lambda: 123.4)
    contents = [content(i) for i in range(per_thread)]
    lat: list[list[float]] = [[] for _ in range(n_threads)]
    go = threading.Barrier(n_threads + 1)

    def work(k: int) -> None:
        mine = lat[k]
        go.wait()
        for c in contents:
            t = time.perf_counter()
            a.append(c)
            mine.append(time.perf_counter() - t)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(n_threads)]
    for t in threads:
        t.start()
    go.wait()
    t0, c0 = time.perf_counter(), time.process_time()
    for t in threads:
        t.join()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    all_lat = [x for per in lat for x in per]
    total = n_threads * per_thread
    return {"rows_s": total / dt, "ack_p50_ms": pct(all_lat, 50) * 1e3, "ack_p99_ms": pct(all_lat, 99) * 1e3,
            "cpu_us_row": cpu / total * 1e6, "rows_batch": total / a.batches if getattr(a, "batches", 0) else 1.0,
            "check": check(path, 7, total)}


def bursts(cls, folder: Path, n_rows: int, burst: int) -> dict:
    path = folder / "audit-many.jsonl"
    a = cls(path, 7, SystemClock(), usage=lambda: 123.4)
    contents = [content(i) for i in range(burst)]
    lat = []
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n_rows // burst):
        t = time.perf_counter()
        a.append_many(contents)
        lat.append(time.perf_counter() - t)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"rows_s": n_rows / dt, "ack_p50_ms": pct(lat, 50) * 1e3, "ack_p99_ms": pct(lat, 99) * 1e3,
            "cpu_us_row": cpu / n_rows * 1e6, "rows_batch": burst, "check": check(path, 7, n_rows)}


def plain_fsync(folder: Path, n_rows: int) -> dict:
    """Baseline: pre-serialized lines, one os.write + os.fsync per row."""
    line = (json.dumps({"calledAt": 0, "content": content(1)}, separators=(",", ":")) + "\n").encode()
    fd = os.open(folder / "plain.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    lat = []
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n_rows):
        t = time.perf_counter()
        os.write(fd, line)
        os.fsync(fd)
        lat.append(time.perf_counter() - t)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    os.close(fd)
    return {"rows_s": n_rows / dt, "ack_p50_ms": pct(lat, 50) * 1e3, "ack_p99_ms": pct(lat, 99) * 1e3,
            "cpu_us_row": cpu / n_rows * 1e6, "rows_batch": 1.0}


def sqlite_rows(folder: Path, n_rows: int) -> dict:
    """Baseline: sqlite-utils, one insert (one transaction, synchronous=FULL) per row."""
    from sqlite_utils import Database

    db = Database(folder / "rows.db")
    db.execute("PRAGMA synchronous=FULL")
    t = db["rows"]
    row = {"calledAt": 0, "content": json.dumps(content(1))}
    lat = []
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(n_rows):
        s = time.perf_counter()
        t.insert({**row, "calledAt": i})
        lat.append(time.perf_counter() - s)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    db.close()
    return {"rows_s": n_rows / dt, "ack_p50_ms": pct(lat, 50) * 1e3, "ack_p99_ms": pct(lat, 99) * 1e3,
            "cpu_us_row": cpu / n_rows * 1e6, "rows_batch": 1.0}


def main() -> None:
    ap = parser(__doc__.splitlines()[0])
    ap.add_argument("--audit-module", type=Path, help="measure this audit.py instead of the installed one")
    ap.add_argument("--dir", type=Path, help="folder on the disk to measure (default: a temp folder under ./benchmarks/.tmp)")
    args = ap.parse_args()
    cls = audit_class(args.audit_module)
    header("audit log: rows/s with fsync group commit, ack latency" + (f" [{args.audit_module}]" if args.audit_module else ""))
    base = args.dir or Path(__file__).resolve().parent / ".tmp"
    base.mkdir(parents=True, exist_ok=True)
    cases = {
        "plain write+fsync per row (baseline)": lambda d: plain_fsync(d, 3000),
        "sqlite-utils insert per row (baseline)": lambda d: sqlite_rows(d, 1000),
        "AuditLog.append, 1 writer": lambda d: writers(cls, d, 1, 3000),
        "AuditLog.append, 8 writers": lambda d: writers(cls, d, 8, 1000),
        "AuditLog.append, 32 writers": lambda d: writers(cls, d, 32, 1000),
        "AuditLog.append_many, bursts of 200": lambda d: bursts(cls, d, 40000, 200),
    }
    results: dict[str, list[dict]] = {k: [] for k in cases}
    for r in range(args.runs):
        for name, fn in cases.items():
            with tempfile.TemporaryDirectory(dir=base) as d:
                res = fn(Path(d))
            res["load"] = load()
            results[name].append(res)
    summary = {}
    keys = ("rows_s", "ack_p50_ms", "ack_p99_ms", "cpu_us_row", "rows_batch")
    print(f"   {'case':42} {'rows/s':>9} {'ack p50 ms':>10} {'ack p99 ms':>10} {'CPU us/row':>10} {'rows/fsync':>10}"
          "  check / load (last run)")
    for name, runs in results.items():
        m = {k: median([x[k] for x in runs]) for k in keys}
        summary[name] = {**m, "runs": runs}
        last = runs[-1]
        print(f"   {name:42} {m['rows_s']:9.0f} {m['ack_p50_ms']:10.3f} {m['ack_p99_ms']:10.3f} {m['cpu_us_row']:10.1f} "
              f"{m['rows_batch']:10.1f}  {last.get('check', '-')} / {last['load']}")
    head = summary["AuditLog.append, 32 writers"]
    plain = summary["plain write+fsync per row (baseline)"]
    print(f"   headline (32 writers): {head['rows_s']:.0f} rows/s = {head['rows_s'] / plain['rows_s']:.1f}x the plain loop; "
          f"ack p99 {head['ack_p99_ms']:.2f} ms")
    print(f"   goal >= 20,000 rows/s: {verdict(head['rows_s'] >= 20000)}; goal ack <= 20 ms (p99): {verdict(head['ack_p99_ms'] <= 20)}")
    print(f"   medians of {args.runs} runs")
    dump(args.json, summary)


if __name__ == "__main__":
    main()
