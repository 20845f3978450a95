"""Export a session as a Vivaria run bundle: a folder of the rows Vivaria keeps for a run.

``<out_dir>/``
  ``run.json``            the run and its trunk branch in one object: ``id`` (= runId), ``taskId``
                          (``family/task``, lower case), ``taskVersion``, ``name``, ``createdAt``,
                          ``agentBranchNumber`` 0, ``startedAt``, ``completedAt``, ``submission``,
                          ``score`` (the final score: the median of the counting attempt's
                          re-scores; null while unfinished or with no valid scoring; metadata's
                          ``final_scorings`` lists the scorings it is the median of),
                          ``usageLimits`` ``{"total_seconds": limit}`` (a human run has no
                          token, action or cost limit, so those keys are left out), ``usage``
                          ``{"total_seconds": working seconds used}``, ``isInteractive`` true,
                          ``fatalError`` null, and a free-form ``metadata`` object
  ``trace_entries.jsonl`` one trace entry per line, in audit-log order
  ``run_pauses.jsonl``    ``{runId, agentBranchNumber, start, end, reason}`` per pause
  ``score_log.jsonl``     ``{index, scoredAt, createdAt, elapsedTime, score, message, details}``

Trace entries keep only Vivaria's own fields (``runId``, ``index``, ``agentBranchNumber``,
``calledAt``, ``modifiedAt``, ``usageTotalSeconds``, ``content`` and any ``usage*`` columns).
The integrity fields of the audit log (``prevHash``, ``hash``) are dropped: they hash the
original line's bytes, so they cannot be checked on a re-serialized copy and would only look
checkable. ``workingMs`` is dropped too: ``usageTotalSeconds`` carries working time in
Vivaria's own field. To tie a bundle to its verified original, ``run.json``'s metadata records
the audit log's sha256, its row count and the last row's hash (the head of the chain).

Every trace row is validated against the strict content contract
(:class:`rebench_tui.trajectory.entries.TraceEntry`) before anything is written; a row that
fails stops the export with the line that broke it.

Score-log ``elapsedTime`` is Vivaria's working time: ``calledAt - startedAt - (sum of pauses
that ended before calledAt)``, in ms. ``scoredAt`` is the row's ``calledAt`` (when scoring
started), ``createdAt`` its ``modifiedAt`` (when the result was written); ``score`` is the audit
log's value as is (a number, ``"NaN"``, ``"Infinity"``, ``"-Infinity"`` or null).
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

from .. import __version__
from ..errors import RebenchError
from ..safe_write import write_whole
from .audit import escape_surrogates
from .entries import TraceEntry
from .session_records import AUDIT, SessionRecords

VIVARIA_FIELDS = ("runId", "index", "agentBranchNumber", "calledAt", "modifiedAt", "usageTokens", "usageActions",
                  "usageTotalSeconds", "usageCost", "content")
RUN = "run.json"
TRACE = "trace_entries.jsonl"
PAUSES = "run_pauses.jsonl"
SCORES = "score_log.jsonl"


def _dumps(obj: Any) -> str:
    return escape_surrogates(json.dumps(obj, ensure_ascii=False, allow_nan=False, separators=(",", ":")))


def _write(path: Path, text: str) -> None:
    """Replace a file whole (a reader never sees half a bundle file); an export is rebuilt if lost."""
    write_whole(path, text, durable=False)


def trace_rows(rec: SessionRecords) -> list[dict[str, Any]]:
    """The audit rows with only Vivaria's fields, each checked against the trace-entry contract."""
    out = []
    for n, row in enumerate(rec.rows, start=1):
        entry = {k: row[k] for k in VIVARIA_FIELDS if k in row}
        try:
            TraceEntry.model_validate(entry)
        except Exception as exc:  # noqa: BLE001 - reported as a readable error
            raise RebenchError(f"{rec.folder.name}/{AUDIT} row {n} breaks the trace-entry contract: "
                               f"{str(exc).splitlines()[0]}", kept="the session folder is unchanged; nothing was exported",
                               fix=f"`rebench-tui verify {rec.folder.name}` shows what is damaged") from exc
        out.append(entry)
    return out


def pause_rows(rec: SessionRecords) -> list[dict[str, Any]]:
    return [{"runId": rec.meta.run_id, "agentBranchNumber": 0, "start": p.start, "end": p.end, "reason": p.reason}
            for p in rec.meta.pauses]


def score_rows(rec: SessionRecords) -> list[dict[str, Any]]:
    return [{"index": s.row["index"], "scoredAt": s.called_at, "createdAt": s.row.get("modifiedAt", s.called_at),
             "elapsedTime": s.elapsed_ms, "score": s.raw, "message": s.message, "details": s.details}
            for s in rec.scorings]


def run_row(rec: SessionRecords) -> dict[str, Any]:
    m = rec.meta
    audit = rec.folder / AUDIT
    fc = rec.counting if rec.finished else None
    metadata = {
        **m.metadata,
        **rec.run_facts,
        "final_attempt": m.final_attempt,
        "final_scorings": None if fc is None else list(fc.scorings),
        "normalized_score": None if fc is None or not math.isfinite(fc.normalized) else fc.normalized,
        "export": {
            "by": f"rebench-tui {__version__}",
            "audit_sha256": hashlib.sha256(audit.read_bytes()).hexdigest() if audit.is_file() else None,
            "audit_rows": len(rec.rows),
            "audit_last_hash": rec.rows[-1].get("hash") if rec.rows else None,
            "dropped_fields": ["prevHash", "hash", "workingMs"],
            "warnings": list(rec.warnings),
        },
    }
    return {
        "id": m.run_id,
        "taskId": rec.task_id,
        "taskVersion": m.task_version,
        "name": m.id,
        "createdAt": m.created_at,
        "agentBranchNumber": 0,
        "startedAt": m.started_at,
        "completedAt": m.completed_at,
        "submission": rec.submission if rec.finished else None,
        "score": m.final_score if rec.finished else None,
        "usageLimits": {"total_seconds": int(m.clock.limit_s)},
        "usage": {"total_seconds": int(rec.working_total_s)},
        "isInteractive": True,
        "fatalError": None,
        "metadata": metadata,
    }


def export_vivaria(folder: Path, out_dir: Path) -> Path:
    """Write the session in ``folder`` as a Vivaria bundle folder ``out_dir``; returns ``out_dir``.

    Existing bundle files in ``out_dir`` are replaced; other files there are left alone."""
    rec = SessionRecords.load(Path(folder))
    trace = trace_rows(rec)  # validated before anything is written
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _write(out_dir / TRACE, "".join(_dumps(r) + "\n" for r in trace))
    _write(out_dir / PAUSES, "".join(_dumps(r) + "\n" for r in pause_rows(rec)))
    _write(out_dir / SCORES, "".join(_dumps(r) + "\n" for r in score_rows(rec)))
    _write(out_dir / RUN, json.dumps(run_row(rec), ensure_ascii=False, allow_nan=False, indent=2) + "\n")
    return out_dir
