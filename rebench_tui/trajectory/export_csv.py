"""Export a session as CSV tables, for spreadsheets and tools built on the METR task standard.

``<out_dir>/``
  ``score_log.csv``  ``timestamp,score,message,details``: the ``/protected/score.log`` format,
                     one row per scoring, rebuilt from the audit log (the source of truth;
                     ``rebench-tui verify`` checks the session's own copy against it)
  ``scores.csv``     one row per scoring with its working time and normalized score:
                     ``attempt, timestamp, called_at_ms, working_s, elapsed_ms, score, valid,
                     normalized, counting_score, is_final, message, files_attempt, fingerprint``.
                     ``attempt`` is the scoring's number; ``working_s`` is the session clock's
                     pause-excluded time; ``elapsed_ms`` is Vivaria's formula; ``files_attempt``
                     numbers the attempts (scorings of the same files, by ``fingerprint``, are
                     re-scores of one attempt); ``counting_score`` is the score that counts after
                     this scoring (the median of the best attempt's re-scores, by the
                     environment's rule); ``is_final`` marks the valid scorings whose median is the
                     final score; ``anchor_start``, ``anchor_reference`` and ``anchors`` (kind:
                     summary) say what ``normalized`` is measured between and where those
                     figures come from (session.json's ``anchors`` has their full provenance)
  ``commands.csv``   one row per shell command: ``id, started_at, ended_at, duration_s, cwd,
                     exit_status, command, output_bytes, truncated, working_s`` (times in ms
                     since the epoch, as recorded; empty where the command has no result yet)

Non-finite scores are written ``nan``, ``inf`` and ``-inf`` (what Python's ``float`` reads).
"""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any

from .score_log import HEADER, iso_seconds
from .records import SCORE_LOG
from .session_records import SessionRecords

SCORES = "scores.csv"
COMMANDS = "commands.csv"
SCORES_HEADER = ("attempt", "timestamp", "called_at_ms", "working_s", "elapsed_ms", "score", "valid", "normalized",
                 "counting_score", "is_final", "message", "files_attempt", "fingerprint", "anchor_start",
                 "anchor_reference", "anchors")
COMMANDS_HEADER = ("id", "started_at", "ended_at", "duration_s", "cwd", "exit_status", "command", "output_bytes",
                   "truncated", "working_s")


def fmt_score(x: float) -> str:
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


def _blank(x: Any) -> Any:
    return "" if x is None else x


def _write(path: Path, header: tuple[str, ...], rows: list[list[Any]]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        w.writerows(rows)


def score_log_rows(rec: SessionRecords) -> list[list[Any]]:
    return [[iso_seconds(s.called_at / 1000), fmt_score(s.value), json.dumps(s.message, ensure_ascii=False, default=str),
             json.dumps(s.details, ensure_ascii=False, default=str)] for s in rec.scorings]


def score_rows(rec: SessionRecords) -> list[list[Any]]:
    counting = rec.meta.rule().running([s.value for s in rec.scorings], [s.fingerprint for s in rec.scorings],
                                       rec.recounts)
    final = set(rec.counting.scorings) if rec.finished and rec.counting is not None else set()
    group = {i: a.number for a in rec.attempts for i in a.indexes}
    anchors = rec.anchors_record
    which = f"{anchors['kind']}: {anchors['summary']}"
    return [[s.attempt, iso_seconds(s.called_at / 1000), s.called_at, round(s.working_s, 3), s.elapsed_ms,
             fmt_score(s.value), s.valid, fmt_score(s.normalized), fmt_score(c),
             s.attempt in final, json.dumps(s.message, ensure_ascii=False, default=str), group[i], _blank(s.fingerprint),
             anchors["start"], anchors["reference"], which]
            for i, (s, c) in enumerate(zip(rec.scorings, counting))]


def command_rows(rec: SessionRecords) -> list[list[Any]]:
    return [[c.id, c.started_at, _blank(c.ended_at), _blank(c.duration_s), _blank(c.cwd), _blank(c.exit_status), c.command,
             _blank(c.output_bytes), c.truncated if c.observation_row is not None else "",
             round(rec.working_s(c.action_row), 3)]
            for c in rec.commands]


def export_csv(folder: Path, out_dir: Path) -> Path:
    """Write the session in ``folder`` as CSV files in ``out_dir``; returns ``out_dir``."""
    rec = SessionRecords.load(Path(folder))
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _write(out_dir / SCORE_LOG, HEADER, score_log_rows(rec))
    _write(out_dir / SCORES, SCORES_HEADER, score_rows(rec))
    _write(out_dir / COMMANDS, COMMANDS_HEADER, command_rows(rec))
    return out_dir
