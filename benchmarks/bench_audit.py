"""Audit rows per second and ack latency (append call -> row durable), the current writer beside the previous one.

Measured: ``AuditLog.append`` from W concurrent writer threads, each call returning only once
its own row is fsynced: 1 writer (no one to share with), 4 (what a session has at most: the file
recorder, the command collector, the clock and a scoring) and 32 (the old headline, kept for
comparison); ``append_many`` bursts (the file recorder's path); and both at once, a key press's
row every 20 ms while interleaved bursts flood the log (what the screen waits for in
bench_files.py). Rows are realistic
file-change ``log`` rows (~600 bytes with a small diff), through the real content validation,
hash chain and fsync.

Writers, same run, cases alternating: the current one (``new``: one writer thread fed by a
queue) and the previous group commit (``old``: two locks, per-batch latches and a helper thread),
kept unchanged in ``benchmarks/baseline/audit_group_commit.py``; ``--audit old|new`` measures one
of them, ``--audit-module FILE`` any other audit.py. Baselines, same disk, same run: a plain loop
of write+fsync per row (pre-serialized lines, no validation or hashing), and sqlite-utils
inserting one row per transaction.

No throughput goal (the 20,000 single-row writes/s goal is retired: a human session never has 32
writers); the figures that count are in bench_files.py and bench_score.py. Printed as before:
ack p99 <= 20 ms at 4 writers. After every run the log is checked: every row present once, chain
intact, calledAt never decreasing (rows of one millisecond share it).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import AUDIT_CHOICES, audit_class, audit_option, dump, header, load, median, parser, pct, verdict  # noqa: E402

from rebench_tui.clock import SystemClock  # noqa: E402
from rebench_tui.trajectory.audit import genesis_hash, line_hash  # noqa: E402
from rebench_tui.trajectory.entries import log  # noqa: E402

DIFF = "--- a/solution/train.py\n+++ b/solution/train.py\n@@ -10,3 +10,3 @@\n-lr = 3e-4\n+lr = 1e-3\n batch = 64\n"


def content(i: int) -> dict:
    return log(f"modified solution/run_{i % 97}.py (1.2 kB)",
               {"event": "modified", "path": f"solution/run_{i % 97}.py", "size": 1234,
                "sha256": f"{i:064x}", "diff": DIFF, "events": 1}, title="file")


def check(path: Path, run_id: int, expected: int) -> str:
    prev, last, n = genesis_hash(run_id), -1, 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            claimed, actual = line_hash(line)
            if row["prevHash"] != prev or claimed != actual or row["calledAt"] < last:
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


def keys_beside_flood(cls, folder: Path, seconds: float = 3.0, burst: int = 500, gap: float = 0.02) -> dict:
    """What a session does in a file flood: the recorder appends bursts (``interleave=True``, as
    Session._record_files does) without pause, while key presses append one row every ``gap`` s.
    Ack latency is the key presses'; rows/s is the flood's."""
    path = folder / "audit-flood.jsonl"
    a = cls(path, 7, SystemClock(), usage=lambda: 123.4)
    contents = [content(i) for i in range(burst)]
    stop = threading.Event()
    flooded = [0]

    def flood() -> None:
        while not stop.is_set():
            flooded[0] += a.append_many(contents, interleave=True)

    lat: list[float] = []
    t = threading.Thread(target=flood)
    t0, c0 = time.perf_counter(), time.process_time()
    t.start()
    while time.perf_counter() - t0 < seconds:
        s = time.perf_counter()
        a.append(content(0))
        lat.append(time.perf_counter() - s)
        time.sleep(gap)
    stop.set()
    t.join()
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    total = flooded[0] + len(lat)
    return {"rows_s": flooded[0] / dt, "ack_p50_ms": pct(lat, 50) * 1e3, "ack_p99_ms": pct(lat, 99) * 1e3,
            "cpu_us_row": cpu / total * 1e6, "rows_batch": total / a.batches if getattr(a, "batches", 0) else 1.0,
            "check": check(path, 7, total)}


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
    audit_option(ap)
    ap.add_argument("--audit-module", type=Path, action="append", default=[],
                    help="also measure this audit.py (named by its file name), beside --audit's; repeatable")
    ap.add_argument("--only", help="measure only the cases whose name contains this (the baselines always run)")
    ap.add_argument("--dir", type=Path, help="folder on the disk to measure (default: a temp folder under ./benchmarks/.tmp)")
    args = ap.parse_args()
    writers_ = {w: audit_class(w) for w in AUDIT_CHOICES[args.audit]}
    writers_.update({m.stem: audit_class(m) for m in args.audit_module})
    header("audit log: rows/s and ack latency, " + " vs ".join(writers_) + " writer, same run")
    base = args.dir or Path(__file__).resolve().parent / ".tmp"
    base.mkdir(parents=True, exist_ok=True)
    cases = {
        "plain write+fsync per row (baseline)": lambda d: plain_fsync(d, 3000),
        "sqlite-utils insert per row (baseline)": lambda d: sqlite_rows(d, 1000),
    }
    for w, cls in writers_.items():
        cases[f"[{w}] append, 1 writer"] = lambda d, cls=cls: writers(cls, d, 1, 3000)
        cases[f"[{w}] append, 4 writers"] = lambda d, cls=cls: writers(cls, d, 4, 1500)
        cases[f"[{w}] append, 32 writers"] = lambda d, cls=cls: writers(cls, d, 32, 500)
        cases[f"[{w}] append_many, bursts of 200"] = lambda d, cls=cls: bursts(cls, d, 40000, 200)
        cases[f"[{w}] key every 20 ms beside a flood"] = lambda d, cls=cls: keys_beside_flood(cls, d)
    if args.only:
        cases = {k: v for k, v in cases.items() if args.only in k or "(baseline)" in k}
    order = list(cases)
    results: dict[str, list[dict]] = {k: [] for k in cases}
    for r in range(args.runs):
        # same case of each writer back to back (old, new), so both see the same minute's load
        keyed = sorted(order, key=lambda k: (k.split("] ", 1)[-1], k))
        for name in keyed:
            with tempfile.TemporaryDirectory(dir=base) as d:
                res = cases[name](Path(d))
            res["load"] = load()
            results[name].append(res)
    summary = {}
    keys = ("rows_s", "ack_p50_ms", "ack_p99_ms", "cpu_us_row", "rows_batch")
    print(f"   {'case':42} {'rows/s':>9} {'ack p50 ms':>10} {'ack p99 ms':>10} {'CPU us/row':>10} {'rows/fsync':>10}"
          "  check / load (last run)")
    for name in order:
        runs = results[name]
        m = {k: median([x[k] for x in runs]) for k in keys}
        summary[name] = {**m, "runs": runs}
        last = runs[-1]
        print(f"   {name:42} {m['rows_s']:9.0f} {m['ack_p50_ms']:10.3f} {m['ack_p99_ms']:10.3f} {m['cpu_us_row']:10.1f} "
              f"{m['rows_batch']:10.1f}  {last.get('check', '-')} / {last['load']}")
    plain = summary["plain write+fsync per row (baseline)"]
    for w in writers_ if f"[{next(iter(writers_))}] append, 4 writers" in summary else ():
        four = summary[f"[{w}] append, 4 writers"]
        print(f"   [{w}] 4 writers: {four['rows_s']:.0f} rows/s = {four['rows_s'] / plain['rows_s']:.1f}x the plain loop; "
              f"ack p99 {four['ack_p99_ms']:.2f} ms: goal <= 20 ms {verdict(four['ack_p99_ms'] <= 20)}")
    for w in writers_ if f"[{next(iter(writers_))}] key every 20 ms beside a flood" in summary else ():
        f = summary[f"[{w}] key every 20 ms beside a flood"]
        print(f"   [{w}] beside a flood of {f['rows_s']:.0f} rows/s: a key's row acked in p50 {f['ack_p50_ms']:.2f} ms, "
              f"p99 {f['ack_p99_ms']:.2f} ms")
    print(f"   no throughput goal (20,000 rows/s retired); medians of {args.runs} runs")
    dump(args.json, summary)


if __name__ == "__main__":
    main()
