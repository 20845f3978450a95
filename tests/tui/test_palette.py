"""The command palette (ctrl+p) offers the session's commands with their keys as remapped, and
running one from there does what its key does."""

from __future__ import annotations

from textual.command import CommandPalette
from textual.widgets import OptionList

from rebench_tui.tui.app import RebenchApp
from rebench_tui.tui.widgets.score_history import ScoreTable

SIZE = (140, 42)


async def test_the_palette_lists_session_commands_with_remapped_keys_and_runs_them(toy_session):
    s = toy_session()
    app = RebenchApp(s, keymap={"score": "f5"}, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        assert isinstance(app.screen, CommandPalette)
        await pilot.press(*"score")
        await pilot.pause(0.5)
        options = app.screen.query_one(OptionList)
        shown = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert any("Score (f5)" in text for text in shown), shown
        await pilot.press("enter")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.query_one(ScoreTable).row_count == 1 and len(s.history) == 1
