"""``verify``'s check of the score log: ``score_log.csv`` says, row for row, what the audit
log's scoring rows do (a sealed scoring: the same sealed message and details, score ``sealed``)."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, Protocol

from .records import SCORE_LOG
from .sealing import SEALED, is_sealed


class Findings(Protocol):
    """Where a check's findings go (verify's Report is one)."""

    def add(self, check: str, ok: bool, detail: str, line: int | None = None) -> None: ...


REPAIR = "`rebench-tui repair {id}` rebuilds it from the audit log"
__all__ = ["REPAIR", "check_score_log"]


def _same(a: float, b: float) -> bool:
    return (math.isnan(a) and math.isnan(b)) or a == b


def _score_log_rows(path: Path) -> tuple[list[str] | None, list[list[str]]]:
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh)
        header = next(reader, None)
        return header, list(reader)


def check_score_log(folder: Path, rows: list[dict[str, Any]], report: Findings) -> None:
    path = folder / SCORE_LOG
    scores = [r for r in rows if r["content"]["type"] == "intermediateScore"]
    fix = REPAIR.format(id=folder.name)
    if not path.is_file():
        report.add("score log", not scores, "score_log.csv is missing" + (f"; {fix}" if scores else ""))
        return
    try:
        header, log_rows = _score_log_rows(path)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        report.add("score log", False, f"score_log.csv is unreadable ({str(exc)[:200]}); {fix}")
        return
    if header != ["timestamp", "score", "message", "details"]:
        report.add("score log", False, f"unexpected header {str(header)[:200]}; {fix}", 1)
        return
    for i, (audit_row, log_row) in enumerate(zip(scores, log_rows), start=2):
        c = audit_row["content"]
        value = c["score"]
        if not _same_row(c, log_row):
            report.add("score log", False, f"row differs from the audit log's scoring {i - 1} "
                                           f"(audit: {value!r} {c['message']}; score log: {log_row[1:3]})", i)
            return
    if len(log_rows) != len(scores):
        report.add("score log", False, f"{len(log_rows)} rows in score_log.csv but {len(scores)} scorings in the audit log",
                   min(len(log_rows), len(scores)) + 2)
        return
    report.add("score log", True, f"{len(scores)} scorings match the audit log")


def _same_row(c: dict[str, Any], log_row: list[str]) -> bool:
    """Whether a score log row says what its scoring row does (a sealed one: the same sealed details)."""
    try:
        if is_sealed(c.get("details")):
            return log_row[1] == SEALED and json.loads(log_row[3]) == c["details"] and json.loads(log_row[2]) == c["message"]
        audit_score = math.nan if c["score"] is None else float(c["score"])
        return _same(audit_score, float(log_row[1])) and json.loads(log_row[2]) == c["message"]
    except (ValueError, IndexError, RecursionError):
        return False
