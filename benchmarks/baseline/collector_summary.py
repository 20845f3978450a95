# The collector's summary.py before the collector became the study's authority (commit 57b804e, rebench_tui/study/summary.py), kept unchanged
# below this header so benchmarks/bench_collector.py can measure it beside the current one in the same run. Not imported by the package.
"""What the researcher sees of each session, computed from the witnessed rows alone (not from
anything the workstation says about itself): status, working time, the counting score, the last
row's age and the witness gaps."""

from __future__ import annotations

import math
import time
from typing import Any, Callable

from ..scoring import Aggregation, counting_attempt

GAP_MS = 60_000  # a row that reached the collector this much later than usual was unwitnessed meanwhile


def summarize(ledger, now: Callable[[], float] = time.time) -> list[dict[str, Any]]:
    return [_one(ledger, s, now()) for s in ledger.sessions()]


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
