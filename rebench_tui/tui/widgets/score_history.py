"""Score history: a table of every scoring and a chart of score against working time.

Scorings of unchanged files are re-scores of one attempt (``scoring.group_attempts``); the table
says which attempt each scoring belongs to and that attempt's spread, and the chart's line is the
score that would count after each scoring (the rule applied to the scorings so far), drawn as steps.
"""

from __future__ import annotations

import json
import math

from textual_plotext import PlotextPlot

from ...clock import format_hms
from ...scoring import Aggregation, Attempt, Direction, Rule
from ...trajectory.records import CountingScore, ScoreRecord
from .table import MeasuredTable


def _fmt(x: float, digits: int = 4) -> str:
    return "NaN" if not math.isfinite(x) else f"{x:.{digits}g}"


def fmt_normalized(x: float) -> str:
    """Normalized scores read as fractions of the way from start (0) to reference (1)."""
    return "NaN" if not math.isfinite(x) else f"{x:.2f}"


def _short(v: object) -> str:
    return f"{v:.4g}" if isinstance(v, float) else json.dumps(v, default=str)


def message_text(message: dict, limit: int = 80) -> str:
    text = ", ".join(f"{k}={_short(v)}" for k, v in message.items())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def attempt_cells(attempt: Attempt, pos: int, hidden: bool, recount: bool = False) -> tuple[str, str]:
    """The attempt columns of the scoring at ``pos`` (an index into the scorings the attempt was
    grouped from): which attempt it belongs to (``recount``: a fresh scoring the finish took), and
    that attempt's n · median · min–max."""
    label = str(attempt.number) if pos == attempt.indexes[0] else f"re-score of {attempt.number}"
    if recount:
        label = "recount at the finish"
    nan = len(attempt.indexes) - attempt.n
    n = f"{attempt.n}" + (f" (+{nan} NaN)" if nan else "")
    if hidden or attempt.n < 2:
        return label, n
    return label, f"{n} · {_fmt(attempt.median)} · {_fmt(attempt.low)}–{_fmt(attempt.high)}"


class ScoreTable(MeasuredTable):
    """One row per scoring. ``best`` stars the scorings whose median is the score that counts now;
    ``attempt`` says which attempt a scoring belongs to (scorings of unchanged files are re-scores
    of one attempt) and ``n · median · min–max`` that attempt's spread, updated as re-scores come."""

    DEFAULT_CSS = "ScoreTable { height: 1fr; min-height: 4; }"
    COLUMNS = ("#", "working time", "score", "normalized", "best", "attempt", "n · median · min–max", "message")
    BEST, ATTEMPT, SPREAD = 4, 5, 6

    def __init__(self, hidden: bool, **kw) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)
        self.hidden = hidden

    def on_mount(self) -> None:
        self.add_columns(*self.COLUMNS)

    def show(self, records: list[ScoreRecord], attempts: list[Attempt], counting: CountingScore | None) -> None:
        """Show ``records`` (a session's history, in order): new ones are added, the attempt cells of
        those already shown are brought up to date."""
        of = {i: a for a in attempts for i in a.indexes}
        counts = set(counting.scorings) if counting is not None else set()
        cols = [c.key for c in self.ordered_columns]
        added = False
        for i, rec in enumerate(records):
            label, spread = attempt_cells(of[i], i, self.hidden, rec.recount)
            star = "★" if rec.attempt in counts and not self.hidden else ""
            key = str(rec.attempt)
            if key in self.rows:
                for col, value in ((self.BEST, star), (self.ATTEMPT, label), (self.SPREAD, spread)):
                    if self.get_cell(key, cols[col]) != value:
                        self.update_cell(key, cols[col], value)
                continue
            if self.hidden:
                cells = (key, format_hms(rec.working_s), "hidden", "hidden", "", label, spread,
                         "scored (this environment hides scores)")
            else:
                cells = (key, format_hms(rec.working_s), _fmt(rec.score), fmt_normalized(rec.normalized), star, label, spread,
                         message_text(rec.message))
            self.add_row(*cells, key=key)
            added = True
        if added:
            self.move_cursor(row=self.row_count - 1)


# The chart's line is one thing: the score that would count if the session ended at that moment
# (the session's rule applied to the scorings so far). It is not a "best so far": a re-score that
# moves its attempt's median, or the finish's recount, moves it, either way, and the line shows it.
COUNTS_LABEL = "counts if it ended here"


def counting_steps(xs: list[float], counting: list[float]) -> tuple[list[float], list[float]]:
    """The counting score after each scoring as a step line: it holds its value until the next
    scoring changes it (a sloped segment between two scorings would show values that never
    counted). NaN points (no valid scoring yet) are left out."""
    px: list[float] = []
    py: list[float] = []
    for x, y in zip(xs, counting):
        if not math.isfinite(y):
            continue
        if py and py[-1] != y:
            px.append(x)
            py.append(py[-1])
        px.append(x)
        py.append(y)
    return px, py


class ScoreChart(PlotextPlot):
    DEFAULT_CSS = "ScoreChart { height: 12; }"

    def __init__(self, hidden: bool, aggregation: Aggregation, rule: Rule | None = None, **kw) -> None:
        super().__init__(**kw)
        self.hidden = hidden
        self.aggregation = aggregation
        self.rule = rule or Rule(aggregation, Direction.HIGHER if aggregation is Aggregation.MAX else Direction.LOWER)
        self.records: list[ScoreRecord] = []

    def on_mount(self) -> None:
        self.redraw()

    def set_records(self, records: list[ScoreRecord]) -> None:
        self.records = list(records)
        self.redraw()

    def redraw(self) -> None:
        plt = self.plt
        plt.clear_data()
        plt.clear_figure()
        plt.title("score vs working hours" if not self.hidden else "scorings (values hidden)")
        plt.xlabel("working hours")
        valid = [r for r in self.records if r.valid]
        if self.hidden:
            xs = [r.working_s / 3600 for r in self.records]
            if xs:
                plt.scatter(xs, [1] * len(xs), marker="dot")
        elif valid:
            xs = [r.working_s / 3600 for r in valid]
            plt.scatter(xs, [r.score for r in valid], label="score", marker="dot")
            # the rule's counting score after each scoring (re-scores of one attempt count with their median)
            best = self.rule.running([r.score for r in self.records], [r.fingerprint for r in self.records],
                                     [r.recount for r in self.records])
            bx, by = counting_steps([r.working_s / 3600 for r in self.records], best)
            plt.plot(bx, by, label=COUNTS_LABEL)
        self.refresh()
