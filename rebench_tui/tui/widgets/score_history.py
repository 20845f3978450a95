"""Score history: a table of every scoring and a chart of score against working time."""

from __future__ import annotations

import json
import math

from textual.widgets import DataTable
from textual_plotext import PlotextPlot

from ...clock import format_hms
from ...scoring import Aggregation, running_final
from ...session.records import ScoreRecord


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


class ScoreTable(DataTable):
    DEFAULT_CSS = "ScoreTable { height: 1fr; min-height: 4; }"

    def __init__(self, hidden: bool, **kw) -> None:
        super().__init__(cursor_type="row", zebra_stripes=True, **kw)
        self.hidden = hidden

    def on_mount(self) -> None:
        self.add_columns("#", "working time", "score", "normalized", "best", "message")

    def add_record(self, rec: ScoreRecord, is_best: bool) -> None:
        if self.hidden:
            cells = (str(rec.attempt), format_hms(rec.working_s), "hidden", "hidden", "", "scored (this environment hides scores)")
        else:
            cells = (str(rec.attempt), format_hms(rec.working_s), _fmt(rec.score), fmt_normalized(rec.normalized),
                     "★" if is_best else "", message_text(rec.message))
        self.add_row(*cells, key=str(rec.attempt))
        self.move_cursor(row=self.row_count - 1)

    def mark_best(self, best_attempt: int | None) -> None:
        if self.hidden:
            return
        col = self.ordered_columns[4].key
        for row_key in self.rows:
            self.update_cell(row_key, col, "★" if row_key.value == str(best_attempt) else "")


class ScoreChart(PlotextPlot):
    DEFAULT_CSS = "ScoreChart { height: 12; }"

    def __init__(self, hidden: bool, aggregation: Aggregation, **kw) -> None:
        super().__init__(**kw)
        self.hidden = hidden
        self.aggregation = aggregation
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
            best = running_final([r.score for r in self.records], self.aggregation)
            bx = [r.working_s / 3600 for r, b in zip(self.records, best) if math.isfinite(b)]
            by = [b for b in best if math.isfinite(b)]
            plt.plot(bx, by, label="counts" if self.aggregation is Aggregation.LAST else "best so far")
        self.refresh()
