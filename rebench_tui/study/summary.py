"""What the researcher sees of each session, computed from the witnessed rows alone (not from
anything the workstation says about itself): status, working time, the counting score, the last
row's age and the witness gaps."""

from __future__ import annotations

import json
import math
import time
from typing import Any, Callable

from ..errors import RebenchError
from ..scoring import Aggregation, counting_attempt
from ..trajectory.rules import RulesError, chain_rules

GAP_MS = 60_000  # a row that reached the collector this much later than usual was unwitnessed meanwhile


def summarize(ledger, now: Callable[[], float] = time.time) -> list[dict[str, Any]]:
    """One line per session; a session whose record does not read (its start row's rules of the
    wrong type, say) is a line with ``skipped`` saying why, and the others are still summarized."""
    out = []
    for s in ledger.sessions():
        try:
            _check_start(ledger, s)
            out.append(_one(ledger, s, now()))
        except (RebenchError, ValueError, TypeError, KeyError) as exc:
            why = getattr(exc, "what", None) or f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            out.append({"id": s["id"], "participant": s["participant"], "env_id": s["env_id"],
                        "skipped": f"session {s['id']} left out: {why}"})
    return out


def _check_start(ledger, s: dict[str, Any]) -> None:
    """The rules its start row states read (RulesError naming the field otherwise)."""
    line = ledger.start_line(s["id"])
    if line is not None:
        chain_rules([json.loads(line)])
    limit = s.get("time_limit_s")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float))):
        raise RulesError(f"its time limit {str(limit)[:40]!r} is not a number of seconds")


def _one(ledger, s: dict[str, Any], now: float) -> dict[str, Any]:
    rows = ledger.rows(s["id"])
    working = [r["working_ms"] for r in rows if r["working_ms"] is not None]
    # How late each row arrived, measured from the session's quickest row: the two machines' clocks
    # need not agree, only tick at the same rate.
    lags = [r["received_at"] - r["written_at"] for r in rows]
    late = [lag - min(lags) for lag in lags if lag - min(lags) > GAP_MS]
    finished = any(r["event"] == "session_finished" for r in rows)
    return {
        "id": s["id"], "participant": s["participant"], "env_id": s["env_id"],
        "status": "finished" if finished else "live", "rows": len(rows),
        "working_s": working[-1] / 1000 if working else 0.0, "time_limit_s": s["time_limit_s"],
        "scorings": len(ledger.scorings(s["id"])), "counting": _counting(ledger, s),
        "last_row_age_s": now - rows[-1]["received_at"] / 1000 if rows else None,
        "gaps": len(late), "longest_gap_s": max(late) / 1000 if late else 0.0,
    }


def _counting(ledger, s: dict[str, Any]) -> float | str | None:
    """The counting score by the environment's rule; "hidden" where the environment hides scores."""
    if s["visibility"] == "hidden":
        return "hidden"
    scorings = ledger.scorings(s["id"])
    scores = [math.nan if r["score"] is None else r["score"] for r in scorings]
    try:
        aggregation = Aggregation(s["aggregation"] or "min")
    except ValueError:
        return None
    best = counting_attempt(scores, aggregation, [r["fingerprint"] for r in scorings])
    return None if best is None else best.median
