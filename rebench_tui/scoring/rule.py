"""The rule that turns a run's scorings into the score that counts (:class:`Rule`), the
workstation's and the paper's, and the plain helpers over it."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

from .attempts import Attempt, _attempt, _pick, group_attempts
from .scale import Aggregation, Direction

@dataclass(frozen=True)
class Rule:
    """How a run's scorings become the score that counts.

    - :meth:`attempt` / :meth:`score`, the workstation's rule: scorings grouped into attempts by
      fingerprint, each attempt counting with its median (where ``failures_count``, an attempt
      with a failed scoring counts with its worst valid one), the best (or last) attempt counting.
      Where recounts are given and any scoring is one, the recount's scorings alone count: they
      form the attempt the session re-measured at its finish, and their median (or, where
      failures count and one failed, their worst valid value) is the score. A recount none of
      whose scorings is valid counts as no score: there is no falling back to the scorings that
      chose the attempt.
    - :meth:`paper`: RE-Bench's rule, the best single valid scoring the participant asked for
      (the last for ``last``), recounts left out; comparable with METR's published numbers.
    """

    aggregation: Aggregation
    direction: Direction
    failures_count: bool = False  # timing environments: a failed re-score counts against its attempt

    @property
    def _against(self) -> Direction | None:
        return self.direction if self.failures_count else None

    def attempts(self, scores: Sequence[float], fingerprints: Sequence[str | None] | None = None) -> list[Attempt]:
        return group_attempts(scores, fingerprints, against=self._against)

    def attempt(self, scores: Sequence[float], fingerprints: Sequence[str | None] | None = None,
                recounts: Sequence[bool] | None = None) -> Attempt | None:
        """The attempt that counts (None: none valid). Indexes are positions in ``scores``."""
        if recounts is not None and any(recounts):
            idx = [i for i, r in enumerate(recounts) if r]
            fp = fingerprints[idx[0]] if fingerprints is not None else None
            own = [i for i, r in enumerate(recounts) if not r]
            number = next((a.number for a in self.attempts([scores[i] for i in own],
                                                           [fingerprints[i] for i in own] if fingerprints else None)
                           if fp is not None and a.fingerprint == fp), 0)
            a = _attempt(number, fp, idx, scores, self._against)
            return a if a.valid else None
        return _pick(self.attempts(scores, fingerprints), self.aggregation)

    def score(self, scores: Sequence[float], fingerprints: Sequence[str | None] | None = None,
              recounts: Sequence[bool] | None = None) -> float:
        a = self.attempt(scores, fingerprints, recounts)
        return math.nan if a is None else a.score

    def _value(self, values: Sequence[float], failed: int) -> float:
        """An attempt's score from its valid values so far and how many of its scorings failed."""
        if not values:
            return math.nan
        if self.failures_count and failed:
            return max(values) if self.direction is Direction.LOWER else min(values)
        return statistics.median(values)

    def running(self, scores: Sequence[float], fingerprints: Sequence[str | None] | None = None,
                recounts: Sequence[bool] | None = None) -> list[float]:
        """The counting score after each scoring (NaN until the first valid one): :meth:`score` of
        every prefix, computed in one pass. Not monotone: a re-score can move its attempt's score."""
        if fingerprints is not None and len(fingerprints) != len(scores):
            raise ValueError(f"{len(scores)} scores but {len(fingerprints)} fingerprints")
        values: dict[str | int, list[float]] = {}
        failed: dict[str | int, int] = {}
        order: list[str | int] = []  # keys in the order of their first scoring (the earliest wins a tie)
        last: str | int | None = None
        recount: list[float] | None = None  # the recount's valid values, once it began
        recount_failed = 0
        out: list[float] = []
        for i, s in enumerate(scores):
            ok = math.isfinite(s)
            if recounts is not None and recounts[i]:
                recount = recount if recount is not None else []
                if ok:
                    recount.append(float(s))
                else:
                    recount_failed += 1
                out.append(self._value(recount, recount_failed))
                continue
            fp = fingerprints[i] if fingerprints is not None else None
            key: str | int = fp if fp else i
            if key not in values:
                values[key], failed[key] = [], 0
                order.append(key)
            if ok:
                values[key].append(float(s))
                last = key
            else:
                failed[key] += 1
            if recount is not None:
                out.append(self._value(recount, recount_failed))
            elif last is None:
                out.append(math.nan)
            elif self.aggregation is Aggregation.LAST:
                out.append(self._value(values[last], failed[last]))
            else:
                scored = [self._value(values[k], failed[k]) for k in order if values[k]]
                out.append(min(scored) if self.aggregation is Aggregation.MIN else max(scored))
        return out

    def paper_running(self, scores: Sequence[float], recounts: Sequence[bool] | None = None) -> list[float]:
        """The paper's rule after each scoring (NaN until the first valid one; monotone but for ``last``)."""
        out: list[float] = []
        cur = math.nan
        for i, s in enumerate(scores):
            if math.isfinite(s) and not (recounts and recounts[i]):
                if self.aggregation is Aggregation.LAST or math.isnan(cur):
                    cur = float(s)
                else:
                    cur = min(cur, s) if self.aggregation is Aggregation.MIN else max(cur, s)
            out.append(cur)
        return out

    def paper(self, scores: Sequence[float], recounts: Sequence[bool] | None = None) -> float:
        """RE-Bench's rule: the best valid scoring (the last valid one for ``last``), recounts left out."""
        own = [s for i, s in enumerate(scores) if math.isfinite(s) and not (recounts and recounts[i])]
        if not own:
            return math.nan
        if self.aggregation is Aggregation.LAST:
            return own[-1]
        return min(own) if self.aggregation is Aggregation.MIN else max(own)


def _plain(aggregation: Aggregation) -> Rule:
    """The rule without failures counting (the direction then plays no part)."""
    return Rule(aggregation, Direction.HIGHER if aggregation is Aggregation.MAX else Direction.LOWER)


def counting_attempt(scores: Sequence[float], aggregation: Aggregation,
                     fingerprints: Sequence[str | None] | None = None) -> Attempt | None:
    """The attempt whose median is the score that counts (None: no valid scoring), failed
    re-scores left out; :class:`Rule` is the whole rule.

    Rule: group the scorings by attempt (:func:`group_attempts`), score each attempt with the
    median of its valid scorings, then take the best attempt by ``min``/``max``, or for ``last``
    the attempt of the last valid scoring. Without fingerprints every scoring is its own attempt
    and this is the plain rule: the best valid scoring, or the last valid one."""
    return _plain(aggregation).attempt(scores, fingerprints)


def counting_score(scores: Sequence[float], aggregation: Aggregation,
                   fingerprints: Sequence[str | None] | None = None) -> float:
    """The score that counts (NaN: no valid scoring). See :func:`counting_attempt`."""
    return _plain(aggregation).score(scores, fingerprints)


def running_counting(scores: Sequence[float], aggregation: Aggregation,
                     fingerprints: Sequence[str | None] | None = None) -> list[float]:
    """The counting score after each scoring (NaN until the first valid one); see :meth:`Rule.running`."""
    return _plain(aggregation).running(scores, fingerprints)


