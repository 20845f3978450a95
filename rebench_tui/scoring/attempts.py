"""Attempts: scorings of the same files (one attempt fingerprint) grouped, each counting with the
median of its valid scorings; and which scorings are the finish's recounts."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from .scale import Aggregation, Direction

#
# Timing scores are noisy: scoring the same files again gives another draw. Taking the best of
# every scoring would reward the luckiest draw, and pressing the score key again on unchanged
# files could only ever help. So scorings are grouped into attempts: scorings of the same files
# (the same attempt fingerprint, recorded in each scoring's details as ``attempt.fingerprint``)
# are re-scores of one attempt, and an attempt counts with the median of its valid scorings.


ATTEMPT_KEY = "attempt"  # the details key that holds {"fingerprint": ..., "n_files": ..., "source": ...}


def attempt_fingerprint(details: Any) -> str | None:
    """The attempt fingerprint a scoring's details record, or None (an older scoring, or a
    malformed value: that scoring is then an attempt of its own)."""
    if not isinstance(details, dict):
        return None
    info = details.get(ATTEMPT_KEY)
    fp = info.get("fingerprint") if isinstance(info, dict) else None
    return fp if isinstance(fp, str) and fp else None


@dataclass(frozen=True)
class Attempt:
    """One attempt: every scoring of the same files.

    ``indexes`` are positions (0-based) in the list of scorings given, every scoring of the
    attempt in order, invalid ones (NaN) included; ``values`` are its valid scores in order. A
    NaN re-score does not enter the median (a scorer that timed out once on files that score
    fine otherwise does not spoil them, as a NaN never counted before); an attempt whose every
    scoring is NaN is invalid and never counts."""

    number: int  # 1-based, in the order of each attempt's first scoring
    fingerprint: str | None  # None: a scoring recorded without one (an attempt of its own)
    indexes: tuple[int, ...]
    valid_indexes: tuple[int, ...]
    values: tuple[float, ...]
    # Where failures count against an attempt (timing environments), the direction that says
    # which valid scoring is its worst; None: failed scorings are left out.
    against: Direction | None = None

    @property
    def failures(self) -> int:
        """Scorings of the attempt that gave no valid score (NaN)."""
        return len(self.indexes) - len(self.valid_indexes)

    @property
    def score(self) -> float:
        """What the attempt counts with: the median of its valid scorings; where failures count
        against it and one of its scorings failed, its worst valid scoring (a NaN the
        participant's code can cause on purpose, say on a slow draw, then never helps)."""
        if self.against is not None and self.failures and self.values:
            return max(self.values) if self.against is Direction.LOWER else min(self.values)
        return self.median

    @property
    def n(self) -> int:
        """Valid scorings."""
        return len(self.values)

    @property
    def valid(self) -> bool:
        return bool(self.values)

    @property
    def median(self) -> float:
        """The attempt's score: the median of its valid scorings (the mean of the middle two for an
        even count); one scoring counts as itself; NaN when none is valid."""
        return statistics.median(self.values) if self.values else math.nan

    @property
    def low(self) -> float:
        return min(self.values) if self.values else math.nan

    @property
    def high(self) -> float:
        return max(self.values) if self.values else math.nan

    @property
    def representative(self) -> int | None:
        """The valid scoring that stands for the attempt where one scoring must be named (the
        ``final_attempt`` of a session): the one nearest the median, the earliest on a tie. With
        an odd count it is the median scoring itself."""
        if not self.values:
            return None
        m = self.score
        best = min(range(len(self.values)), key=lambda i: abs(self.values[i] - m))
        return self.valid_indexes[best]


def group_attempts(scores: Sequence[float], fingerprints: Sequence[str | None] | None = None, *,
                   against: Direction | None = None) -> list[Attempt]:
    """Scorings grouped by fingerprint, in the order of each attempt's first scoring.

    Scorings with the same fingerprint belong together wherever they are in the list (files
    changed and then changed back are the same attempt again); a scoring without one is an
    attempt of its own. ``against``: see :attr:`Attempt.against`."""
    if fingerprints is not None and len(fingerprints) != len(scores):
        raise ValueError(f"{len(scores)} scores but {len(fingerprints)} fingerprints")
    order: list[str | int] = []
    members: dict[str | int, list[int]] = {}
    for i in range(len(scores)):
        fp = fingerprints[i] if fingerprints is not None else None
        key: str | int = fp if fp else i
        if key not in members:
            members[key] = []
            order.append(key)
        members[key].append(i)
    return [_attempt(n, key if isinstance(key, str) else None, members[key], scores, against)
            for n, key in enumerate(order, start=1)]


def _attempt(number: int, fingerprint: str | None, idx: Sequence[int], scores: Sequence[float],
             against: Direction | None) -> Attempt:
    valid = tuple(i for i in idx if math.isfinite(scores[i]))
    return Attempt(number, fingerprint, tuple(idx), valid, tuple(float(scores[i]) for i in valid), against)


def _pick(attempts: Iterable[Attempt], aggregation: Aggregation) -> Attempt | None:
    """The attempt that counts among ``attempts``: the best score (the earliest attempt on a tie),
    or for ``last`` the attempt of the last valid scoring."""
    valid = [a for a in attempts if a.valid]
    if not valid:
        return None
    if aggregation is Aggregation.LAST:
        return max(valid, key=lambda a: a.valid_indexes[-1])
    pick = min if aggregation is Aggregation.MIN else max
    return pick(valid, key=lambda a: a.score)  # min/max keep the first of equals: the earliest attempt


RECOUNT_KEY = "recount"  # the details key of a scoring the workstation made at the finish to re-measure an attempt


def is_recount(details: Any) -> bool:
    """Whether a scoring's details mark it as a recount (a fresh scoring of the leading attempt,
    made by the workstation at the finish), not a scoring the participant asked for."""
    return isinstance(details, dict) and isinstance(details.get(RECOUNT_KEY), dict)


