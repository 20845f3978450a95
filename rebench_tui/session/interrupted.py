"""On reopening: settle a scoring the app died during (``scoring_marker``).

Its supervisor in the sandbox is asked what became of it: finished, its result is collected and
recorded as any scoring's; still running, its process group is ended and it is recorded as
interrupted (score NaN) at its start time; no trace of it, interrupted all the same.
"""

from __future__ import annotations

import math
import time
from typing import Any

from ..runtime.base import ExecResult, exec_result
from ..scoring import ATTEMPT_KEY, ScoreResult
from ..trajectory.audit import read_entries
from ..trajectory.entries import log_event
from .scorer import SCORING_STARTED, Scorer
from .scoring_marker import ScoringMarker


def settle_interrupted_scoring(scorer: Scorer, notes: list[str]) -> dict[str, Any] | None:
    """Record the interrupted scoring, if there is one; returns what was done (for the resume
    row) and appends what the participant is told to ``notes``."""
    core = scorer.core
    m, core.interrupted = core.interrupted, None
    if m is None:
        return None
    if not core.audit.is_held(m.called_at):  # its row was written before the crash
        ScoringMarker.clear(core.marker_path)
        return None
    if not _announced(core, m.token):  # a marker the chain does not back (written by hand, or replayed)
        ScoringMarker.clear(core.marker_path)
        core.audit.fill((m.called_at, m.usage), {"type": "error", "from": "server", "trace": None, "extra": None,
                                                 "detail": f"a scoring marker named scoring {m.token[:12]}, which no start "
                                                           "row in the log announced, or whose result is recorded "
                                                           "already: nothing was collected for it"})
        notes.append("A scoring marker that the record does not back was found and set aside; nothing was collected.")
        return {"token": m.token, "outcome": "not announced"}
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(m.called_at / 1000))
    try:
        answer = core.sandbox.end_exec(m.token)
    except Exception as exc:  # noqa: BLE001 - the scoring is recorded all the same; the failure is said
        answer = {"state": "unreachable", "error": f"{type(exc).__name__}: {exc}"[:500]}
    try:
        core.sandbox.remove_rooms(m.token)  # its room, with whatever still ran in it
    except Exception:  # noqa: BLE001 - removed on the session's next stop all the same
        pass
    kept = answer.get("status") if answer.get("state") == "finished" and isinstance(answer.get("status"), dict) else None
    result = exec_result(kept, "", "") if kept is not None else None
    info: dict[str, Any] = {"started_at_ms": m.called_at, "started_at": started, "token": m.token,
                            "supervisor": {k: v for k, v in answer.items() if k != "status"}}
    if result is not None and not result.cancelled:
        return _collect(scorer, m, result, info, notes)
    return _interrupt(scorer, m, result, answer, info, notes)


def _announced(core: Any, token: str) -> bool:
    """Whether the chain has the start row of scoring ``token`` and no result for it yet."""
    started = False
    for row in read_entries(core.audit.path):
        content = row.get("content") if isinstance(row.get("content"), dict) else {}
        facts = log_event(content) or {}
        if facts.get("event") == SCORING_STARTED and facts.get("token") == token:
            started = True
        elif content.get("type") == "intermediateScore":
            details = content.get("details") if isinstance(content.get("details"), dict) else {}
            if any(isinstance(details.get(k), dict) and details[k].get("token") == token
                   for k in ("room", "interrupted", "recovered")):
                return False
    return started


def _collect(scorer: Scorer, m: ScoringMarker, result: ExecResult, info: dict[str, Any],
             notes: list[str]) -> dict[str, Any]:
    """It ended by itself while no app ran: its result channel's content, read as any scoring's."""
    reservation, started = (m.called_at, m.usage), info["started_at"]
    if result.refused_links:
        scorer.fill_refused(reservation, result.refused_links)
        notes.append(f"The scoring started at {started} was refused by the scorer's link check while the app was closed.")
        return {**info, "outcome": "refused"}
    parsed = scorer.parsed(result)
    info["outcome"] = "collected"
    details = {**parsed.details, "duration_s": round(result.duration_s, 3), "final": m.final, ATTEMPT_KEY: m.attempt,
               "recovered": {**info, "note": "the app ended while the scorer ran; the scorer finished and its "
                                             "result was collected from the sandbox on resume"}}
    if result.timed_out:
        details["timeout_s"] = m.timeout_s
    record = scorer.record(reservation, parsed, details, result.duration_s, m.attempt, m.final)
    shown = "hidden" if scorer.core.hidden else f"{record.score:.6g}"
    notes.append(f"The scoring started at {started} finished while the app was closed; its result was "
                 f"collected and recorded as scoring {record.attempt} (score {shown}).")
    return info


def _interrupt(scorer: Scorer, m: ScoringMarker, result: ExecResult | None, answer: dict[str, Any],
               info: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """It did not finish: recorded as interrupted (NaN, it does not count) at its start time."""
    state = answer.get("state")
    if result is not None:
        info["outcome"], info["ran_s"] = "ended", round(result.duration_s, 3)
        how = f"it had run {result.duration_s:.0f} s; its processes were ended on resume"
    elif state == "running":
        info["outcome"] = "still running"
        how = "its processes could NOT be ended (see `docker top`); they may still use the machine"
    elif state == "unreachable":
        info["outcome"] = "unknown"
        how = f"the sandbox could not be asked about it ({answer.get('error')})"
    else:
        info["outcome"] = "no trace"
        how = "the sandbox kept no trace of it (the container restarted, or it never started)"
    parsed = ScoreResult(math.nan, {"error": f"interrupted: the app ended while this scoring ran; {how}"}, {})
    details = {"interrupted": info, "final": m.final, ATTEMPT_KEY: m.attempt, "duration_s": info.get("ran_s")}
    record = scorer.record((m.called_at, m.usage), parsed, details, float(info.get("ran_s") or 0.0), m.attempt, m.final)
    notes.append(f"The scoring started at {info['started_at']} was interrupted when the app ended: {how}. "
                 f"It is recorded as scoring {record.attempt}, interrupted (it does not count); score again.")
    return info
