# A candidate measured beside the writer thread and not taken: no writer thread, the caller holding a write lock writes
# everything queued (see benchmarks/README.md, 2026-12-03). A copy of audit.py as of commit 114f245 with only the
# writer changed; for bench_audit.py --audit-module benchmarks/baseline/audit_write_lock.py. Not imported by the package.
"""The append-only audit log: one Vivaria trace entry per line, fsynced before it counts.

Ordering: ``calledAt`` is strictly increasing in file order. A long operation (a scoring) may
reserve its start time with :meth:`AuditLog.reserve`; rows appended while a reservation is open
get later times and go to a fsynced side journal (``<log>.pending``), and are moved into the
log, in order, right after the reserved row is written. A crash in between loses nothing: the
journal is merged when the log is opened again.

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

import hashlib
import json
import os
import re
import secrets
import threading
from concurrent.futures import Future, ThreadPoolExecutor  # noqa: F401 - unused in this candidate
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from ..clock import Clock
from ..errors import RebenchError
from .entries import MAX_INDEX, TraceEntry, content_dict

UsageFn = Callable[[], float | None]
CHUNK = 64  # rows queued per turn of the lock by append_many(interleave=True)
HASH_KEY = ',"hash":"'


def genesis_hash(run_id: int) -> str:
    return hashlib.sha256(f"rebench-audit:{run_id}".encode()).hexdigest()


Redact = Callable[[str], str]


_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    """JSON text with lone surrogates (a file name that is not UTF-8, decoded by the OS layer with
    surrogateescape) written as ``\\udcXX`` escapes: valid JSON and UTF-8, and it reads back the same."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


class AuditWriteError(RebenchError):
    """The audit log could not be written (a full disk, a read-only folder)."""


def chain_line(row: dict[str, Any], prev_hash: str, redact: Redact | None = None) -> tuple[str, str]:
    """Serialize a row with ``prevHash`` and a trailing ``hash`` of the line's own bytes."""
    line, digest, _redacted = _chain(row, prev_hash, redact)
    return line, digest


