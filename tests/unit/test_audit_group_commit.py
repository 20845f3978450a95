"""Group commit in the audit log: concurrent writers share fsyncs, and still nothing is lost,
reordered or acknowledged before it is on disk."""

from __future__ import annotations

import errno
import json
import threading

import pytest

import rebench_tui.trajectory.audit as audit_mod
from rebench_tui.clock import FakeClock, SystemClock
from rebench_tui.trajectory.audit import AuditLog, genesis_hash, line_hash, read_entries, validate_file
from rebench_tui.trajectory.entries import log

RUN = 4242


def chain_ok(path) -> bool:
    prev = genesis_hash(RUN)
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            row = json.loads(line)
            claimed, actual = line_hash(line)
            if row["prevHash"] != prev or claimed != actual:
                return False
            prev = claimed
    return True


def test_concurrent_writers_lose_nothing_and_keep_each_writers_order(tmp_path):
    a = AuditLog(tmp_path / "audit.jsonl", RUN, SystemClock(), usage=lambda: 1.0)
    n_threads, per = 12, 150
    returned: dict[int, list[dict]] = {k: [] for k in range(n_threads + 2)}
    go = threading.Barrier(n_threads + 2)

    def one(k: int) -> None:
        go.wait()
        for i in range(per):
            returned[k].append(a.append(log(f"w{k} r{i}", {"w": k, "i": i})))

    def many(k: int) -> None:
        go.wait()
        for b in range(10):
            a.append_many([log(f"w{k} b{b} r{i}", {"w": k, "i": b * 20 + i}) for i in range(20)])

    threads = [threading.Thread(target=one, args=(k,)) for k in range(n_threads)]
    threads += [threading.Thread(target=many, args=(k,)) for k in (n_threads, n_threads + 1)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = read_entries(a.path)
    total = n_threads * per + 2 * 200
    assert len(rows) == total == a.count
    assert validate_file(a.path) == []  # contract and strictly increasing calledAt
    assert chain_ok(a.path)
    for k in range(n_threads + 2):  # each writer's rows appear once each, in the order it wrote them
        mine = [r["content"]["content"][1]["i"] for r in rows if r["content"]["content"][1]["w"] == k]
        assert mine == list(range(len(mine))) and len(mine) == (per if k < n_threads else 200)
    by_hash = {r["hash"]: r for r in rows}
    for k in range(n_threads):  # what append returned is exactly the row the file holds
        for r in returned[k]:
            assert by_hash[r["hash"]] == r
    assert a.batches < total  # fsyncs were shared


def test_one_fsync_acknowledges_every_row_queued_behind_it(tmp_path, monkeypatch):
    """While a write is under way, rows from other writers queue up; the next write takes them all."""
    a = AuditLog(tmp_path / "audit.jsonl", RUN, FakeClock())
    real = audit_mod._write_durably
    calls: list[int] = []
    first_started = threading.Event()
    release = threading.Event()

    def slow_write(path, data):
        calls.append(data.count(b"\n"))
        if len(calls) == 1:
            first_started.set()
            assert release.wait(10)
        real(path, data)

    monkeypatch.setattr(audit_mod, "_write_durably", slow_write)
    done = []
    leader = threading.Thread(target=lambda: done.append(a.append(log("first"))))
    leader.start()
    assert first_started.wait(10)
    followers = [threading.Thread(target=lambda i=i: done.append(a.append(log(f"f{i}")))) for i in range(8)]
    for t in followers:
        t.start()
    while a._queued < 9:  # all eight are queued behind the write under way, none acknowledged
        threading.Event().wait(0.01)
    assert len(done) == 0 and read_entries(a.path) == []
    release.set()
    for t in [leader, *followers]:
        t.join(10)
    assert calls == [1, 8] and a.batches == 2
    assert len(read_entries(a.path)) == 9 and chain_ok(a.path)


def test_a_failed_write_keeps_the_rows_queued_and_the_chain_whole(tmp_path, monkeypatch):
    a = AuditLog(tmp_path / "audit.jsonl", RUN, FakeClock())
    a.append(log("before"))
    real = audit_mod._write_durably
    failures = [OSError(errno.ENOSPC, "No space left on device")]

    def failing_write(path, data):
        if failures:
            with open(path, "ab") as fh:  # a partial line reached the disk before the failure
                fh.write(data[: len(data) // 2])
            raise failures.pop()
        real(path, data)

    # the real writer cuts the file back on failure; this fake wrote half a line, so cut as the real one does
    monkeypatch.setattr(audit_mod, "_write_durably", lambda p, d: _cut_back_on_error(p, d, failing_write))
    with pytest.raises(Exception):
        a.append(log("fails once"))
    assert len(read_entries(a.path)) == 1  # no half line left behind
    a.append(log("after"))  # the waiting row goes first, then this one
    texts = [r["content"]["content"][0] for r in read_entries(a.path)]
    assert texts == ["before", "fails once", "after"]
    assert chain_ok(a.path) and validate_file(a.path) == []


def _cut_back_on_error(path, data, write):
    size = path.stat().st_size if path.exists() else 0
    try:
        write(path, data)
    except OSError:
        with open(path, "r+b") as fh:
            fh.truncate(size)
        raise


def test_write_durably_cuts_back_a_partial_write(tmp_path, monkeypatch):
    path = tmp_path / "log"
    path.write_bytes(b"whole line\n")
    real_fsync = audit_mod.os.fsync
    calls = []

    def fsync_fails_once(fd):
        calls.append(fd)
        if len(calls) == 1:
            raise OSError(errno.EIO, "I/O error")
        real_fsync(fd)

    monkeypatch.setattr(audit_mod.os, "fsync", fsync_fails_once)
    with pytest.raises(OSError):
        audit_mod._write_durably(path, b"half of a new line\n")
    assert path.read_bytes() == b"whole line\n"


def test_rows_returned_are_the_redacted_rows_on_disk(tmp_path):
    a = AuditLog(tmp_path / "audit.jsonl", RUN, FakeClock(), redact=lambda t: t.replace("hunter2", "[redacted:PW]"))
    row = a.append(log("the password is hunter2"))
    plain = a.append(log("nothing secret"))
    on_disk = read_entries(a.path)
    assert on_disk == [row, plain]
    assert "hunter2" not in a.path.read_text()


def test_interleaved_bursts_keep_their_own_order_and_let_other_writers_in(tmp_path, monkeypatch):
    monkeypatch.setattr(audit_mod, "CHUNK", 8)
    a = AuditLog(tmp_path / "audit.jsonl", RUN, SystemClock())

    class CountingLock:
        def __init__(self, inner):
            self.inner, self.taken = inner, 0

        def __enter__(self):
            self.inner.acquire()
            self.taken += 1

        def __exit__(self, *exc):
            self.inner.release()

    a._lock = CountingLock(a._lock)
    assert a.append_many([log(f"b{i}") for i in range(200)], interleave=True) == 200
    assert a._lock.taken == 25  # the lock was let go between chunks of 8
    a._lock.taken = 0
    a.append_many([log(f"c{i}") for i in range(200)])
    assert a._lock.taken == 1  # consecutive by default

    # and with a writer really appending meanwhile: every row once, each writer's order kept
    a._lock = a._lock.inner
    stop = threading.Event()
    keys = []

    def presses():
        while not stop.is_set():
            keys.append(a.append(log("key press")))

    t = threading.Thread(target=presses)
    t.start()
    for _ in range(5):
        a.append_many([log(f"d{i}") for i in range(400)], interleave=True)
    stop.set()
    t.join(10)
    texts = [r["content"]["content"][0] for r in read_entries(a.path)]
    assert [x for x in texts if x.startswith("d")] == [f"d{i}" for i in range(400)] * 5
    assert texts.count("key press") == len(keys)
    assert chain_ok(a.path) and validate_file(a.path) == []


def test_a_burst_without_interleave_stays_consecutive(tmp_path):
    a = AuditLog(tmp_path / "audit.jsonl", RUN, FakeClock())
    with a._lock:  # as StateCommit holds it: the rows and the count it wrote must agree
        before = a.count
        a.append_many([log(f"r{i}") for i in range(300)])
        assert a.count == before + 300
    assert [r["content"]["content"][0] for r in read_entries(a.path)] == [f"r{i}" for i in range(300)]


def test_a_writer_is_acknowledged_without_waiting_for_rows_queued_behind_it(tmp_path, monkeypatch):
    """A caller returns once its own batch is durable; rows queued during that write go to disk in
    the next batch. Both writes happen on the log's one writer thread."""
    a = AuditLog(tmp_path / "audit.jsonl", RUN, FakeClock())
    real = audit_mod._write_durably
    started = [threading.Event(), threading.Event()]
    release = [threading.Event(), threading.Event()]
    writers: list[str] = []

    def gated_write(path, data):
        k = len(writers)
        writers.append(threading.current_thread().name)
        if k < 2:
            started[k].set()
            assert release[k].wait(10)
        real(path, data)

    monkeypatch.setattr(audit_mod, "_write_durably", gated_write)
    done: list[str] = []
    first = threading.Thread(target=lambda: done.append(a.append(log("first"))["content"]["content"][0]), name="first")
    first.start()
    assert started[0].wait(10)
    second = threading.Thread(target=lambda: done.append(a.append(log("second"))["content"]["content"][0]))
    second.start()
    while a._queued < 2:
        threading.Event().wait(0.01)
    release[0].set()  # the first write finishes; "second" is queued and needs a write of its own
    first.join(10)
    assert not first.is_alive() and done == ["first"]  # acknowledged while the second write is held
    assert started[1].wait(10) and writers == ["audit-writer_0", "audit-writer_0"]
    release[1].set()
    second.join(10)
    assert done == ["first", "second"]
    assert [r["content"]["content"][0] for r in read_entries(a.path)] == ["first", "second"] and chain_ok(a.path)


def test_flush_writes_rows_held_by_a_failed_write(tmp_path, monkeypatch):
    a = AuditLog(tmp_path / "audit.jsonl", RUN, FakeClock())
    real = audit_mod._write_durably
    fail = [True]

    def once(path, data):
        if fail:
            fail.pop()
            raise OSError(errno.ENOSPC, "No space left on device")
        real(path, data)

    monkeypatch.setattr(audit_mod, "_write_durably", once)
    with pytest.raises(audit_mod.AuditWriteError, match="No space left"):
        a.append(log("held"))
    assert read_entries(a.path) == []
    a.flush()  # nothing new queued: the flush itself writes the held row
    assert [r["content"]["content"][0] for r in read_entries(a.path)] == ["held"] and chain_ok(a.path)
