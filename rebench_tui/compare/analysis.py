"""Comparing runs: :func:`compare` computes a whole :class:`Comparison` (per-group statistics,
score@k at each budget, which anchors each group used) once, every run counted by one rule.

One run's curves and finals are in :mod:`.curves`, score@k and its band in :mod:`.best_of_k`;
their names are importable from here too.

The rules they follow (the RE-Bench paper's, ``docs/environments.md``):

- A run's **counting score** after each scoring is read by ONE rule for every run of a comparison
  (``compare(rule=...)``), humans and agents alike, and every report names it:

  - ``paper`` (the default): RE-Bench's rule, the best valid scoring so far (the last for
    ``last`` environments such as Scaling Law), the finish's recounts left out. Comparable with
    METR's published numbers; it rewards whoever scores more often, since each scoring is a draw.
  - ``robust``: the workstation's rule (``scoring.Rule``): scorings of the same files (the same
    attempt fingerprint) are re-scores of one attempt, which counts with their median (in timing
    environments, with its worst valid scoring if one of them failed); the best attempt counts
    (or the last); once a session's finish recounted its leading attempt, that recount's median.
    It needs fingerprints: a run none of whose scorings has one (agent runs from other tools,
    older sessions) cannot be counted by it, and is left out of a robust comparison by name,
    never counted by another rule instead.

  It is NaN until the first valid score: a step function of working time.
- **Normalized**: ``(y - start) / (reference - start)``, clipped at 0 below, NaN when invalid,
  with each run's own anchors (``run.env.anchors``: see :mod:`.runs` for which). Where the runs
  of one group on one environment were normalized by different anchors, their mean, curve and
  score@k average numbers on different scales: :attr:`Comparison.warnings` says so, and every
  report shows it.
- **Final at a budget** ``t``: the counting score over the scorings made within ``t`` working
  seconds. Where a single number per run is needed (means, score@k), a run with no valid score
  within the budget counts as 0: no better than the starting solution (``INVALID_AS``).
- **score@k** for a group: per environment, draw ``k`` of the group's runs WITH replacement and
  keep the best normalized final; take its expectation exactly from the sorted values
  ``v_(1) <= ... <= v_(n)``::

      E[max of k] = sum_i v_(i) * ((i/n)^k - ((i-1)/n)^k)

  then average over the environments the group has runs on.
- **Band** around score@k: a seeded percentile bootstrap. Each replicate resamples, per
  environment, ``n_e`` runs with replacement from the group's ``n_e`` runs, computes the exact
  ``E[max of k]`` on the resample, and averages over environments; the band is the
  ``(1 - level)/2`` and ``(1 + level)/2`` quantiles (linear interpolation) of the replicates.
  ``random.Random(seed)`` draws the resamples, so a band is reproducible.
- **Scoring rate**: scorings per working hour, pooled over a group's runs (all scorings within
  the budget over the working hours the runs spent within it).
- **Group curve**: the mean over runs of the normalized counting score at each time, a run
  counting 0 before its first valid score and keeping its final after it ended; the curve over
  all environments is the mean of the per-environment curves.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Iterable, Sequence

from ..catalog.anchors import Anchors
from .best_of_k import (ScoreAtK, average_normalized, bootstrap_band, expected_max, expected_max_all, finals_by_env,
                        quantile, score_at_k, score_at_k_values)
from .curves import (ALL, HOUR, INVALID_AS, PAPER, ROBUST, RULE_WORDS, RULES, Curve, best_so_far, final_at, final_by,
                     final_value, hours_within, mean_curve, mean_curve_over_envs, normalized_curve, normalized_final_at,
                     scoring_rate, scorings_within, time_grid)
from .runs import HUMAN_LABEL, Run

__all__ = [
    "ALL", "HOUR", "INVALID_AS", "PAPER", "ROBUST", "RULES", "RULE_WORDS", "AnchorUse", "Comparison", "Curve", "GroupStats",
    "ScoreAtK", "average_normalized", "best_so_far", "bootstrap_band", "compare", "expected_max", "expected_max_all",
    "final_at", "final_by", "final_value", "finals_by_env", "hours_within", "mean_curve", "mean_curve_over_envs",
    "normalized_curve", "normalized_final_at", "one_rule", "quantile", "score_at_k", "score_at_k_values", "scoring_rate",
    "scorings_within", "time_grid",
]


@dataclass(frozen=True)
class GroupStats:
    """One group's runs on one environment (or on all: env ``ALL``)."""

    env_id: str
    group: str
    n_runs: int
    n_finished: int
    n_scorings: int
    hours: float  # working hours within the main budget
    rate_per_hour: float
    mean_final: dict[float | None, float]  # raw, by budget (mean over runs with a valid score)
    mean_normalized: dict[float | None, float]  # by budget, invalid runs as 0
    best_normalized: dict[float | None, float]  # by budget


