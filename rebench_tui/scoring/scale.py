"""Which way a score is better, how scorings combine, and the normalized scale (0 at the starting
solution, 1 at the reference)."""

from __future__ import annotations

import math
from enum import StrEnum


class Direction(StrEnum):
    LOWER = "lower"
    HIGHER = "higher"


class Aggregation(StrEnum):
    MIN = "min"
    MAX = "max"
    LAST = "last"



def normalize(score: float, start: float, reference: float, *, clip: bool = True) -> float:
    """``(y - start) / (reference - start)``: 0 at the starting solution, 1 at the reference.

    ``clip``: worse than the start counts as 0 (the comparisons' method, like the paper's figures);
    a session's own records and screen pass ``clip=False`` and keep the real value (-0.33 is a
    third of the way further from the reference than the start, which 0 would hide). Above 1 is
    kept. The same formula serves lower-is-better scores because the denominator carries the sign.
    """
    if not math.isfinite(score):
        return math.nan
    if reference == start:
        raise ValueError("start and reference scores are equal; normalization is undefined")
    value = (score - start) / (reference - start) + 0.0  # + 0.0: no "-0.00" at the start
    return max(0.0, value) if clip else value


def is_better(a: float, b: float, direction: Direction) -> bool:
    return a < b if direction is Direction.LOWER else a > b

