"""Watcher state that moves with the audit log, so a crash records nothing twice and loses nothing.

A watcher's state (what the files were, how far the command log was read) and the rows it
derives from it must change together. :meth:`StateCommit.commit` first writes the new state
with the row count the log will have (``<state>.next``, fsynced), then appends the rows (one
fsync), then puts the state in place. :meth:`StateCommit.recover`, run when a session is
opened, finishes a commit the crash cut short: the rows are in the log, so the new state
counts; or they are not, so the old state does and the rows are derived again.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ..safe_write import write_json
from ..trajectory.audit import AuditLog


class StateCommit:
    def __init__(self, audit: AuditLog) -> None:
        self.audit = audit

    def rows_written(self) -> int:
        """Rows in the log plus rows waiting in its side journal (merged into it on reopening)."""
        pending = self.audit.pending_path
        waiting = 0
        if pending.exists():
            with open(pending, encoding="utf-8") as fh:
                waiting = sum(1 for line in fh if line.strip())
        return self.audit.count + waiting

    @staticmethod
    def _next(state_path: Path) -> Path:
        return state_path.with_name(state_path.name + ".next")

    def commit(self, state_path: Path, state: Any, rows: list[dict[str, Any]],
               seen_ms: list[int | None] | None = None) -> None:
        """``seen_ms``: when each row's fact was seen (``AuditLog.append_many``)."""
        if not rows:
            write_json(state_path, state, durable=True)
            return
        nxt = self._next(state_path)
        with self.audit._lock:  # nothing else may append between the count and the rows
            write_json(nxt, {"after": self.rows_written() + len(rows), "state": state}, durable=True)
            self.audit.append_many(rows, seen_ms=seen_ms)
        write_json(state_path, state, durable=True)
        nxt.unlink(missing_ok=True)

    def recover(self, state_path: Path) -> str | None:
        """Finish or drop a commit cut short; returns what was done, or None if there was none."""
        nxt = self._next(state_path)
        if not nxt.exists():
            return None
        try:
            pending = json.loads(nxt.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            nxt.unlink(missing_ok=True)
            return f"{state_path.name}: an unreadable half-written state was dropped (rows are derived again)"
        if self.rows_written() >= pending["after"]:
            write_json(state_path, pending["state"], durable=True)
            nxt.unlink(missing_ok=True)
            return f"{state_path.name}: rows were written before the crash; their state is kept"
        nxt.unlink(missing_ok=True)
        return f"{state_path.name}: rows were not written before the crash; they are derived again"
