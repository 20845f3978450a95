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
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
import threading
from pathlib import Path
from typing import Any, Callable

from pydantic import BaseModel

from ..clock import Clock
from .entries import MAX_INDEX, TraceEntry, content_dict

UsageFn = Callable[[], float | None]
HASH_KEY = ',"hash":"'


def genesis_hash(run_id: int) -> str:
    return hashlib.sha256(f"rebench-audit:{run_id}".encode()).hexdigest()


Redact = Callable[[str], str]


def chain_line(row: dict[str, Any], prev_hash: str, redact: Redact | None = None) -> tuple[str, str]:
    """Serialize a row with ``prevHash`` and a trailing ``hash`` of the line's own bytes."""
    body = {k: v for k, v in row.items() if k not in ("prevHash", "hash")}
    body["prevHash"] = prev_hash
    text = json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    if redact is not None:
        text = redact(text)  # secret values never reach the file (the hash covers the redacted bytes)
    prefix = text[:-1] + HASH_KEY
    digest = hashlib.sha256(prefix.encode("utf-8")).hexdigest()
    return prefix + digest + '"}\n', digest


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


def read_entries(path: Path) -> list[dict[str, Any]]:
    """Every row of an audit log as plain dicts (no validation)."""
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


class AuditLog:
    def __init__(self, path: Path, run_id: int, clock: Clock, usage: UsageFn | None = None,
                 redact: Redact | None = None) -> None:
        self.path = path
        self._redact = redact
        self.pending_path = path.with_name(path.name + ".pending")
        self.run_id = run_id
        self._clock = clock
        self._usage = usage or (lambda: None)
        self._lock = threading.RLock()
        self._open: set[int] = set()
        self._last_called = 0
        self._last_hash = genesis_hash(run_id)
        self.count = 0
        for row in read_entries(path):
            self._last_called = max(self._last_called, int(row["calledAt"]))
            self._last_hash = row.get("hash", self._last_hash)
            self.count += 1
        self._merge_pending()

    def _commit(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Chain and append rows to the log with one fsync; returns them with their hashes."""
        lines = []
        written = []
        for row in rows:
            line, self._last_hash = chain_line(row, self._last_hash, self._redact)
            written.append(json.loads(line))
            lines.append(line)
        _fsync_append(self.path, lines)
        self.count += len(lines)
        return written

    # -- time ---------------------------------------------------------------------------
    def _next_called_at(self, at_ms: int | None = None) -> int:
        now = int(self._clock.time() * 1000) if at_ms is None else at_ms
        self._last_called = max(now, self._last_called + 1)
        return self._last_called

    def _row(self, content: BaseModel | dict[str, Any], called_at: int, usage: float | None) -> dict[str, Any]:
        entry = {
            "runId": self.run_id,
            "index": secrets.randbelow(MAX_INDEX) + 1,
            "agentBranchNumber": 0,
            "calledAt": called_at,
            "modifiedAt": max(called_at, int(self._clock.time() * 1000)),
            "usageTotalSeconds": None if usage is None else int(usage),
            "content": content_dict(content),
        }
        if usage is not None:
            entry["workingMs"] = int(round(usage * 1000))  # pause-excluded working time, to the ms
        return entry

    def _plain(self, row: dict[str, Any]) -> str:
        text = json.dumps(row, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        return (self._redact(text) if self._redact is not None else text) + "\n"

    # -- writing ------------------------------------------------------------------------
    def append(self, content: BaseModel | dict[str, Any]) -> dict[str, Any]:
        """Write one row durably; returns it. Goes to the side journal while a reservation is open."""
        with self._lock:
            row = self._row(content, self._next_called_at(), self._usage())
            if self._open:
                _fsync_append(self.pending_path, [self._plain(row)])
                return row
            return self._commit([row])[0]

    def append_many(self, contents: list[BaseModel | dict[str, Any]]) -> int:
        """Write several rows with one fsync (a burst of file events)."""
        with self._lock:
            usage = self._usage()
            rows = [self._row(c, self._next_called_at(), usage) for c in contents]
            if self._open:
                _fsync_append(self.pending_path, [self._plain(r) for r in rows])
            else:
                self._commit(rows)
            return len(rows)

    def reserve(self) -> tuple[int, float | None]:
        """Reserve a ``calledAt`` for a row written later; returns (calledAt, working seconds then)."""
        with self._lock:
            called = self._next_called_at()
            self._open.add(called)
            return called, self._usage()

    def fill(self, reservation: tuple[int, float | None], content: BaseModel | dict[str, Any]) -> dict[str, Any]:
        """Write the reserved row, then move any rows that waited behind it into the log."""
        called, usage = reservation
        with self._lock:
            if called not in self._open:
                raise ValueError(f"no open reservation at {called}")
            row = self._row(content, called, usage)
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
