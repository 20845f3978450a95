"""One run's counting score over working time, and a group's mean of them: the rules' names, the
best-so-far step function (:class:`Curve`), finals at a budget, scorings per working hour, and
mean normalized curves over a time grid. The rules themselves are written out in
:mod:`.analysis`."""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass, replace
from typing import Iterable, Sequence

from .runs import Run

PAPER = "paper"
ROBUST = "robust"
RULES = (PAPER, ROBUST)
RULE_WORDS = {
    PAPER: "the paper's rule: best single scoring",
    ROBUST: "the robust rule: median of an attempt's re-scores, or of the finish's recount",
}

INVALID_AS = 0.0
ALL = "ALL"
HOUR = 3600.0


# -- one run ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Curve:
    """A step function: ``values[i]`` holds from ``times[i]`` until the next time (NaN before the first)."""

    times: tuple[float, ...]
    values: tuple[float, ...]

    def at(self, t: float) -> float:
        i = bisect_right(self.times, t)
        return math.nan if i == 0 else self.values[i - 1]


def best_so_far(run: Run) -> Curve:
    """The counting raw score after each scoring, by the rule the run is counted by
    (``run.counted_by``: the paper's, or the robust one)."""
    rule = run.env.rule
    if run.counted_by == ROBUST:
        values = rule.running(run.scores, run.fingerprints, run.recounts)
    else:
        values = rule.paper_running(run.scores, run.recounts)
    return Curve(tuple(run.times), tuple(values))


def final_by(run: Run, rule: str) -> float | None:
    """The run's raw final score by ``rule`` (NaN: no valid score); None where the rule cannot
    count it (the robust rule, a run without fingerprints)."""
    if rule == ROBUST and not run.robust_countable:
        return None
    return final_at(replace(run, counted_by=rule))


def normalized_curve(run: Run) -> Curve:
    """The counting score normalized; NaN until the first valid score.

    Normalization is monotone in "better", so the normalized best is the best normalized.
    """
    raw = best_so_far(run)
    return Curve(raw.times, tuple(run.env.normalize(v) for v in raw.values))


def final_at(run: Run, budget_s: float | None = None) -> float:
    """The raw counting score using only scorings within ``budget_s`` working seconds (NaN if none valid)."""
    curve = best_so_far(run)
    if not curve.times:
        return math.nan
    return curve.values[-1] if budget_s is None else curve.at(budget_s)


def normalized_final_at(run: Run, budget_s: float | None = None) -> float:
    return run.env.normalize(final_at(run, budget_s))


def final_value(run: Run, budget_s: float | None = None, invalid_as: float = INVALID_AS) -> float:
    """The normalized final as one number: ``invalid_as`` when the run has no valid score in budget."""
    v = normalized_final_at(run, budget_s)
    return invalid_as if math.isnan(v) else v


def hours_within(run: Run, budget_s: float | None = None) -> float:
    d = run.duration_s
    return (d if budget_s is None else min(d, budget_s)) / HOUR


def scorings_within(run: Run, budget_s: float | None = None) -> int:
    """Scorings the run asked for within the budget (the finish's recounts are not the participant's)."""
    return sum(1 for s in run.scorings if not s.recount and (budget_s is None or s.working_s <= budget_s))


def scoring_rate(runs: Run | Iterable[Run], budget_s: float | None = None) -> float:
    """Scorings per working hour, pooled over the runs; NaN with no working time."""
    runs = [runs] if isinstance(runs, Run) else list(runs)
    hours = sum(hours_within(r, budget_s) for r in runs)
    return math.nan if hours <= 0 else sum(scorings_within(r, budget_s) for r in runs) / hours


# -- group curves -----------------------------------------------------------------------------
def time_grid(max_s: float, points: int = 200) -> list[float]:
    if max_s <= 0:
        return [0.0]
    return [max_s * i / (points - 1) for i in range(points)]


def mean_curve(runs: Sequence[Run], grid_s: Sequence[float], invalid_as: float = INVALID_AS) -> list[float]:
    """Mean normalized counting score of the runs at each grid time (see the module text)."""
    curves = [normalized_curve(r) for r in runs]
    if not curves:
        return [math.nan for _ in grid_s]
    out = []
    for t in grid_s:
        vals = [c.at(t) for c in curves]
        out.append(sum(invalid_as if math.isnan(v) else v for v in vals) / len(vals))
    return out


def mean_curve_over_envs(runs: Sequence[Run], grid_s: Sequence[float], invalid_as: float = INVALID_AS) -> list[float]:
    by_env: dict[str, list[Run]] = {}
    for r in runs:
        by_env.setdefault(r.env_id, []).append(r)
    if not by_env:
        return [math.nan for _ in grid_s]
    per = [mean_curve(rs, grid_s, invalid_as) for rs in by_env.values()]
    return [sum(p[i] for p in per) / len(per) for i in range(len(grid_s))]
