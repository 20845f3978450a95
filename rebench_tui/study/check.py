"""`verify --witness`: compare a session folder with what the collector witnessed, row by row.

A folder rewritten consistently (scores, score log, session.json, the finish row, every hash
chained again) passes the local checks, but its rows no longer have the hashes the collector
received as they were written; the first line whose hash differs is named, with what the
collector holds there."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

from ..trajectory.audit import line_hash
from ..trajectory.records import AUDIT, META
from ..trajectory.verify import Report
from .client import Collector, CollectorRefused, CollectorUnreachable

CHECK = "witness"


def session_id(folder: Path, report: Report) -> str:
    """The session's id: session.json's, else (that file missing or damaged: a finding) the
    folder's name, which is the id a session folder is made with."""
    try:
        sid = json.loads((folder / META).read_text(encoding="utf-8"))["id"]
        if isinstance(sid, str) and sid:
            return sid
        why = "names no session id"
    except FileNotFoundError:
        why = "is missing"
    except (OSError, UnicodeDecodeError, ValueError, RecursionError, TypeError, KeyError) as exc:
        why = f"does not read ({type(exc).__name__})"
    report.add(CHECK, False, f"{META} {why}: the rows are compared under the folder's name {folder.name}")
    return folder.name


def check_witnessed(folder: Path, collector: Collector) -> Report:
    """Every finding is in the report (a damaged folder or a collector that does not answer
    included): the caller goes on to the next session."""
    report = Report(folder)
    sid = session_id(folder, report)
    try:
        witnessed = collector.rows(sid)
    except CollectorRefused as exc:
        report.add(CHECK, False, f"the collector at {collector.url} never witnessed session {sid}" if exc.status == 404
                   else exc.what)
        return report
    except CollectorUnreachable as exc:
        report.add(CHECK, False, exc.what)
        return report
    try:
        local = (folder / AUDIT).read_text(encoding="utf-8").splitlines() if (folder / AUDIT).exists() else []
    except (OSError, UnicodeDecodeError) as exc:
        report.add(CHECK, False, f"{AUDIT} does not read ({type(exc).__name__}): nothing to compare")
        return report
    for n, (line, seen) in enumerate(zip(local, witnessed), start=1):
        claimed, _actual = line_hash(line)
        if claimed != seen["hash"] or (seen["line"] is not None and seen["line"] != line):
            report.add(CHECK, False, f"differs from the row the collector witnessed at {_when(seen['received_at'])}: "
                                     f"witnessed {_what(seen['line'], seen['kind'])}, here {_what(line, None)}", n)
            return report
    if len(local) < len(witnessed):
        report.add(CHECK, False, f"the folder lacks {len(witnessed) - len(local)} witnessed row(s) from line "
                                 f"{len(local) + 1} on: rows were removed", len(local) + 1)
    elif len(local) > len(witnessed):
        report.add(CHECK, False, f"{len(local) - len(witnessed)} row(s) from line {len(witnessed) + 1} on were never "
                                 "witnessed (written while the collector was unreachable and not sent yet, or added "
                                 "afterwards)", len(witnessed) + 1)
    else:
        report.add(CHECK, True, f"all {len(local)} rows are the ones {collector.url} witnessed"
                                + (f", the last at {_when(witnessed[-1]['received_at'])}" if witnessed else ""))
    return report


def _when(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _what(line: str | None, kind: str | None) -> str:
    """A row in a few words: its kind, and a score or an event where it has one."""
    if line is None:
        return f"a {kind} row (witnessed by its hash only)"
    try:
        row = json.loads(line)
    except ValueError:
        return "a line that is not JSON"
    c = row.get("content") if isinstance(row, dict) else None
    if not isinstance(c, dict):
        return "a row without content"
    if c.get("type") == "intermediateScore":
        score = c.get("score")
        return f"score {score if score is not None and not (isinstance(score, float) and math.isnan(score)) else 'NaN'}"
    parts = c.get("content") if c.get("type") == "log" else None
    for part in parts if isinstance(parts, list) else []:
        if isinstance(part, dict) and part.get("event"):
            extra = f", final score {part['final_score']}" if "final_score" in part else ""
            return f"the {part['event']} row{extra}"
    return f"a {c.get('type')} row (hash {row.get('hash', '')[:12]}…)"
