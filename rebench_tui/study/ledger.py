"""The collector's database: participants and their tokens, and every witnessed audit row,
append-only. One ``Ledger`` per database file; its methods are safe to call from the HTTP
server's threads (one lock, one connection for the writes; reads on a ``LedgerReader``)."""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import secrets
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any, Callable

import sqlite_utils

from ..errors import RebenchError
from pydantic import ValidationError

from ..scoring import is_recount
from ..trajectory.audit import genesis_hash, line_hash
from ..trajectory.entries import FINISH_EVENT, TraceEntry, log_event
from ..trajectory.rules import CHANGE_EVENT, START_EVENT, RulesError, check_rule_facts
from .checkpoint import WAL_KEPT, Checkpointer
from .reader import LedgerReader
from .schema import ADDED, TABLES, triggers

ROLES = ("participant", "researcher")
MAX_ROW_BYTES = 1 << 20  # a row longer than this (in UTF-8) is witnessed by its hash alone (see witness.stub)


class Refused(RebenchError):
    """A request the collector turns down; ``status`` is the HTTP status it answers with."""

    def __init__(self, status: int, what: str) -> None:
        super().__init__(what)
        self.status = status


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class Ledger:
    def __init__(self, path: Path, now: Callable[[], float] = time.time) -> None:
        self.path = path
        self._now = now
        conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        # WAL with synchronous=NORMAL: a committed request survives the collector being killed (its
        # process, kill -9), not a power cut. What a power cut could take is not lost to the study:
        # each workstation's fsynced audit log is the queue, and its witness sends again whatever
        # the collector lacks. One fsync a request instead of two is what lets a cohort's flood in.
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA wal_autocheckpoint=0")  # checkpoints run off the writers' path (checkpoint.py),
        conn.execute(f"PRAGMA journal_size_limit={WAL_KEPT}")  # and a log started over is cut back to this
        conn.executescript(TABLES)
        for sql in triggers():
            conn.execute(sql)
        for table, column, sql in ADDED:  # a database made by an earlier version gains its new columns
            if column not in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}:
                conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {sql}")
        conn.commit()
        self.db = sqlite_utils.Database(conn)
        self._lock = threading.Lock()
        # The researcher's reads go through a connection of their own (``LedgerReader``): in WAL
        # mode a reader never waits for the writers' lock, nor holds it.
        self.reader = LedgerReader(path)
        self._checkpointer = Checkpointer(path)
        self._older: dict[str, int | None] = {}  # finish lines found among the rows of older databases

    def close(self) -> None:
        self._checkpointer.close()
        with self._lock:
            self.db.conn.close()
        self.reader.close()

    def _ms(self) -> int:
        return int(self._now() * 1000)

    # -- who ------------------------------------------------------------------------------
    def add(self, participant: str, role: str = "participant") -> str:
        """A new token for ``participant`` (shown once; only its sha256 is kept)."""
        if role not in ROLES:
            raise RebenchError(f"unknown role {role!r}", fix=f"use one of {', '.join(ROLES)}")
        token = secrets.token_urlsafe(32)
        with self._lock:
            if self.db["participants"].count_where("id = ?", [participant]):
                raise RebenchError(f"{participant!r} already has a token", kept="the existing token",
                                   fix="choose another id (tokens are never shown twice)")
            self.db["participants"].insert({"id": participant, "role": role, "token_sha256": token_digest(token),
                                            "created_at": self._ms()})
        return token

    def identify(self, token: str | None) -> tuple[str, str]:
        """(participant, role) of a token; Refused(401) for none or an unknown one."""
        if not token:
            raise Refused(401, "no token: send `Authorization: Bearer <token>`")
        digest = token_digest(token)
        with self._lock:
            rows = list(self.db.query("SELECT id, role, token_sha256 FROM participants WHERE token_sha256 = ?", [digest]))
        if not rows or not hmac.compare_digest(rows[0]["token_sha256"], digest):
            raise Refused(401, "unknown token")
        return rows[0]["id"], rows[0]["role"]

    def refuse(self, who: str | None, session_id: str | None, exc: Refused) -> None:
        with self._lock:
            self.db["refusals"].insert({"at": self._ms(), "participant": who, "session_id": session_id,
                                        "status": exc.status, "reason": exc.what[:500]})

    # -- sessions -------------------------------------------------------------------------
    def owner(self, session_id: str) -> str | None:
        with self._lock:
            rows = list(self.db.query("SELECT participant FROM sessions WHERE id = ?", [session_id]))
        return rows[0]["participant"] if rows else None

    def may_read(self, who: str, role: str, session_id: str) -> None:
        """A participant is answered the same for another's session as for one that does not
        exist (404, same words), so made-up ids tell nothing about who has which session."""
        owner = self.owner(session_id)
        if role == "researcher":
            if owner is None:
                raise Refused(404, f"no session {session_id} at this collector")
            return
        if owner != who:
            raise Refused(404, f"no session {session_id} of {who}'s at this collector")

    def head(self, session_id: str) -> dict[str, Any]:
        with self._lock:
            rows = list(self.db.query("SELECT n, hash FROM audit_rows WHERE session_id = ? ORDER BY n DESC LIMIT 1",
                                      [session_id]))
        return {"count": rows[0]["n"] + 1 if rows else 0, "head": rows[0]["hash"] if rows else None}

    def rows(self, session_id: str, start: int = 0, limit: int | None = None) -> list[dict[str, Any]]:
        """Witnessed rows from ``start`` on (at most ``limit`` of them)."""
        return self.reader.rows(session_id, start, limit)

    def append(self, who: str, session_id: str, start: int, items: list[Any], info: dict[str, Any]) -> dict[str, Any]:
        """Witness rows ``start``, ``start+1``… of a session owned by ``who``. Rows already
        witnessed must be the same (same hash); new ones must chain onto the last witnessed row.
        All or nothing: a refusal keeps none of the request's rows. Each row is read and checked
        before the lock (pure work; its refusal, if any, is raised in the same order as before)."""
        parsed = [_parsed(item, start + i) for i, item in enumerate(items)]
        with self._lock:
            run_id, new = self._check_session(who, session_id, info)
            count, prev = self._head_locked(session_id, run_id)
            if start > count:
                raise Refused(409, f"rows from line {start + 1} sent, but the collector has only {count}: "
                                   f"send from line {count + 1}")
            fresh = []
            finished = None if new else self._finish_line(session_id)
            for i, row in enumerate(parsed):
                n = start + i
                if isinstance(row, Refused):
                    raise row
                if n < count:
                    self._same_as_witnessed(session_id, n, row)
                    continue
                if row["prev_hash"] != prev:
                    raise Refused(409, f"line {n + 1} does not chain onto witnessed line {n}: "
                                       "a witnessed row was changed, removed or reordered")
                if finished is not None:
                    raise Refused(409, f"line {n + 1} follows the finish row (line {finished}): a finished session "
                                       "takes no row")
                if row["event"] == FINISH_EVENT:
                    finished = n + 1
                fresh.append((n, row))
                prev, count = row["hash"], n + 1
            now = self._ms()
            with self.db.conn:  # one transaction: every new row of the request, or none
                if new:
                    self.db.conn.execute("INSERT INTO sessions (id, participant, run_id, env_id, created_at) "
                                    "VALUES (?, ?, ?, ?, ?)", [session_id, who, run_id, info["env_id"], now])
                for n, row in fresh:
                    self._insert(session_id, n, row, now)
        return {"count": count, "head": prev}

    def _check_session(self, who: str, session_id: str, info: dict[str, Any]) -> tuple[int, bool]:
        """The session's run id, and whether it is new (then ``who`` will own it)."""
        rows = list(self.db.query("SELECT participant, run_id FROM sessions WHERE id = ?", [session_id]))
        if rows:
            if rows[0]["participant"] != who:
                raise Refused(403, f"session {session_id} belongs to another participant; {who} may write only its own")
            return int(rows[0]["run_id"]), False
        try:
            run_id, _env = int(info["run_id"]), str(info["env_id"])
        except (KeyError, TypeError, ValueError):
            raise Refused(400, "a new session needs its run_id and env_id") from None
        return run_id, True

    def _head_locked(self, session_id: str, run_id: int) -> tuple[int, str]:
        rows = list(self.db.query("SELECT n, hash FROM audit_rows WHERE session_id = ? ORDER BY n DESC LIMIT 1",
                                  [session_id]))
        return (rows[0]["n"] + 1, rows[0]["hash"]) if rows else (0, genesis_hash(run_id))

    def _finish_line(self, session_id: str) -> int | None:
        """The line of the session's finish row (None: not finished)."""
        row = self.db.conn.execute("SELECT finish_n FROM sessions WHERE id = ?", [session_id]).fetchone()
        if row is not None and row[0] is not None:
            return row[0] + 1
        if session_id not in self._older:  # a database from before finish_n was kept: look once among the rows
            found = self.db.conn.execute("SELECT n FROM audit_rows WHERE session_id = ? AND event = ? ORDER BY n "
                                         "LIMIT 1", [session_id, FINISH_EVENT]).fetchone()
            self._older[session_id] = None if found is None else found[0] + 1
        return self._older[session_id]

    def _same_as_witnessed(self, session_id: str, n: int, row: dict[str, Any]) -> None:
        old = list(self.db.query("SELECT hash FROM audit_rows WHERE session_id = ? AND n = ?", [session_id, n]))
        if old and old[0]["hash"] != row["hash"]:
            raise Refused(409, f"line {n + 1} differs from the row witnessed there: witnessed rows cannot be rewritten")

    def _insert(self, session_id: str, n: int, row: dict[str, Any], now: int) -> None:
        """One row, inside the caller's transaction (``self.db.conn`` directly: sqlite-utils' own
        ``execute`` commits each write made outside a transaction of its own)."""
        data = row.pop("data")
        row.pop("rules", None)
        cols = {"session_id": session_id, "n": n, "received_at": now, **row}
        self.db.conn.execute(f"INSERT INTO audit_rows ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                             list(cols.values()))
        content = data.get("content") if isinstance(data, dict) else None
        if not isinstance(content, dict):
            return
        if content.get("type") == "intermediateScore":
            score = content.get("score")
            details = content.get("details")
            fp = (details.get("attempt") or {}).get("fingerprint") if isinstance(details, dict) else None
            self.db.conn.execute(
                "INSERT INTO scorings (session_id, n, called_at, working_ms, score, fingerprint, recount) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)", [session_id, n, row["called_at"], row["working_ms"],
                                                 float(score) if isinstance(score, (int, float)) else None, fp,
                                                 int(is_recount(details))])
        if row["event"] == FINISH_EVENT:
            self.db.conn.execute("UPDATE sessions SET finish_n = ? WHERE id = ? AND finish_n IS NULL", [n, session_id])
        started = _event_data(content, "session_started")
        if started is not None:
            score = started.get("score") or {}
            self.db.conn.execute("UPDATE sessions SET direction = ?, aggregation = ?, visibility = ?, time_limit_s = ? "
                            "WHERE id = ?", [score.get("direction"), score.get("aggregation"), score.get("visibility"),
                                             started.get("time_limit_s"), session_id])

    # -- the study (reads off the writers' lock) ---------------------------------------------
    def sessions(self) -> list[dict[str, Any]]:
        return self.reader.sessions()

    def figures(self, gap_ms: int) -> dict[str, dict[str, Any]]:
        return self.reader.figures(gap_ms)

    def start_line(self, session_id: str) -> str | None:
        return self.reader.start_line(session_id)

    def scorings(self, session_id: str) -> list[dict[str, Any]]:
        return self.reader.scorings(session_id)


def _event_data(content: dict[str, Any], event: str) -> dict[str, Any] | None:
    if content.get("type") != "log":
        return None
    for part in content.get("content") or []:
        if isinstance(part, dict) and part.get("event") == event:
            return part
    return None


def _parsed(item: Any, n: int) -> dict[str, Any] | Refused:
    try:
        return parse_item(item, n)
    except Refused as exc:
        return exc


def parse_item(item: Any, n: int) -> dict[str, Any]:
    """One sent row: a whole log line (its hash checked here), or for a row too long to send,
    a stub with its hash and place in the chain."""
    if isinstance(item, str):
        if len(item) > MAX_ROW_BYTES:  # characters: at least as many bytes
            raise Refused(413, f"line {n + 1} is longer than {MAX_ROW_BYTES} bytes: send its stub")
        claimed, actual = line_hash(item)
        try:
            data = json.loads(item)
        except (ValueError, RecursionError):
            raise Refused(400, f"line {n + 1} is not JSON") from None
        if claimed is None or claimed != actual or not isinstance(data, dict) or data.get("hash") != claimed:
            raise Refused(409, f"line {n + 1}'s bytes do not match its hash")
        check_row(data, n)
        return _fields(data, item, n)
    if isinstance(item, dict) and {"hash", "prevHash", "calledAt"} <= item.keys():
        size = item.get("bytes")
        if isinstance(size, bool) or not isinstance(size, int) or size <= MAX_ROW_BYTES:
            raise Refused(400, f"line {n + 1} is sent as a stub (its hash alone) but says it is {size!r} bytes: "
                               f"only a row longer than {MAX_ROW_BYTES} bytes may be; send the row itself")
        event = item.get("event")
        content = {"type": str(item.get("kind", "stub"))}
        if isinstance(event, str):  # a long finish row still ends the session here
            content = {"type": "log", "content": ["", {"event": event}]}
        return _fields({**item, "content": content}, None, n)
    raise Refused(400, f"line {n + 1} is neither a log line nor a stub")


def check_row(data: dict[str, Any], n: int) -> None:
    """The row's schema and types (the trace-entry contract), and the rules a start or rules
    row states: a 400 naming the field otherwise."""
    try:
        TraceEntry.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ())) or "the row"
        raise Refused(400, f"line {n + 1}: {where}: {first.get('msg', 'does not read')}") from None
    facts = log_event(data.get("content"))
    if facts is not None and facts.get("event") in (START_EVENT, CHANGE_EVENT):
        try:
            check_rule_facts(facts, n + 1)
        except RulesError as exc:
            raise Refused(400, exc.what) from None


def _fields(data: dict[str, Any], line: str | None, n: int) -> dict[str, Any]:
    content = data.get("content") if isinstance(data.get("content"), dict) else {}
    event = None
    parts = content.get("content") if content.get("type") == "log" else None
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, dict) and isinstance(part.get("event"), str):
            event = part["event"]
    try:
        called = int(data["calledAt"])
        written = int(data.get("modifiedAt", called))
        working = data.get("workingMs")
        working = None if working is None or (isinstance(working, float) and math.isnan(working)) else int(working)
    except (KeyError, TypeError, ValueError):
        raise Refused(400, f"line {n + 1} has no valid calledAt") from None
    return {"called_at": called, "written_at": written, "working_ms": working, "kind": str(content.get("type", "")),
            "event": event, "hash": str(data["hash"]), "prev_hash": str(data.get("prevHash", "")), "line": line,
            "data": data}