@dataclass(frozen=True)
class AnchorUse:
    """Anchors one group used on one environment, and for how many of its runs."""

    env_id: str
    group: str
    anchors: Anchors
    n_runs: int


def _group_order(groups: Iterable[str]) -> list[str]:
    gs = sorted(set(groups))
    return ([HUMAN_LABEL] if HUMAN_LABEL in gs else []) + [g for g in gs if g != HUMAN_LABEL]


@dataclass
class Comparison:
    runs: list[Run]
    budgets: tuple[float | None, ...]
    ks: tuple[int, ...]
    n_boot: int
    seed: int
    level: float
    envs: list[str] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    stats: dict[tuple[str, str], GroupStats] = field(default_factory=dict)
    score_at_k: dict[tuple[str, float | None], ScoreAtK] = field(default_factory=dict)
    anchor_uses: list[AnchorUse] = field(default_factory=list)
    mixed: set[tuple[str, str]] = field(default_factory=set)  # (env, group) whose runs used different anchors
    warnings: list[str] = field(default_factory=list)
    rule: str = PAPER  # the one rule every run is counted by (RULES)
    left_out: list[Run] = field(default_factory=list)  # runs the rule cannot count (robust: no fingerprints)
    # Lines shown beside the tables (the scale and the settings' differences: compare.scale),
    # set by whoever gathered the runs.
    beside: list[str] = field(default_factory=list)

    @property
    def rule_words(self) -> str:
        return RULE_WORDS[self.rule]

    def anchors_of(self, env: str, group: str) -> list[AnchorUse]:
        """The anchors a group used on one environment (on all: every environment's)."""
        return [u for u in self.anchor_uses if u.group == group and (env in (None, ALL) or u.env_id == env)]

    def anchors_tag(self, env: str | None, group: str) -> str:
        """A few words for a table cell: which anchors, and whether they are mixed."""
        uses = self.anchors_of(env or ALL, group)
        tags = list(dict.fromkeys(u.anchors.tag for u in uses))
        if env not in (None, ALL) and (env, group) in self.mixed:
            return "MIXED: " + ", ".join(f"{u.anchors.tag} {u.anchors.start:g}→{u.anchors.reference:g} ×{u.n_runs}" for u in uses)
        if env in (None, ALL):
            mixed = any((e, group) in self.mixed for e in self.envs)
            return ("MIXED within an environment; " if mixed else "") + ", ".join(tags)
        u = uses[0] if uses else None
        return "" if u is None else f"{u.anchors.tag}: {u.anchors.start:g}→{u.anchors.reference:g}"

    def warning_of(self, env: str | None, group: str) -> str:
        """The mixed-anchors warning for a table row (one environment, or all of them)."""
        envs = self.envs if env in (None, ALL) else [env]
        bad = [e for e in envs if (e, group) in self.mixed]
        if not bad:
            return ""
        return f"runs normalized by different anchors are averaged ({', '.join(bad)})"

    @property
    def budget(self) -> float | None:
        """The main budget: the largest one given (None: no limit)."""
        return None if None in self.budgets else max(self.budgets)  # type: ignore[type-var]

    def runs_of(self, env: str | None = None, group: str | None = None) -> list[Run]:
        return [r for r in self.runs if (env in (None, ALL) or r.env_id == env) and (group is None or r.group == group)]

    def max_hours(self) -> float:
        d = max((r.duration_s for r in self.runs), default=0.0)
        b = self.budget
        return (d if b is None else min(d, b)) / HOUR

    def group_curve(self, group: str, env: str | None = None, points: int = 200) -> tuple[list[float], list[float]]:
        """(working hours, mean normalized counting score) for a group, on one environment or all."""
        runs = self.runs_of(env, group)
        if not runs:
            return [], []
        end = max(r.duration_s for r in runs)
        if self.budget is not None:
            end = min(end, self.budget)
        grid = time_grid(end, points)
        ys = mean_curve(runs, grid) if env not in (None, ALL) else mean_curve_over_envs(runs, grid)
        return [t / HOUR for t in grid], ys


