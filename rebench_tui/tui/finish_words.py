"""What the screen says about the score that counts and about the finish, as plain sentences.

One numbering everywhere: a *scoring* is numbered in the order it was taken (the table's ``#``,
``ScoreRecord.attempt``); an *attempt* is a set of files, numbered in the order it was first
scored, and its scorings are re-scores of it (``scoring.Rule.attempts``). The toasts, the counts
line, the table and the finish's progress all say "scoring N" for the first and "attempt N" for
the second, never one for the other.
"""

from __future__ import annotations

import math
import statistics
from typing import Sequence

from ..scoring import Attempt
from ..trajectory.records import ScoreRecord

RULE_WORDS = {"min": "lowest", "max": "highest", "last": "last valid"}


def _fmt(x: float) -> str:
    return "NaN" if not math.isfinite(x) else f"{x:.4g}"


def rule_sentence(aggregation: str, recount_runs: int, failures_count: bool = False) -> str:
    """The session's rule in one sentence, as the participant reads it before submitting."""
    if aggregation == "last":
        pick = "your last valid attempt counts"
    else:
        pick = f"the attempt with the {RULE_WORDS[aggregation]} score counts"
    rescore = ("scorings of unchanged files are one attempt, which counts with their median"
               + (" (with its worst valid value if one of them failed)" if failures_count else ""))
    later = (f"; after this last scoring, the attempt that leads is scored {recount_runs} more times from the copy "
             f"of its files kept when it was scored, and the median of those {recount_runs} is your final score, "
             "even if it is worse" if recount_runs > 0 else "")
    return f"What counts: {rescore}; {pick}{later}."


def attempt_of(attempts: Sequence[Attempt], record: ScoreRecord) -> Attempt | None:
    """The attempt ``record`` (a scoring of the grouped history) belongs to."""
    pos = record.attempt - 1
    return next((a for a in attempts if pos in a.indexes), None)


def scoring_words(record: ScoreRecord, attempts: Sequence[Attempt]) -> str:
    """'scoring 4 (attempt 2)': the scoring's own number and the attempt it scored."""
    a = attempt_of(attempts, record)
    if record.recount:
        return f"scoring {record.attempt} (recount of attempt {recount_info(record).get('of_attempt', '?')})"
    return f"scoring {record.attempt}" + (f" (attempt {a.number})" if a is not None else "")


def recount_info(record: ScoreRecord) -> dict:
    """What the recount wrote into a recount scoring's details: of_attempt, run, runs."""
    info = record.details.get("recount") if isinstance(record.details, dict) else None
    return info if isinstance(info, dict) else {}


def recount_progress(record: ScoreRecord, history: Sequence[ScoreRecord]) -> str:
    """'recount 2 of 5 of attempt 3: 4.1 (median so far 4.05)' after a recount scoring."""
    info = recount_info(record)
    values = [r.score for r in history if r.recount and r.valid]
    median = f"median so far {_fmt(statistics.median(values))}" if values else "no valid value yet"
    value = _fmt(record.score) if record.valid else f"NaN ({record.message.get('error', 'failed')})"
    run, runs = info.get("run", "?"), info.get("runs", "?")
    more = "" if run == runs else f"; scoring {int(run) + 1} of {runs} next" if isinstance(run, int) else ""
    return f"recount {run} of {runs} of attempt {info.get('of_attempt', '?')}: {value} ({median}){more}"


def final_scored(record: ScoreRecord, attempts: Sequence[Attempt], recount_runs: int) -> str:
    """After the final scoring: what it gave and what comes next."""
    value = _fmt(record.score) if record.valid else "NaN"
    then = (f"; next the recount: the leading attempt is scored {recount_runs} more times from its kept files "
            "(skipped, and said in the record, where no copy was kept)" if recount_runs > 0 else "")
    return f"final scoring done, {scoring_words(record, attempts)}: {value}{then}"
