"""The researcher's reads of the collector's database: sessions, their figures, start rows,
scorings and pages of rows, on a connection of their own that never writes. In WAL mode a
reader neither waits for the writers nor holds them up; the collector's view process opens one
of these on the same file (``views``), and ``Ledger`` keeps one for the reads it answers itself."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path
from typing import Any

from ..trajectory.entries import FINISH_EVENT
from ..trajectory.rules import START_EVENT


class LedgerReader:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        self._conn.row_factory = sqlite3.Row
        self._conn.execute("PRAGMA query_only=ON")
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def _view(self, sql: str, params: list[Any]) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(r) for r in self._conn.execute(sql, params)]

    def rows(self, session_id: str, start: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Witnessed rows from ``start`` on (at most ``limit`` of them)."""
        return self._view("SELECT n, called_at, written_at, working_ms, kind, event, hash, prev_hash, line, received_at "
                          "FROM audit_rows WHERE session_id = ? AND n >= ? ORDER BY n LIMIT ?",
                          [session_id, start, -1 if limit is None else limit])

    def sessions(self) -> list[dict[str, Any]]:
        return self._view("SELECT * FROM sessions ORDER BY created_at", [])

    def figures(self, gap_ms: int) -> dict[str, dict[str, Any]]:
        """Each session's figures, computed by the database from the rows' stored numbers (no row
        text; one pass over the rows): rows, finished, the last working time and receive time,
        and the rows that arrived more than ``gap_ms`` later than the session's quickest row
        (late: received_at - called_at, against its minimum)."""
        rows = self._view(
            "WITH q AS (SELECT session_id, min(received_at - called_at) AS quickest, count(*) AS rows, max(n) AS last_n, "
            "  max(event = ?) AS finished FROM audit_rows GROUP BY session_id) "
            "SELECT q.session_id, q.rows, q.finished, "
            "  (SELECT received_at FROM audit_rows l WHERE l.session_id = q.session_id AND l.n = q.last_n) AS last_received, "
            "  (SELECT working_ms FROM audit_rows w WHERE w.session_id = q.session_id AND w.working_ms IS NOT NULL "
            "   ORDER BY w.n DESC LIMIT 1) AS working_ms, "
            "  (SELECT count(*) FROM audit_rows g WHERE g.session_id = q.session_id "
            "   AND g.received_at - g.called_at - q.quickest > ?) AS gaps, "
            "  (SELECT max(g.received_at - g.called_at) - q.quickest FROM audit_rows g WHERE g.session_id = q.session_id) "
            "   AS longest FROM q", [FINISH_EVENT, gap_ms])
        return {r["session_id"]: r for r in rows}

    def start_line(self, session_id: str) -> str | None:
        """The session's start row as witnessed (None: not witnessed whole, or not yet)."""
        rows = self._view("SELECT line FROM audit_rows WHERE session_id = ? AND event = ? ORDER BY n LIMIT 1",
                          [session_id, START_EVENT])
        return rows[0]["line"] if rows else None

    def scorings(self, session_id: str) -> list[dict[str, Any]]:
        return self._view("SELECT * FROM scorings WHERE session_id = ? ORDER BY n", [session_id])
