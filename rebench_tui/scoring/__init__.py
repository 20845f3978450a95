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

The package's parts: ``scale`` (direction, aggregation, normalization), ``result`` (a scorer's
result parsed), ``attempts`` (scorings grouped by the files they scored) and ``rule`` (the score
that counts).
"""

from .attempts import ATTEMPT_KEY, RECOUNT_KEY, Attempt, attempt_fingerprint, group_attempts, is_recount
from .result import EXIT_KILLED, OUTPUT_TAIL_CHARS, ScoreResult, json_score, message_words, parse_scorer_output
from .rule import Rule, counting_attempt, counting_score, running_counting
from .scale import Aggregation, Direction, is_better, normalize

__all__ = [
    "ATTEMPT_KEY", "EXIT_KILLED", "OUTPUT_TAIL_CHARS", "RECOUNT_KEY", "Aggregation", "Attempt", "Direction", "Rule",
    "ScoreResult", "attempt_fingerprint", "counting_attempt", "counting_score", "group_attempts", "is_better",
    "is_recount", "json_score", "message_words", "normalize", "parse_scorer_output", "running_counting",
]
