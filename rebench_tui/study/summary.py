"""What the researcher sees of each session, computed from the witnessed rows alone (not from
anything the workstation says about itself): status, working time, the counting score, the last
row's age and the witness gaps."""

from __future__ import annotations

import json
import math
import time
from typing import Any, Callable

from ..errors import RebenchError
from ..scoring import Aggregation, Direction, Rule
from ..trajectory.entries import FINISH_EVENT
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
    """One session's line, in one pass over its rows' figures (no row text is read)."""
    rows = ledger.figures(s["id"])
    working = None
    finished = False
    lags = []
    for r in rows:
        if r["working_ms"] is not None:
            working = r["working_ms"]
        finished = finished or r["event"] == FINISH_EVENT
        # How late each row reached the collector, by the collector's own clock, against the time
        # the row itself records (calledAt: hash-chained, never decreasing). Measured from the
        # session's quickest row: the two machines' clocks need not agree, only tick at one rate.
        lags.append(r["received_at"] - r["called_at"])
    quickest = min(lags) if lags else 0
    late = [lag - quickest for lag in lags if lag - quickest > GAP_MS]
    scorings = ledger.scorings(s["id"])
    return {
        "id": s["id"], "participant": s["participant"], "env_id": s["env_id"],
        "status": "finished" if finished else "live", "rows": len(rows),
        "working_s": working / 1000 if working is not None else 0.0, "time_limit_s": s["time_limit_s"],
        "scorings": len(scorings), "counting": _counting(ledger, s, scorings),
        "last_row_age_s": now - rows[-1]["received_at"] / 1000 if rows else None,
        "gaps": len(late), "longest_gap_s": max(late) / 1000 if late else 0.0,
    }


def _counting(ledger, s: dict[str, Any], scorings: list[dict[str, Any]]) -> float | str | None:
    """The counting score by the session's rule, as the workstation counts it (re-scores of one
    attempt by their median, a failed one against a timing attempt, a recount alone); "hidden"
    where the environment hides scores."""
    if s["visibility"] == "hidden":
        return "hidden"
    line = ledger.start_line(s["id"])
    rules = chain_rules([json.loads(line)]) if line is not None else None
    try:
        rule = rules.rule() if rules is not None else Rule(Aggregation(s["aggregation"] or "min"),
                                                           Direction(s["direction"] or "lower"))
    except ValueError:
        return None
    scores = [math.nan if r["score"] is None else r["score"] for r in scorings]
    best = rule.attempt(scores, [r["fingerprint"] for r in scorings], [bool(r.get("recount")) for r in scorings])
    return None if best is None else best.score
