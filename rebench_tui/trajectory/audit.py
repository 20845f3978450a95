"""The append-only audit log: one Vivaria trace entry per line, fsynced before it counts.

Ordering: the chain orders the rows; ``calledAt`` is when each fact was observed (a file
event's time from the watcher, the moment a row is written otherwise), never a synthesized
sequence, so rows written in one millisecond share it: it never decreases down the file and is
never later than the moment the row was written. A long operation (a scoring) may reserve its
start time with :meth:`AuditLog.reserve` (a reserved time is a row's own: no other row has it);
rows appended while a reservation is open get later times and go to a fsynced side journal
(``<log>.pending``), and are moved into the log, in order, right after the reserved row is
written. A crash in between loses nothing: the journal is merged when the log is opened again.

The end: once the log holds a session's finish row, it takes no other row (:class:`RecordClosed`).

Tamper evidence: every row in the log carries top-level ``prevHash`` (the previous row's hash;
for the first row, ``sha256("rebench-audit:<runId>")``) and, last on its line, ``hash``: the
sha256 of the line's own bytes up to and including ``,"hash":"``. Any changed byte, deleted
row or swapped pair breaks the chain (:mod:`rebench_tui.trajectory.verify` finds where).
Rows waiting in the side journal are chained when they move into the log.

One writer thread: a row is validated and given its random index first, then stamped, chained
and queued under the log's lock (so file order, ``calledAt`` order and the chain agree). The
log's writer thread (a one-thread executor: its tasks run one at a time, in the order they were
asked for) has one task, a write: it takes everything queued at that moment and writes it with
one ``write`` and one ``fsync``. A caller that has queued rows waits for the write that will
take them: the next one that has not started yet, or a new one. So rows queued while a write is
under way go together in the next, concurrent writers (the file recorder, the command collector,
the clock, a scoring) share fsyncs, and no call returns before its own row is on disk. If a
write fails (a full disk), the file is cut back to its last whole line, the lines are held in
order and go first in the next write. Every caller whose rows that write carried gets the error;
nothing is acknowledged before it is on disk. :meth:`AuditLog.flush` waits for everything queued
and retries held rows; :meth:`AuditLog.close` flushes and ends the writer thread.
"""

from __future__ import annotations

import json
import os
import secrets
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from ..clock import Clock
from ..errors import RebenchError, SessionError
from .audit_journal import aside_path, unannounced
from .audit_lines import (HASH_KEY, Redact, _chain, chain_line, escape_surrogates, genesis_hash, line_hash, read_entries,
                          validate_file)
from .entries import MAX_INDEX, content_dict, is_finish

__all__ = ["HASH_KEY", "AuditLog", "AuditWriteError", "RecordClosed", "chain_line", "escape_surrogates", "genesis_hash",
           "line_hash", "read_entries", "validate_file"]
UsageFn = Callable[[], float | None]
CHUNK = 64  # rows queued per turn of the lock by append_many(interleave=True)


class AuditWriteError(RebenchError):
    """The audit log could not be written (a full disk, a read-only folder)."""


class RecordClosed(SessionError):
    """The session is finished: its audit log ends with the finish row and takes no other."""

    def __init__(self, session: str, line: int | None = None) -> None:
        self.session, self.line = session, line
        where = f" (line {line})" if line else ""
        super().__init__(f"session {session} is finished: its audit log ends with the finish row{where}, and nothing "
                         "more is written to it", kept="every record of the session, unchanged",
                         fix=f"read it with `rebench-tui verify {session}`, `rebench-tui export {session}` or "
                             "`rebench-tui compare`; start a new session (`rebench-tui start ENV`) to keep working")


def _fsync_append(path: Path, lines: list[str]) -> None:
    if not lines:
        return
    with open(path, "a", encoding="utf-8") as fh:
        fh.write("".join(lines))
        fh.flush()
        os.fsync(fh.fileno())


