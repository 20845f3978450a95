"""The audit log's one writer thread: rows reach the file in the order they were chained, a failed
write reaches the callers, nothing is acknowledged before it is fsynced, and flush and close do
what they say."""

from __future__ import annotations

import errno
import gc
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import rebench_tui.trajectory.audit as audit_mod
from rebench_tui.clock import FakeClock, SystemClock
from rebench_tui.trajectory.audit import AuditLog, AuditWriteError, genesis_hash, line_hash, read_entries, validate_file
from rebench_tui.trajectory.entries import log

RUN = 77
ROOT = Path(__file__).resolve().parents[2]


def chain_ok(text: str) -> bool:
    prev = genesis_hash(RUN)
    for line in text.splitlines(keepends=True):
        row = json.loads(line)
        claimed, actual = line_hash(line)
        if row["prevHash"] != prev or claimed != actual:
            return False
        prev = claimed
    return True


def spy_writes(monkeypatch) -> list[tuple[threading.Thread, bytes]]:
    """Every write the log makes: (the thread that made it, the bytes), then the real write."""
    real = audit_mod._write_durably
    seen: list[tuple[threading.Thread, bytes]] = []

    def spy(path, data):
        seen.append((threading.current_thread(), data))
        real(path, data)

    monkeypatch.setattr(audit_mod, "_write_durably", spy)
    return seen