def _stats(env_id: str, group: str, runs: list[Run], budgets: Sequence[float | None], main: float | None) -> GroupStats:
    mean_final, mean_norm, best_norm = {}, {}, {}
    for b in budgets:
        raw = [final_at(r, b) for r in runs]
        valid = [x for x in raw if not math.isnan(x)]
        # Raw scores of different environments are in different units: no mean across them.
        mean_final[b] = sum(valid) / len(valid) if valid and env_id != ALL else math.nan
        if env_id == ALL:
            mean_norm[b] = average_normalized(runs, b)
        else:
            vals = [final_value(r, b) for r in runs]
            mean_norm[b] = sum(vals) / len(vals) if vals else math.nan
        best_norm[b] = max((final_value(r, b) for r in runs), default=math.nan)
    return GroupStats(env_id, group, len(runs), sum(r.finished for r in runs), sum(scorings_within(r, main) for r in runs),
                      sum(hours_within(r, main) for r in runs), scoring_rate(runs, main), mean_final, mean_norm, best_norm)


def _anchor_uses(c: Comparison) -> None:
    """Which anchors each group used on each environment; a warning where one group's runs on one
    environment were normalized by different anchors (their averages mix scales)."""
    for e in c.envs:
        for g in c.groups:
            by_key: dict[tuple, list[Run]] = {}
            for r in c.runs_of(e, g):
                by_key.setdefault(r.env.anchors.key(), []).append(r)
            for runs in by_key.values():
                c.anchor_uses.append(AnchorUse(e, g, runs[0].env.anchors, len(runs)))
            if len(by_key) > 1:
                c.mixed.add((e, g))
                what = "; ".join(f"{rs[0].env.anchors.tag} {rs[0].env.anchors.start:g}→{rs[0].env.anchors.reference:g} "
                                 f"({len(rs)} run{'s' if len(rs) > 1 else ''}: {', '.join(r.run_id for r in rs[:3])}"
                                 f"{', …' if len(rs) > 3 else ''})" for rs in by_key.values())
                c.warnings.append(f"{g} on {e}: runs normalized by {len(by_key)} different anchors are averaged together "
                                  f"({what}); use --anchors published|calibrated|FILE to put them on one scale")


def one_rule(runs: Sequence[Run], rule: str) -> tuple[list[Run], list[Run]]:
    """Every run counted by ``rule``, with its environment's timing as the catalog or any run of it
    says (so a human session and an agent run of one environment follow the same failure rule);
    and the runs the rule cannot count, left out."""
    if rule not in RULES:
        raise ValueError(f"unknown rule {rule!r} (one of {', '.join(RULES)})")
    timing = {r.env_id for r in runs if r.env.timing}
    counted = [replace(r, counted_by=rule, env=replace(r.env, timing=r.env_id in timing)) for r in runs]
    if rule != ROBUST:
        return counted, []
    return [r for r in counted if r.robust_countable], [r for r in counted if not r.robust_countable]


def compare(runs: Sequence[Run], *, budgets: Sequence[float | None] = (8 * HOUR,), k_max: int | None = None,
            n_boot: int = 1000, seed: int = 0, level: float = 0.95, rule: str = PAPER) -> Comparison:
    """Everything the reports show, computed once, every run counted by ``rule`` (:func:`one_rule`).

    ``k_max`` defaults to the most runs any group has on one environment (at least 1).
    """
    runs, left_out = one_rule(runs, rule)
    budgets = tuple(None if b is None else float(b) for b in budgets) or (None,)
    envs = sorted({r.env_id for r in runs})
    groups = _group_order(r.group for r in runs)
    if k_max is None:
        counts = [len([r for r in runs if r.env_id == e and r.group == g]) for e in envs for g in groups]
        k_max = max(counts + [1])
    ks = tuple(range(1, max(1, k_max) + 1))
    c = Comparison(runs, budgets, ks, n_boot, seed, level, envs, groups, rule=rule, left_out=left_out)
    if left_out:
        c.warnings.append(f"counted by {c.rule_words}: left out {len(left_out)} run(s) it cannot count, since none of "
                          "their scorings records which files it scored (no attempt fingerprints): "
                          + ", ".join(f"{r.run_id} ({r.group})" for r in left_out[:10]) + (" …" if len(left_out) > 10 else "")
                          + "; --rule paper counts every run")
    _anchor_uses(c)
    main = c.budget
    for g in groups:
        for e in envs + [ALL]:
            rs = c.runs_of(e, g)
            if rs:
                c.stats[(e, g)] = _stats(e, g, rs, budgets, main)
        for b in budgets:
            c.score_at_k[(g, b)] = score_at_k(c.runs_of(None, g), ks, b, group=g, n_boot=n_boot, seed=seed, level=level)
    return c
