"""Pure scoring rules: parsing a scorer's result, normalization, aggregation.

A scorer writes ``{"score": x, "message": {...}, "details": {...}}`` into its result channel (a
descriptor only the scorer's own process holds; the supervisor reads it back). Its stdout is never
read for a result: a line printed there, by the scorer or by anything it ran, is just output.
``score`` may be a number, ``null`` or NaN. ``message`` is shown to the participant (unless the
environment hides scores), ``details`` is kept from them. What it printed is kept as a tail in
``details`` for the researcher.

Which scorings count (:class:`Rule`): scorings of unchanged files are re-scores of one attempt;
each attempt counts with the median of its valid scorings (in timing environments, an attempt
with a failed scoring counts with its worst valid one), and the best attempt (or the last one, for
``last`` environments) gives the score that counts. Where the session re-measured its leading
attempt at the finish (a *recount*), the median of those fresh scorings counts instead. The
paper's rule (:meth:`Rule.paper`) is the best (or last) single valid scoring.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Iterable, Sequence

OUTPUT_TAIL_CHARS = 4000
EXIT_KILLED = 137  # 128 + SIGKILL: the kernel's OOM killer (timeouts are reported separately)


class Direction(StrEnum):
    LOWER = "lower"
    HIGHER = "higher"


class Aggregation(StrEnum):
    MIN = "min"
    MAX = "max"
    LAST = "last"


@dataclass(frozen=True)
class ScoreResult:
    score: float
    message: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return math.isfinite(self.score)


def _tail(text: str, limit: int = OUTPUT_TAIL_CHARS) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def _as_float(value: Any) -> float | None:
    """A score value as a float: numbers, null, and the strings NaN/Infinity/-Infinity."""
    if value is None:
        return math.nan
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _plain_json(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with NaN and Infinity written as the strings "NaN", "Infinity", "-Infinity", so the
    audit log (strict JSON) and the score log keep the same value."""
    try:
        return json.loads(json.dumps(obj), parse_constant=lambda c: c)
    except (ValueError, RecursionError):
        return {"value": "unreadable (nested too deeply)"}


def _find_result_line(stdout: str) -> tuple[dict[str, Any], str] | None:
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):  # garbage, or nesting deeper than the parser goes
            continue
        if isinstance(obj, dict) and "score" in obj:
            return obj, line
    return None


def _tails(stdout: str, stderr: str, exit_code: int, result_line: str | None = None) -> dict[str, Any]:
    """What the scorer printed besides its result line, for the researcher (only what is non-empty)."""
    if result_line is not None:
        lines = stdout.splitlines()
        for i in range(len(lines) - 1, -1, -1):
            if lines[i].strip() == result_line:
                del lines[i]
                break
        stdout = "\n".join(lines)
    out: dict[str, Any] = {"exit_code": exit_code}
    if stdout.strip():
        out["stdout_tail"] = _tail(stdout)
    if stderr.strip():
        out["stderr_tail"] = _tail(stderr)
    return out


def parse_scorer_output(channel: str | None, stdout: str, stderr: str, exit_code: int, *,
                        timed_out: bool = False) -> ScoreResult:
    """Turn one scorer run into a result, mapping every failure to NaN with a reason.

    ``channel``: what the scorer wrote into its result channel (None: nothing). The result is taken
    from there alone; a result line on stdout does not count."""
    tails = _tails(stdout, stderr, exit_code)
    if timed_out:
        return ScoreResult(math.nan, {"timeout": True}, tails)
    if exit_code == EXIT_KILLED:
        return ScoreResult(math.nan, {"out_of_memory": True}, tails)
    found = _find_result_line(channel or "")
    if found is None:
        if exit_code != 0:
            reason = f"the scorer exited with status {exit_code}"
        elif _find_result_line(stdout) is not None:
            reason = "the scorer wrote no result into its result channel (a result line on its output does not count)"
        else:
            reason = "the scorer wrote no result line into its result channel"
        return ScoreResult(math.nan, {"error": reason}, tails)
    obj, line = found
    tails = _tails(stdout, stderr, exit_code, line)
    message = obj.get("message", {})
    details = obj.get("details", {})
    message = _plain_json(message if isinstance(message, dict) else {"value": message})
    details = _plain_json(details if isinstance(details, dict) else {"value": details})
    details = {**details, **tails}
    score = _as_float(obj.get("score"))
    if score is None:
        return ScoreResult(math.nan, {**message, "error": f"the scorer's score is not a number: {obj.get('score')!r}"}, details)
    if exit_code != 0 and math.isfinite(score):
        return ScoreResult(math.nan, {**message, "error": f"the scorer exited with status {exit_code}"}, {**details, "reported_score": score})
    return ScoreResult(score, message, details)


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


# -- which scorings count ------------------------------------------------------------------------
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


def message_words(message: dict[str, Any]) -> str:
    """A scorer's message as a reader takes it: "answer 7; secret ok: yes", not a Python dict.
    Numbers to 4 significant digits, flags as yes/no, anything nested as compact JSON."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, float):
            return f"{v:.4g}"
        if isinstance(v, (dict, list)):
            return json.dumps(v, default=str, separators=(", ", ": "))
        return str(v)

    return "; ".join(f"{str(k).replace('_', ' ')}: {value(v)}" for k, v in message.items())


def json_score(score: float) -> float | str:
    """A score as Vivaria's trace schema accepts it: finite numbers, or the strings NaN/Infinity/-Infinity."""
    if math.isnan(score):
        return "NaN"
    if math.isinf(score):
        return "Infinity" if score > 0 else "-Infinity"
    return score
