"""The METR task-standard score log: CSV ``timestamp,score,message,details``, one row per scoring.

A sealed scoring (``trajectory.sealing``) has ``sealed`` for its score and its sealed message and
details (the blob, as the audit row holds it)."""

from __future__ import annotations

import csv
import io
import json
import math
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

SEALED = "sealed"  # as trajectory.sealing marks a sealed scoring
HEADER = ("timestamp", "score", "message", "details")


def iso_seconds(wall: float) -> str:
    return datetime.fromtimestamp(wall, UTC).isoformat(timespec="seconds")


def ensure(path: Path) -> None:
    if not path.exists():
        with open(path, "w", encoding="utf-8", newline="") as fh:
            csv.writer(fh).writerow(HEADER)
            fh.flush()
            os.fsync(fh.fileno())


def row_text(wall: float | None, score: float, message: dict[str, Any], details: dict[str, Any]) -> str:
    """One CSV line of the log (the header's, with ``wall`` None and the header's fields)."""
    buf = io.StringIO()
    if wall is None:
        csv.writer(buf).writerow(HEADER)
        return buf.getvalue()
    sealed = isinstance(details, dict) and details.get(SEALED) is True
    csv.writer(buf).writerow([
        iso_seconds(wall),
        SEALED if sealed else "nan" if math.isnan(score) else repr(float(score)),
        json.dumps(message, ensure_ascii=False, default=str),
        json.dumps(details, ensure_ascii=False, default=str),
    ])
    return buf.getvalue()


def append(path: Path, wall: float, score: float, message: dict[str, Any], details: dict[str, Any]) -> None:
    ensure(path)
    with open(path, "a", encoding="utf-8", newline="") as fh:
        fh.write(row_text(wall, score, message, details))
        fh.flush()
        os.fsync(fh.fileno())


def read(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    return [
        {
            "timestamp": r["timestamp"],
            "score": math.nan if r["score"] == SEALED else float(r["score"]),
            "message": json.loads(r["message"] or "{}"),
            "details": json.loads(r["details"] or "{}"),
        }
        for r in rows
    ]
