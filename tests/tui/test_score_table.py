"""The app's tables on their own: what they draw after rows arrive (a real Textual app, no session)."""

from __future__ import annotations

import pytest
from textual.app import App, ComposeResult

from rebench_tui.tui.screens.compare import CompareTable
from rebench_tui.tui.widgets.score_history import ScoreTable
from rebench_tui.tui.widgets.table import MeasuredTable


class _OneTable(App):
    def __init__(self, table: MeasuredTable) -> None:
        super().__init__()
        self.table = table

    def compose(self) -> ComposeResult:
        yield self.table


async def _measured(pilot, table: MeasuredTable) -> None:
    """Let the table measure its new rows (it does when its queue runs empty). ``pilot.pause()``
    alone judges idle by CPU use and can return before that on a loaded machine."""
    for _ in range(500):
        await pilot.pause(0.01)
        if not table._require_update_dimensions:
            return


def _drawn(table: MeasuredTable) -> list[str]:
    return [table.render_line(y).text for y in range(table.row_count + 1)]


@pytest.mark.parametrize("make", [lambda: ScoreTable(hidden=False), lambda: CompareTable()], ids=["score", "compare"])
async def test_a_row_drawn_before_it_was_measured_is_drawn_again_at_its_width(make):
    """DataTable measures new rows when its queue runs empty, and caches drawn rows by its count
    of changes, not by column widths: a row drawn in between (a busy machine) kept the narrower
    column, "re-score of 1" cut to "re-scor", until some later change. The table draws it whole."""
    app = _OneTable(make())
    async with app.run_test(size=(160, 8)) as pilot:
        table = app.table
        if not table.columns:
            table.add_columns("#", "attempt", "spread")
        width = len(table.columns)
        table.add_row(*["1"] * width, key="1")
        await _measured(pilot, table)
        table.add_row(*(["2", "re-score of 1", "2 · 5 · 5–5"] + [""] * width)[:width], key="2")
        early = _drawn(table)  # drawn before the table had measured the new row
        assert "re-score of 1" not in early[2], early  # the case this test is about did happen
        await _measured(pilot, table)
        assert not table._require_update_dimensions  # measured now
        lines = _drawn(table)
        assert "re-score of 1" in lines[2] and "2 · 5 · 5–5" in lines[2], lines