def _chain(row: dict[str, Any], prev_hash: str, redact: Redact | None) -> tuple[str, str, bool]:
    """:func:`chain_line`, also saying whether redaction changed the text."""
    body = {k: v for k, v in row.items() if k not in ("prevHash", "hash")}
    body["prevHash"] = prev_hash
    text = escape_surrogates(json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")))
    redacted = False
    if redact is not None:
        clean = redact(text)  # secret values never reach the file (the hash covers the redacted bytes)
        redacted, text = clean != text, clean
    prefix = text[:-1] + HASH_KEY
    digest = hashlib.sha256(prefix.encode("utf-8")).hexdigest()
    return prefix + digest + '"}\n', digest, redacted


def line_hash(line: str) -> tuple[str | None, str | None]:
    """(claimed hash, recomputed hash) of one log line; (None, None) if it has no hash field."""
    text = line.rstrip("\n")
    at = text.rfind(HASH_KEY)
    if at < 0:
        return None, None
    prefix = text[: at + len(HASH_KEY)]
    rest = text[at + len(HASH_KEY):]
    claimed = rest[:-2] if rest.endswith('"}') else rest
    return claimed, hashlib.sha256(prefix.encode("utf-8")).hexdigest()


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


def read_entries(path: Path) -> list[dict[str, Any]]:
    """Every row of an audit log as plain dicts (no validation)."""
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


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
        self._wlock = threading.Lock()  # one write at a time: its holder writes everything queued
        self._durable = 0  # rows queued so far that are on disk (guarded by _wlock)
        self._held: list[str] = []  # lines of a failed write, written first by the next one (writer thread only)
        self._queued = 0  # rows queued so far (a count, for tests)
        self.batches = 0  # writes done (one write and one fsync each)
        self._closed = False
        times = set()
        for row in read_entries(path):
            self._last_called = max(self._last_called, int(row["calledAt"]))
            self._last_hash = row.get("hash", self._last_hash)
            self.count += 1
            times.add(int(row["calledAt"]))
        if not self._hold(held, times):
            self._merge_pending()

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

    def _wait_durable(self) -> None:
        """Return once every row queued before this call is on disk. Whoever gets the write lock
        first writes everything queued (after rows a failed write held); the others then find
        their rows written. Raises if the write that was to carry this caller's rows failed."""
        with self._qlock:
            mine = self._queued
        with self._wlock:
            if self._durable >= mine:
                return
            with self._qlock:
                lines, self._queue = self._held + self._queue, []
                upto = self._queued
            try:
                _write_durably(self.path, "".join(lines).encode("utf-8"))
            except BaseException as exc:
                self._held = lines
                if isinstance(exc, OSError):
                    raise self._write_error(exc, len(lines)) from exc
                raise
            self._held = []
            self._durable = upto
            self.batches += 1

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
        with self._lock:
            self.flush()
            self._closed = True

    def _check_open(self) -> None:  # caller holds _lock
        if self._closed:
            raise ValueError(f"the audit log {self.path} is closed")

    def _commit(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Chain and append rows durably (caller holds ``_lock``); returns them with their hashes."""
        written = self._enqueue(rows)
        self._wait_durable()
        return written

    # -- time ---------------------------------------------------------------------------
    def _next_called_at(self, at_ms: int | None = None) -> int:
        now = int(self._clock.time() * 1000) if at_ms is None else at_ms
        self._last_called = max(now, self._last_called + 1)
        return self._last_called

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
        self._wait_durable()  # outside the lock: other writers queue rows into the same write meanwhile
        return written[0]

    def append_many(self, contents: list[BaseModel | dict[str, Any]], *, interleave: bool = False) -> int:
        """Write several rows with one fsync (a burst of file events).

        The rows are consecutive in the log unless ``interleave``: then they are queued in chunks
        of ``CHUNK``, and the log's lock is let go between chunks, so a writer that waits for it
        (a key press on the screen's thread) waits for one chunk, not for a burst of thousands.
        Either way the call returns once all its rows are durable."""
        step = CHUNK if interleave else max(1, len(contents))
        queued = False
        for at in range(0, len(contents), step):
            prepared = [self._prepare(c) for c in contents[at:at + step]]
            with self._lock:
                self._check_open()
                usage = self._usage()
                rows = [self._row(p, self._next_called_at(), usage) for p in prepared]
                if self._open:
                    _fsync_append(self.pending_path, [self._plain(r) for r in rows])
                    continue
                self._enqueue(rows)
                queued = True
        if queued:  # one write takes every chunk queued before it (and whatever others queued)
            self._wait_durable()
        return len(contents)

    def reserve(self) -> tuple[int, float | None]:
        """Reserve a ``calledAt`` for a row written later; returns (calledAt, working seconds then)."""
        with self._lock:
            self._check_open()
            called = self._next_called_at()
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
                return self._commit([row])[0]
            # rows wait in the journal; merged in calledAt order once nothing is reserved
            _fsync_append(self.pending_path, [self._plain(row)])
            if not self._open:
                self._merge_pending()
            return row

    def _merge_pending(self) -> None:
        if not self.pending_path.exists():
            return
        with open(self.pending_path, encoding="utf-8") as fh:
            rows = [json.loads(line) for line in fh if line.strip()]
        # Journal rows were given times after every row already in the log, but reserved rows
        # filled out of turn can interleave: sort by calledAt, then chain them into the log.
        rows.sort(key=lambda r: r["calledAt"])
        self._commit(rows)
        for r in rows:
            self._last_called = max(self._last_called, r["calledAt"])
        os.unlink(self.pending_path)


def validate_file(path: Path) -> list[tuple[int, str]]:
    """Check every line against the trace-entry contract; returns (line number, problem) pairs."""
    problems: list[tuple[int, str]] = []
    last = -1
    run_id = None
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            try:
                row = json.loads(line)
                entry = TraceEntry.model_validate(row)
            except Exception as exc:  # noqa: BLE001 - every failure is a finding
                problems.append((n, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
                continue
            if entry.calledAt <= last:
                problems.append((n, f"calledAt {entry.calledAt} is not after the previous row's {last}"))
            last = entry.calledAt
            if run_id is None:
                run_id = entry.runId
            elif entry.runId != run_id:
                problems.append((n, f"runId {entry.runId} differs from the first row's {run_id}"))
    return problems