def test_writes_happen_on_one_thread_in_the_order_rows_were_chained(tmp_path, monkeypatch):
    seen = spy_writes(monkeypatch)
    a = AuditLog(tmp_path / "audit.jsonl", RUN, SystemClock(), usage=lambda: 1.0)
    go = threading.Barrier(7)

    def single(k: int) -> None:
        go.wait()
        for i in range(100):
            a.append(log(f"w{k} r{i}", {"w": k, "i": i}))

    def burst() -> None:
        go.wait()
        for b in range(5):
            a.append_many([log(f"b{b} r{i}", {"w": 99, "i": b * 150 + i}) for i in range(150)], interleave=True)

    threads = [threading.Thread(target=single, args=(k,)) for k in range(6)] + [threading.Thread(target=burst)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    writers = {t for t, _ in seen}
    assert len(writers) == 1 and threading.current_thread() not in writers and not any(t in writers for t in threads)
    text = a.path.read_text(encoding="utf-8")
    assert b"".join(d for _, d in seen) == text.encode("utf-8")  # the file is the writes, in order, nothing twice
    rows = read_entries(a.path)
    assert len(rows) == 6 * 100 + 5 * 150 == a.count
    assert chain_ok(text) and validate_file(a.path) == []  # chain order = file order = calledAt order
    for k in [*range(6), 99]:
        mine = [r["content"]["content"][1]["i"] for r in rows if r["content"]["content"][1]["w"] == k]
        assert mine == list(range(len(mine)))
    assert a.batches == len(seen) < len(rows)  # callers shared fsyncs


def test_a_burst_queued_in_chunks_is_one_write(tmp_path, monkeypatch):
    """Chunks let other writers in, but do not each cost an fsync: the writer is asked to write
    only when someone waits, so a flood's batch reaches the disk in one write."""
    monkeypatch.setattr(audit_mod, "CHUNK", 8)
    seen = spy_writes(monkeypatch)
    a = AuditLog(tmp_path / "audit.jsonl", RUN, FakeClock())
    a.append_many([log(f"r{i}") for i in range(200)], interleave=True)
    assert len(seen) == 1 == a.batches and seen[0][1].count(b"\n") == 200


def test_no_call_returns_before_its_row_is_fsynced(tmp_path, monkeypatch):
    path = tmp_path / "audit.jsonl"
    a = AuditLog(path, RUN, SystemClock())
    a.append(log("first"))  # the file exists from here on
    inode = path.stat().st_ino
    real_fsync = audit_mod.os.fsync
    synced: list[int] = [0]  # the audit file's size at each fsync of it

    def fsync(fd):
        real_fsync(fd)
        st = os.fstat(fd)
        if st.st_ino == inode:
            synced.append(st.st_size)

    monkeypatch.setattr(audit_mod.os, "fsync", fsync)
    at_return: list[tuple[str, int]] = []

    def writer(k: int) -> None:
        for i in range(60):
            if i % 10 == 9:
                a.append_many([log(f"w{k} burst {i}.{j}") for j in range(7)])
                last = read_entries(path)  # a burst's rows: check the last of them
                h = [r["hash"] for r in last if r["content"]["content"][0] == f"w{k} burst {i}.6"][0]
            else:
                h = a.append(log(f"w{k} r{i}"))["hash"]
            at_return.append((h, max(synced)))

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    end_of: dict[str, int] = {}
    offset = 0
    for line in path.read_bytes().splitlines(keepends=True):
        offset += len(line)
        end_of[json.loads(line)["hash"]] = offset
    assert len(at_return) == 300
    late = [(h, size, end_of[h]) for h, size in at_return if size < end_of[h]]
    assert not late  # when each call returned, an fsync had covered its row's last byte


FULL_DISK = r"""
import json, resource, signal, sys, threading
from pathlib import Path
from rebench_tui.clock import SystemClock
from rebench_tui.trajectory.audit import AuditLog, AuditWriteError
from rebench_tui.trajectory.entries import log

signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails (EFBIG) instead of killing us
path = Path(sys.argv[1])
a = AuditLog(path, 77, SystemClock())
a.append(log("before the limit"))
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (path.stat().st_size + 2500, hard))  # room for a few rows only
acked, errors = [], []

def writer(k):
    for i in range(20):
        try:
            acked.append(a.append(log(f"w{k} r{i}", {"w": k, "i": i, "pad": "x" * 200}))["hash"])
        except AuditWriteError as exc:
            errors.append(str(exc))

threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
for t in threads:
    t.start()
for t in threads:
    t.join()
during = path.read_text(encoding="utf-8")
closed_while_full = None
try:
    a.close()
except AuditWriteError as exc:
    closed_while_full = str(exc)
resource.setrlimit(resource.RLIMIT_FSIZE, (hard, hard))  # space again
a.close()  # writes what is held, then ends the writer
print(json.dumps({"acked": acked, "errors": len(errors), "error": errors[:1], "during": during,
                  "closed_while_full": closed_while_full, "count": a.count}))
"""


def test_a_real_failed_write_reaches_the_callers_and_nothing_unwritten_is_acknowledged(tmp_path):
    """The file-size limit (RLIMIT_FSIZE) makes real writes fail part way, as a full disk does."""
    path = tmp_path / "audit.jsonl"
    out = subprocess.run([sys.executable, "-c", FULL_DISK, str(path)], capture_output=True, text=True, timeout=120,
                         cwd=ROOT, check=True).stdout
    got = json.loads(out)
    during = got["during"]
    assert got["errors"] > 0 and "File too large" in got["error"][0] and "wait in memory" in got["error"][0]
    assert 1 <= len(got["acked"]) < 80  # a few rows fitted before the limit
    assert during.endswith("\n") and chain_ok(during)  # cut back to whole lines, chain whole
    in_file = {json.loads(line)["hash"] for line in during.splitlines()}
    assert set(got["acked"]) <= in_file  # every acknowledged row was on disk
    assert got["closed_while_full"] and "File too large" in got["closed_while_full"]  # close does not drop held rows
    rows = read_entries(path)  # after the limit was lifted, close wrote everything held
    assert len(rows) == 81 == got["count"]
    assert chain_ok(path.read_text(encoding="utf-8")) and validate_file(path) == []
    for k in range(4):
        assert [r["content"]["content"][1]["i"] for r in rows[1:] if r["content"]["content"][1]["w"] == k] == list(range(20))


def test_flush_waits_for_rows_another_thread_queued(tmp_path, monkeypatch):
    a = AuditLog(tmp_path / "audit.jsonl", RUN, FakeClock())
    real = audit_mod._write_durably
    started, release = threading.Event(), threading.Event()

    def gated(path, data):
        started.set()
        assert release.wait(10)
        real(path, data)

    monkeypatch.setattr(audit_mod, "_write_durably", gated)
    writer = threading.Thread(target=lambda: a.append(log("slow")))
    writer.start()
    assert started.wait(10)
    flusher = threading.Thread(target=a.flush)
    flusher.start()
    flusher.join(0.3)
    assert flusher.is_alive() and read_entries(a.path) == []  # the row is not on disk: flush waits
    release.set()
    flusher.join(10)
    writer.join(10)
    assert [r["content"]["content"][0] for r in read_entries(a.path)] == ["slow"]


def test_close_ends_the_writer_and_refuses_later_writes(tmp_path, monkeypatch):
    seen = spy_writes(monkeypatch)
    a = AuditLog(tmp_path / "audit.jsonl", RUN, FakeClock())
    a.append(log("one"))
    thread = seen[0][0]
    assert thread.is_alive()
    a.close()
    thread.join(5)
    assert not thread.is_alive()
    before = a.path.read_bytes()
    for write in (lambda: a.append(log("late")), lambda: a.append_many([log("late")]), a.reserve):
        with pytest.raises(ValueError, match="closed"):
            write()
    a.close()  # a second close is harmless
    assert a.path.read_bytes() == before and a.count == 1


def test_close_keeps_the_log_open_while_held_rows_cannot_be_written(tmp_path, monkeypatch):
    a = AuditLog(tmp_path / "audit.jsonl", RUN, FakeClock())
    real = audit_mod._write_durably
    failing = [True]

    def write(path, data):
        if failing:
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(audit_mod, "_write_durably", write)
    with pytest.raises(AuditWriteError, match="No space left"):
        a.append(log("held"))
    with pytest.raises(AuditWriteError, match="No space left"):
        a.close()
    failing.clear()
    a.append(log("after"))  # still open: the held row goes first
    a.close()
    assert [r["content"]["content"][0] for r in read_entries(a.path)] == ["held", "after"]


def test_the_writer_thread_ends_when_the_log_is_dropped(tmp_path, monkeypatch):
    seen = spy_writes(monkeypatch)
    a = AuditLog(tmp_path / "audit.jsonl", RUN, FakeClock())
    a.append(log("one"))
    thread = seen[0][0]
    seen.clear()
    del a
    gc.collect()
    thread.join(5)
    assert not thread.is_alive()  # sessions opened and dropped (tests, the CLI) leave no idle threads
