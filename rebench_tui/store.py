"""The session index: a SQLite database (sqlite-utils) under the sessions folder.

It is an index for listing, searching and resuming, never the record: every session folder's
``session.json``, ``audit.jsonl`` and ``score_log.csv`` are. :meth:`Store.rebuild` recreates the
index from the folders.

A session's ``final_score`` is the score that counts by ``scoring.counting_attempt`` (the median of
the best attempt's re-scores), as its writers compute it; each score row keeps the attempt
``fingerprint`` it was recorded with (null for older scorings), so re-scores can be grouped here too.
"""

from __future__ import annotations

import json
import math
import sqlite3
import threading
from functools import wraps
from pathlib import Path
from typing import Any, Iterable

import sqlite_utils

INDEX_NAME = "index.db"


def _locked(fn):
    @wraps(fn)
    def inner(self, *a, **kw):
        with self._lock:
            return fn(self, *a, **kw)

    return inner


class Store:
    """Thread-safe: scoring workers and the screen share one connection behind a lock."""

    def __init__(self, sessions_dir: Path) -> None:
        sessions_dir.mkdir(parents=True, exist_ok=True)
        self.path = sessions_dir / INDEX_NAME
        self._lock = threading.RLock()
        # Set when an unreadable index was moved aside and an empty one made: the caller refills it
        # from the session folders (see rebench_tui.session.reindex.open_store).
        self.moved_aside: Path | None = None
        self.broken: str | None = None  # why the last index write failed (the records are unaffected)
        try:
            self._connect()
        except sqlite3.DatabaseError as exc:
            self.moved_aside = self._move_aside(exc)
            self._connect()

    def _connect(self) -> None:
        self.db = sqlite_utils.Database(sqlite3.connect(self.path, check_same_thread=False, timeout=30))
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            check = self.db.execute("PRAGMA quick_check").fetchone()
            if check is None or check[0] != "ok":
                raise sqlite3.DatabaseError(f"integrity check failed: {check}")
            self._ensure()
        except sqlite3.DatabaseError:
            self.db.close()
            raise

    def _move_aside(self, exc: Exception) -> Path:
        n = 0
        while (aside := self.path.with_name(f"{INDEX_NAME}.corrupt-{n}")).exists():
            n += 1
        self.path.replace(aside)
        for suffix in ("-wal", "-shm"):
            self.path.with_name(INDEX_NAME + suffix).unlink(missing_ok=True)
        return aside

    def _write(self, fn) -> None:
        """An index write; a failure (a full disk, a damaged file) is noted, never raised: the
        index is rebuilt from the records, which a failing index must not stop."""
        try:
            fn()
            self.broken = None
        except sqlite3.Error as exc:
            self.broken = str(exc)

    def _ensure(self) -> None:
        if "sessions" not in self.db.table_names():
            self.db["sessions"].create({
                "id": str, "env_id": str, "task_id": str, "profile": str, "runtime": str, "host": str,
                "status": str, "created_at": int, "completed_at": int, "time_limit_s": float,
                "working_s": float, "n_scores": int, "final_score": float, "final_normalized": float,
                "path": str, "meta": str,
            }, pk="id")
            self.db["sessions"].create_index(["env_id"])
            self.db["sessions"].create_index(["status"])
        if "scores" not in self.db.table_names():
            self.db["scores"].create({
                "session_id": str, "attempt": int, "called_at": int, "working_s": float, "score": float,
                "normalized": float, "valid": int, "message": str, "fingerprint": str,
            }, pk=("session_id", "attempt"), foreign_keys=[("session_id", "sessions", "id")])
        elif "fingerprint" not in self.db["scores"].columns_dict:  # an index made before attempts were grouped
            self.db["scores"].add_column("fingerprint", str)

    @_locked
    def upsert_session(self, row: dict[str, Any]) -> None:
        row = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in row.items()}
        self._write(lambda: self.db["sessions"].upsert(row, pk="id", alter=True))

    @_locked
    def add_score(self, session_id: str, attempt: int, called_at: int, working_s: float, score: float,
                  normalized: float, message: dict[str, Any], fingerprint: str | None = None) -> None:
        """One scoring; ``attempt`` is its number in the session, ``fingerprint`` the attempt
        fingerprint of the files it scored (re-scores share it; None: an attempt of its own)."""
        self._write(lambda: self.db["scores"].upsert({
            "session_id": session_id, "attempt": attempt, "called_at": called_at, "working_s": working_s,
            "score": None if not math.isfinite(score) else score,
            "normalized": None if not math.isfinite(normalized) else normalized,
            "valid": int(math.isfinite(score)), "message": json.dumps(message, default=str),
            "fingerprint": fingerprint,
        }, pk=("session_id", "attempt")))

    @_locked
    def sessions(self, *, env_id: str | None = None, status: str | None = None) -> list[dict[str, Any]]:
        where, args = [], []
        if env_id:
            where.append("env_id = ?")
            args.append(env_id)
        if status:
            where.append("status = ?")
            args.append(status)
        return list(self.db["sessions"].rows_where(" and ".join(where) or None, args, order_by="created_at desc"))

    @_locked
    def scores(self, session_id: str) -> list[dict[str, Any]]:
        return list(self.db["scores"].rows_where("session_id = ?", [session_id], order_by="attempt"))

    @_locked
    def get(self, session_id: str) -> dict[str, Any] | None:
        try:
            return self.db["sessions"].get(session_id)
        except sqlite_utils.db.NotFoundError:
            return None

    @_locked
    def close(self) -> None:
        self.db.close()

    @_locked
    def rebuild(self, rows: Iterable[tuple[dict[str, Any], list[dict[str, Any]]]]) -> int:
        """Replace the index with the given (session row, score rows) pairs."""
        n = 0
        with self.db.conn:
            self.db["scores"].delete_where()
            self.db["sessions"].delete_where()
        for session_row, score_rows in rows:
            self.upsert_session(session_row)
            for s in score_rows:
                self.add_score(**s)
            n += 1
        return n