def _write_durably(path: Path, data: bytes) -> None:
    """Append ``data`` and fsync; on failure cut the file back to where it was, then raise."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        start = os.fstat(fd).st_size
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        except BaseException:
            try:  # no half line may stay behind for the retry to append to
                os.ftruncate(fd, start)
                os.fsync(fd)
            except OSError:
                pass
            raise
    finally:
        os.close(fd)


class AuditLog:
    def __init__(self, path: Path, run_id: int, clock: Clock, usage: UsageFn | None = None,
                 redact: Redact | None = None, held: tuple[int, ...] = ()) -> None:
        """``held``: reservations (``calledAt``) made before a crash and kept by their owner (a
        scoring that was running): unless a row already has that time, each stays open, and the
        rows that waited behind it stay in the side journal until it is filled."""
        self.path = path
        self._redact = redact
        self.pending_path = path.with_name(path.name + ".pending")
        self.run_id = run_id
        self._clock = clock
        self._usage = usage or (lambda: None)
        self._lock = threading.RLock()  # stamping, chaining and queueing happen under it, in one order
        self._open: set[int] = set()
        self._last_called = 0
        self._last_hash = genesis_hash(run_id)
        self.count = 0  # rows in the log, counting rows queued for the writer
        self._qlock = threading.Lock()  # guards _queue: callers add to it, the writer takes it whole
        self._queue: list[str] = []  # chained lines not yet taken by a write
        self._next: Future[None] | None = None  # the write that will take _queue (scheduled, not started)
        self._held: list[str] = []  # lines of a failed write, written first by the next one (writer thread only)
        self._queued = 0  # rows queued so far (a count, for tests)
        self.batches = 0  # writes done (one write and one fsync each)
        self.on_written: list[Callable[[], None]] = []  # called on the writer thread after each write (a study's witness)
        self._closed = False
        self.finished_line: int | None = None  # the finish row's line: the log takes no row after it
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="audit-writer")
        times = set()
        for row in read_entries(path):
            self._last_called = max(self._last_called, int(row["calledAt"]))
            self._last_hash = row.get("hash", self._last_hash)
            self.count += 1
            times.add(int(row["calledAt"]))
            if self.finished_line is None and is_finish(row.get("content")):
                self.finished_line = self.count
        self._may_wait = {int(c) for c in held}  # the only results the journal may hold at an open
        if not self._hold(held, times):
            self._merge_pending(opening=True)

    def _hold(self, held: tuple[int, ...], times: set[int]) -> bool:
        """Keep ``held`` reservations open (those no row has filled); whether any is."""
        if not held:
            return False
        waiting = [int(r["calledAt"]) for r in read_entries(self.pending_path)]
        self._open = {int(c) for c in held} - times - set(waiting)
        if self._open:  # new rows go after those waiting; all are merged once these are filled
            self._last_called = max([self._last_called, *waiting, *self._open])
        return bool(self._open)

    def _enqueue(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Chain rows and queue them for the writer (caller holds ``_lock``); returns the rows as
        written (with their hashes). No write is asked for until someone waits (``_wait_durable``),
        so a burst queued in chunks goes to disk in one write, not one per chunk."""
        lines = []
        written = []
        for row in rows:
            prev = self._last_hash
            line, self._last_hash, redacted = _chain(row, prev, self._redact)
            lines.append(line)
            # the row as the file has it: parsed back only where redaction changed it
            written.append(json.loads(line) if redacted else {**row, "prevHash": prev, "hash": self._last_hash})
        with self._qlock:
            self._queue.extend(lines)
            self._queued += len(lines)
        self.count += len(lines)
        return written

    def _schedule(self) -> Future[None]:
        """The write that will take what is queued now: the scheduled one that has not started
        yet, or a new one (caller holds ``_qlock``)."""
        if self._next is None:
            self._next = self._writer.submit(self._write_queued)
        return self._next

    def _write_queued(self) -> None:
        """The writer thread's one task: write the held lines, then everything queued, with one
        ``write`` and one ``fsync``. On failure the lines are held, in order, for the next write."""
        with self._qlock:
            lines, self._queue = self._queue, []
            self._next = None  # rows queued from now on need another write
        lines, self._held = self._held + lines, []
        if not lines:
            return
        try:
            _write_durably(self.path, "".join(lines).encode("utf-8"))
        except BaseException:
            self._held = lines
            raise
        self.batches += 1
        for fn in list(self.on_written):  # it only wakes whoever sends the rows on; the write has succeeded
            try:
                fn()
            except Exception:  # noqa: BLE001 - a listener's trouble is not the write's
                pass

    def _wait_durable(self) -> None:
        """Return once every row queued before this call is on disk; raise if the write that
        carried them failed. Called outside ``_lock``, so others queue rows meanwhile."""
        with self._qlock:
            write = self._schedule()
        try:
            write.result()
        except OSError as exc:
            raise self._write_error(exc, len(self._held)) from exc

    def _write_error(self, exc: OSError, n: int) -> AuditWriteError:
        return AuditWriteError(
            f"the audit log {self.path} could not be written: {exc.strerror or exc}",
            kept=f"every row written before (the log was cut back to its last whole line); "
                 f"{n} new row(s) wait in memory and are written by the next successful write",
            fix="free disk space or make the session folder writable, then keep working (the next record "
                "retries); do not quit before a write succeeds, or the waiting rows are lost")

    def flush(self) -> None:
        """Wait until every row queued so far is durable (and retry rows held by a failed write)."""
        if not self._closed:  # close wrote everything, and nothing can be queued since
            self._wait_durable()

    def close(self) -> None:
        """Flush, then end the writer thread. If the flush fails the log stays open (nothing held
        is dropped), so the caller can free space and close again. Writing after close is an error."""
        with self._lock:
            if self._closed:
                return
            self.flush()
            self._closed = True
        self._writer.shutdown(wait=True)

    @property
    def finished(self) -> bool:
        """Whether the log holds the session's finish row (it then takes no other)."""
        return self.finished_line is not None

    def _check_open(self) -> None:  # caller holds _lock
        if self._closed:
            raise ValueError(f"the audit log {self.path} is closed")
        if self.finished_line is not None:
            raise RecordClosed(self.path.parent.name, self.finished_line)

    def _note_finish(self, rows: list[dict[str, Any]]) -> None:  # caller holds _lock, rows just queued
        for i, row in enumerate(rows):
            if is_finish(row["content"]):
                self.finished_line = self.count - len(rows) + i + 1
                return

    def _commit(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Chain and append rows durably (caller holds ``_lock``); returns them with their hashes."""
        written = self._enqueue(rows)
        self._wait_durable()
        return written

    # -- time ---------------------------------------------------------------------------
    def _next_called_at(self, at_ms: int | None = None) -> int:
        """When a row's fact was observed: ``at_ms`` (an event's own time) or now, never later than
        now, never before the row before it (the chain keeps the order; rows may share a
        millisecond), and never a reserved time, which is the reserved row's own."""
        now = int(self._clock.time() * 1000)
        called = max(now if at_ms is None else min(int(at_ms), now), self._last_called)
        while called in self._open:
            called += 1
        self._last_called = called
        return called

    @staticmethod
    def _prepare(content: BaseModel | dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """What a row needs that is not ordered: its random index and its validated content. Done
        before taking the log's lock, so writers hold it only to stamp times and chain (and the
        random draw, a syscall that lets go of the GIL, does not stall the others holding it)."""
        return secrets.randbelow(MAX_INDEX) + 1, content_dict(content)

    def _row(self, prepared: tuple[int, dict[str, Any]], called_at: int, usage: float | None) -> dict[str, Any]:
        index, checked = prepared
        entry = {
            "runId": self.run_id,
            "index": index,
            "agentBranchNumber": 0,
            "calledAt": called_at,
            "modifiedAt": max(called_at, int(self._clock.time() * 1000)),
            "usageTotalSeconds": None if usage is None else int(usage),
            "content": checked,
        }
        if usage is not None:
            entry["workingMs"] = int(round(usage * 1000))  # pause-excluded working time, to the ms
        return entry

    def _plain(self, row: dict[str, Any]) -> str:
        text = escape_surrogates(json.dumps(row, ensure_ascii=False, allow_nan=False, separators=(",", ":")))
        return (self._redact(text) if self._redact is not None else text) + "\n"

    # -- writing ------------------------------------------------------------------------
    def append(self, content: BaseModel | dict[str, Any]) -> dict[str, Any]:
        """Write one row durably; returns it. Goes to the side journal while a reservation is open."""
        prepared = self._prepare(content)
        with self._lock:
            self._check_open()
            row = self._row(prepared, self._next_called_at(), self._usage())
            if self._open:
                _fsync_append(self.pending_path, [self._plain(row)])
                return row
            written = self._enqueue([row])
            self._note_finish(written)
        self._wait_durable()  # outside the lock: other writers queue rows into the same write meanwhile
        return written[0]

    def append_many(self, contents: list[BaseModel | dict[str, Any]], *, interleave: bool = False,
                    seen_ms: list[int | None] | None = None) -> int:
        """Write several rows with one fsync (a burst of file events).

        ``seen_ms``: when each row's fact was observed (a file event's time), its ``calledAt``
        (:meth:`_next_called_at`); None for now. The rows are consecutive in the log unless
        ``interleave``: then they are queued in chunks of ``CHUNK``, and the log's lock is let go
        between chunks, so a writer that waits for it (a key press on the screen's thread) waits
        for one chunk, not for a burst of thousands. Either way the call returns once all its rows
        are durable."""
        step = CHUNK if interleave else max(1, len(contents))
        seen = list(seen_ms) if seen_ms is not None else [None] * len(contents)
        queued = False
        for at in range(0, len(contents), step):
            prepared = [self._prepare(c) for c in contents[at:at + step]]
            with self._lock:
                self._check_open()
                usage = self._usage()
                rows = [self._row(p, self._next_called_at(t), usage) for p, t in zip(prepared, seen[at:at + step])]
                if self._open:
                    _fsync_append(self.pending_path, [self._plain(r) for r in rows])
                    continue
                self._note_finish(self._enqueue(rows))
                queued = True
        if queued:  # one write takes every chunk queued before it (and whatever others queued)
            self._wait_durable()
        return len(contents)

    def is_held(self, called_at: int) -> bool:
        """Whether a reservation (its ``calledAt``) is still open, waiting for its row."""
        with self._lock:
            return called_at in self._open

    def reserve(self) -> tuple[int, float | None]:
        """Reserve a ``calledAt`` for a row written later; returns (calledAt, working seconds then)."""
        with self._lock:
            self._check_open()
            called = max(int(self._clock.time() * 1000), self._last_called + 1)  # no row before has it
            while called in self._open:
                called += 1
            self._last_called = called
            self._open.add(called)
            return called, self._usage()

    def fill(self, reservation: tuple[int, float | None], content: BaseModel | dict[str, Any]) -> dict[str, Any]:
        """Write the reserved row, then move any rows that waited behind it into the log."""
        called, usage = reservation
        with self._lock:
            self._check_open()
            if called not in self._open:
                raise ValueError(f"no open reservation at {called}")
            row = self._row(self._prepare(content), called, usage)
            self._open.discard(called)
            if not self._open and not self.pending_path.exists():
                written = self._commit([row])
                self._note_finish(written)
                return written[0]
            # rows wait in the journal; merged in calledAt order once nothing is reserved
            _fsync_append(self.pending_path, [self._plain(row)])
            if not self._open:
                self._merge_pending()
            return row

    def _merge_pending(self, opening: bool = False) -> None:
        if not self.pending_path.exists():
            return
        with open(self.pending_path, encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        refused: list[dict[str, Any]] = []
        if opening:  # written by no one this process knows of: only what the chain can check is taken
            rows, refused = unannounced(rows, self._may_wait)
        # Journal rows were given times after every row already in the log, but reserved rows
        # filled out of turn can interleave: sort by calledAt, then chain them into the log.
        rows.sort(key=lambda r: r["calledAt"])  # stable: rows of one millisecond keep their order
        if refused:
            aside = aside_path(self.pending_path)
            aside.write_text("".join(json.dumps(r) + "\n" for r in refused), encoding="utf-8")
            rows.append(self._row(self._prepare({
                "type": "error", "from": "server", "trace": None, "extra": None,
                "detail": f"{len(refused)} row(s) in the side journal were not taken into the log: a scoring's result "
                          f"is taken from it only for a scoring that was running (its reserved time), and a scoring's "
                          f"start never waits there; kept aside in {aside.name}"}), self._next_called_at(), self._usage()))
        self._note_finish(self._commit(rows))
        for r in rows:
            self._last_called = max(self._last_called, r["calledAt"])
        os.unlink(self.pending_path)
