"""Small parsers every reader shares: a score as a float, working seconds of a trace row (pauses
excluded), a trace's scorings, the anchors and participant facts a run's metadata carries."""

from __future__ import annotations

import math
from typing import Any, Iterable, Sequence

from ...catalog.anchors import Anchors, AnchorsError
from ...scoring import attempt_fingerprint, is_recount
from ..runs import Scoring


def score_value(value: Any) -> float:
    """A score as a float: numbers, null/None (NaN), the strings NaN/Infinity/-Infinity.

    A mapping (an Inspect score with several values) counts if it has a ``score`` key or exactly
    one numeric value. Anything else is NaN: an invalid attempt.
    """
    if value is None or isinstance(value, bool):
        return math.nan
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return math.nan
    if isinstance(value, dict):
        if "score" in value:
            return score_value(value["score"])
        nums = [v for v in value.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return float(nums[0]) if len(nums) == 1 else math.nan
    return math.nan


def paused_ms(pauses: Iterable[dict[str, Any]], start_ms: float, at_ms: float) -> float:
    """Milliseconds of pauses inside ``[start_ms, at_ms]`` (an open pause runs until ``at_ms``)."""
    total = 0.0
    for p in pauses:
        a = p.get("start")
        if a is None:
            continue
        b = p.get("end")
        b = at_ms if b is None else b
        lo, hi = max(float(a), start_ms), min(float(b), at_ms)
        total += max(0.0, hi - lo)
    return total


def row_working_s(row: dict[str, Any], start_ms: float, pauses: Sequence[dict[str, Any]] = ()) -> float:
    """Working seconds of one trace entry: ``workingMs``, else ``usageTotalSeconds``, else
    ``calledAt - start - pauses``."""
    if row.get("workingMs") is not None:
        return float(row["workingMs"]) / 1000
    if row.get("usageTotalSeconds") is not None:
        return float(row["usageTotalSeconds"])
    called = float(row["calledAt"])
    return max(0.0, (called - start_ms - paused_ms(pauses, start_ms, called)) / 1000)


def trace_scorings(rows: Sequence[dict[str, Any]], start_ms: float | None = None,
                   pauses: Sequence[dict[str, Any]] = ()) -> list[Scoring]:
    """Every ``intermediateScore`` entry as a scoring; ``start_ms`` defaults to the first calledAt."""
    rows = sorted((r for r in rows if "calledAt" in r), key=lambda r: r["calledAt"])
    if not rows:
        return []
    start = float(rows[0]["calledAt"]) if start_ms is None else float(start_ms)
    out = []
    for r in rows:
        c = r.get("content") or {}
        if c.get("type") == "intermediateScore":
            out.append(Scoring(row_working_s(r, start, pauses), score_value(c.get("score")),
                               attempt_fingerprint(c.get("details")), is_recount(c.get("details"))))
    return out


def _pause_dicts(pauses: Iterable[Any]) -> list[dict[str, Any]]:
    return [p.model_dump() if hasattr(p, "model_dump") else dict(p) for p in pauses or ()]


def own_anchors(meta: dict[str, Any]) -> Anchors | None:
    """Anchors a run's metadata carries: a recorded ``anchors`` object (rebench-tui sessions and
    their exports), else ``start_score`` and ``reference_score`` (kind ``log``); None if neither reads."""
    if isinstance(meta.get("anchors"), dict):
        try:
            return Anchors.from_record(meta["anchors"])
        except AnchorsError:
            pass
    try:
        start, ref = float(meta["start_score"]), float(meta["reference_score"])
        return Anchors(start, ref, "log", "given by the run's own log (start_score, reference_score)")
    except (KeyError, TypeError, ValueError, AnchorsError):
        return None


def who_of(meta: Any) -> dict[str, Any]:
    """The participant and conditions a log's metadata records (rebench-tui's exports write them)."""
    if not isinstance(meta, dict):
        return {}
    internet = meta.get("internet")
    return {"participant": meta.get("participant") if isinstance(meta.get("participant"), str) else None,
            "internet": internet if isinstance(internet, bool) else None,
            "ai_tools": meta.get("ai_tools") if isinstance(meta.get("ai_tools"), str) else None}
