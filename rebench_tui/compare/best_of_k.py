"""score@k: the exact expected best of ``k`` runs drawn with replacement, averaged over
environments, with its seeded percentile-bootstrap band (the formulas are in :mod:`.analysis`)."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from .curves import INVALID_AS, final_value
from .runs import Run


def expected_max(values: Sequence[float], k: int) -> float:
    """E[max of k draws with replacement] from ``values``, exactly: ``sum_i v_(i) ((i/n)^k - ((i-1)/n)^k)``."""
    if k < 1:
        raise ValueError("k must be at least 1")
    v = sorted(values)
    n = len(v)
    if n == 0:
        return math.nan
    if any(math.isnan(x) for x in v):
        raise ValueError("expected_max needs numbers; map invalid runs to a value first")
    total = 0.0
    prev = 0.0
    for i, x in enumerate(v, start=1):
        cur = (i / n) ** k
        total += x * (cur - prev)
        prev = cur
    return total


def expected_max_all(values: Sequence[float], ks: Sequence[int]) -> list[float]:
    return [expected_max(values, k) for k in ks]


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """The q-quantile with linear interpolation between order statistics (numpy's default)."""
    n = len(sorted_values)
    if n == 0:
        return math.nan
    pos = q * (n - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, n - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def score_at_k_values(values_by_env: dict[str, Sequence[float]], ks: Sequence[int]) -> list[float]:
    """score@k for each k: the mean over environments of the exact expected best of k."""
    envs = [e for e, v in values_by_env.items() if len(v)]
    if not envs:
        return [math.nan for _ in ks]
    per = [expected_max_all(values_by_env[e], ks) for e in envs]
    return [sum(p[j] for p in per) / len(per) for j in range(len(ks))]


def bootstrap_band(values_by_env: dict[str, Sequence[float]], ks: Sequence[int], *, n_boot: int = 1000,
                   seed: int = 0, level: float = 0.95) -> tuple[list[float], list[float]]:
    """Percentile-bootstrap band of score@k (see the module text); (low, high) per k."""
    envs = [e for e, v in values_by_env.items() if len(v)]
    if not envs or n_boot < 1:
        return [math.nan] * len(ks), [math.nan] * len(ks)
    rng = random.Random(seed)
    reps: list[list[float]] = [[] for _ in ks]
    for _ in range(n_boot):
        resampled = {e: [rng.choice(values_by_env[e]) for _ in values_by_env[e]] for e in envs}
        for j, v in enumerate(score_at_k_values(resampled, ks)):
            reps[j].append(v)
    a = (1 - level) / 2
    lows, highs = [], []
    for r in reps:
        r.sort()
        lows.append(quantile(r, a))
        highs.append(quantile(r, 1 - a))
    return lows, highs


@dataclass(frozen=True)
class ScoreAtK:
    group: str
    budget_s: float | None
    ks: tuple[int, ...]
    expected: tuple[float, ...]
    low: tuple[float, ...]
    high: tuple[float, ...]
    per_env: dict[str, tuple[float, ...]] = field(default_factory=dict)
    n_runs: dict[str, int] = field(default_factory=dict)

    def at(self, k: int) -> float:
        return self.expected[self.ks.index(k)] if k in self.ks else math.nan


def finals_by_env(runs: Iterable[Run], budget_s: float | None = None, invalid_as: float = INVALID_AS) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for r in runs:
        out.setdefault(r.env_id, []).append(final_value(r, budget_s, invalid_as))
    return out


def score_at_k(runs: Iterable[Run], ks: Sequence[int], budget_s: float | None = None, *, group: str = "",
               n_boot: int = 1000, seed: int = 0, level: float = 0.95, invalid_as: float = INVALID_AS) -> ScoreAtK:
    """score@k of a set of runs (one group) with its bootstrap band."""
    ks = tuple(ks)
    by_env = finals_by_env(runs, budget_s, invalid_as)
    low, high = bootstrap_band(by_env, ks, n_boot=n_boot, seed=seed, level=level)
    return ScoreAtK(group, budget_s, ks, tuple(score_at_k_values(by_env, ks)), tuple(low), tuple(high),
                    {e: tuple(expected_max_all(v, ks)) for e, v in by_env.items()},
                    {e: len(v) for e, v in by_env.items()})


def average_normalized(runs: Iterable[Run], budget_s: float | None = None, invalid_as: float = INVALID_AS) -> float:
    """Mean over environments of the mean normalized final of the runs on each."""
    by_env = finals_by_env(runs, budget_s, invalid_as)
    if not by_env:
        return math.nan
    return sum(sum(v) / len(v) for v in by_env.values()) / len(by_env)
