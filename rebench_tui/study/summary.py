"""What the researcher sees of each session, computed from the witnessed rows alone (not from
anything the workstation says about itself): status, working time, the counting score, the last
row's age and the witness gaps."""

from __future__ import annotations

import json
import math
import time
from typing import Any, Callable

from ..errors import RebenchError
from ..scoring import Aggregation, Direction, Rule, attempt_fingerprint, is_recount
from ..trajectory.entries import FINISH_EVENT
from ..trajectory.rules import RulesError, chain_rules
from ..trajectory.sealing import SEALED, open_rows

GAP_MS = 60_000  # a row that reached the collector this much later than usual was unwitnessed meanwhile


def summarize(ledger, now: Callable[[], float] = time.time) -> list[dict[str, Any]]:
    """One line per session; a session whose record does not read (its start row's rules of the
    wrong type, say) is a line with ``skipped`` saying why, and the others are still summarized."""
    figures = ledger.figures(GAP_MS)
    out = []
    for s in ledger.sessions():
        try:
            _check_start(ledger, s)
            out.append(_one(ledger, s, figures.get(s["id"]), now()))
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


def _one(ledger, s: dict[str, Any], f: dict[str, Any] | None, now: float) -> dict[str, Any]:
    """One session's line from its stored figures (``Ledger.figures``). A gap: a row that reached
    the collector, by the collector's own clock, more than GAP_MS later than the session's
    quickest row did, both against the time each row records (calledAt: hash-chained, never
    decreasing); the two machines' clocks need not agree, only tick at one rate."""
    f = f or {"rows": 0, "finished": 0, "working_ms": None, "last_received": None, "gaps": 0, "longest": 0}
    scorings = ledger.scorings(s["id"])
    longest = f["longest"] or 0
    return {
        "id": s["id"], "participant": s["participant"], "env_id": s["env_id"],
        "status": "finished" if f["finished"] else "live", "rows": f["rows"],
        "working_s": f["working_ms"] / 1000 if f["working_ms"] is not None else 0.0, "time_limit_s": s["time_limit_s"],
        "scorings": len(scorings), "counting": _counting(ledger, s, scorings),
        "last_row_age_s": now - f["last_received"] / 1000 if f["last_received"] is not None else None,
        "gaps": f["gaps"], "longest_gap_s": longest / 1000 if f["gaps"] else 0.0,
    }


def _counting(ledger, s: dict[str, Any], scorings: list[dict[str, Any]]) -> float | str | None:
    """The counting score by the session's rule, as the workstation counts it (re-scores of one
    attempt by their median, a failed one against a timing attempt, a recount alone); "hidden"
    where the environment hides scores, "sealed" where they are sealed to the researcher's key too."""
    line = ledger.start_line(s["id"])
    if s["visibility"] == "hidden":
        return SEALED if line is not None and '"seal_to":"' in line else "hidden"  # the start row names a key
    rules = chain_rules([json.loads(line)]) if line is not None else None
    try:
        rule = rules.rule() if rules is not None else Rule(Aggregation(s["aggregation"] or "min"),
                                                           Direction(s["direction"] or "lower"))
    except ValueError:
        return None
    scores = [math.nan if r["score"] is None else r["score"] for r in scorings]
    best = rule.attempt(scores, [r["fingerprint"] for r in scorings], [bool(r.get("recount")) for r in scorings])
    return None if best is None else best.score


def opened_counting(lines: list[str | None], key: Any) -> float | str | None:
    """A hidden session's counting score for the researcher, from its witnessed rows with their
    sealed scorings opened by ``key`` (``trajectory.sealing``); "sealed" where one does not open."""
    rows = [json.loads(line) for line in lines if line]
    try:
        rows, _left = open_rows(rows, key)
        rules = chain_rules(rows)
    except (RebenchError, ValueError):
        return SEALED
    if rules is None:
        return None
    scorings = [r["content"] for r in rows if r.get("content", {}).get("type") == "intermediateScore"]
    values = [math.nan if c.get("score") is None else float(c["score"]) for c in scorings]
    best = rules.rule().attempt(values, [attempt_fingerprint(c.get("details")) for c in scorings],
                                [is_recount(c.get("details")) for c in scorings])
    return None if best is None else best.score
