"""The screen shows the score that counts with its spread, says that the finish will recount it,
and shows the recount once it is done."""

from __future__ import annotations

from textual.widgets import Input

from rebench_tui.tui.app import RebenchApp
from rebench_tui.tui.screens.dialogs import SubmitScreen
from rebench_tui.tui.widgets.score_history import ScoreTable
from tests.unit.test_counting_rule import farm_env

SIZE = (140, 42)


async def _press(app, pilot, *keys):
    await pilot.press(*keys)
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()


async def test_the_screen_shows_the_spread_and_the_recount(toy_session, env_copy):
    s = toy_session(farm_env(env_copy))
    (s.workspace / "solution" / "answer.txt").write_text("noisy")
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        best = app.query_one("#best")
        await _press(app, pilot, "s")
        text = str(best.render())
        assert "counts (lowest): 3 " in text and "one scoring: no spread yet" in text
        assert "at the finish it is scored 3 more times" in text
        await _press(app, pilot, "s")
        assert "median of 2 re-scores, 1–3" in str(best.render())
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, SubmitScreen)
        app.screen.query_one(Input).value = "done"
        await _press(app, pilot, "enter")
        # the final scoring drew 5 (median of 3, 1, 5: 3); the recount drew 2, 4, 0.5: its median 2 counts
        text = str(best.render())
        assert "counts (lowest): 2 " in text and "recounted at the finish: median of 3 fresh scorings, 0.5–4" in text
        assert "more times" not in text
        table = app.query_one(ScoreTable)
        labels = [table.get_row_at(i)[5] for i in range(table.row_count)]
        assert labels == ["1", "re-score of 1", "re-score of 1"] + ["recount at the finish"] * 3
        assert [table.get_row_at(i)[4] for i in range(table.row_count)] == ["", "", "", "★", "★", "★"]
    assert s.meta.final_score == 2.0
