"""The session screen from 80x24 to wide, its dialogs, and what the finish says, through real
Pilot sessions of the toy environment on the local runtime.

Each test asserts what a participant sees: where the dialog box is, which widgets have room,
what the footer, the status line, the toasts, the feed and the counts line say."""

from __future__ import annotations

from textual.containers import Vertical
from textual.widgets import Input
from textual.widgets._footer import FooterKey
from textual.widgets._markdown import MarkdownFence

from rebench_tui.tui.app import RebenchApp
from rebench_tui.tui.screens.dialogs import HelpScreen, NoteScreen, QuitScreen, SubmitScreen
from rebench_tui.tui.widgets.file_feed import FileFeed
from rebench_tui.tui.widgets.score_history import COUNTS_LABEL, ScoreChart, ScoreTable, counting_steps
from tests.conftest import FIXTURE_ENVS
from tests.unit.test_counting_rule import farm_env

import pytest


def _app(s) -> RebenchApp:
    app = RebenchApp(s, watch_files=False, keymap={})
    app.NOTIFICATION_TIMEOUT = 600
    return app


async def _press(pilot, *keys: str) -> None:
    await pilot.press(*keys)
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def _score(pilot, answer: str) -> None:
    app = pilot.app
    (app.session.workspace / "solution" / "answer.txt").write_text(answer)
    app.session.clock.advance(600)
    await _press(pilot, "s")


def _feed(app) -> str:
    return "\n".join(strip.text for strip in app.query_one(FileFeed).lines)


def _toasts(app) -> list[str]:
    return [str(n.message) for n in app._notifications]


# -- dialogs ------------------------------------------------------------------------------------

@pytest.mark.parametrize("key,dialog", [("q", QuitScreen), ("x", SubmitScreen), ("n", NoteScreen),
                                        ("question_mark", HelpScreen)])
@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_every_dialog_is_a_framed_box_in_the_middle(toy_session, key, dialog, size):
    """Before, the dialog's CSS never matched (Textual scopes DEFAULT_CSS to its class): the box
    filled the screen from the top left, with no frame."""
    app = _app(toy_session())
    async with app.run_test(size=size) as pilot:
        await _press(pilot, key)
        assert isinstance(app.screen, dialog)
        box = app.screen.query_one(Vertical).region
        width, height = size
        assert box.width < width and box.height < height - 2  # the session shows around it
        left, right = box.x, width - box.right
        top, bottom = box.y, height - box.bottom
        assert abs(left - right) <= 1 and abs(top - bottom) <= 1, (box, size)  # centred
        assert app.screen.query_one(Vertical).styles.border_top[0] == "thick"


async def test_the_dialogs_text_wraps_inside_the_box(toy_session):
    app = _app(toy_session())
    async with app.run_test(size=(80, 24)) as pilot:
        await _press(pilot, "q")
        box = app.screen.query_one(Vertical).content_region
        label = app.screen.query("Label").first()
        assert label.region.height >= 2 and label.region.right <= box.right  # wrapped, not cut


# -- layouts ------------------------------------------------------------------------------------

async def test_at_80x24_the_score_history_help_quit_and_isolation_are_on_screen(toy_session):
    app = _app(toy_session())
    async with app.run_test(size=(80, 24)) as pilot:
        for answer in ("7", "4", "4"):
            await _score(pilot, answer)
        table, chart = app.query_one(ScoreTable), app.query_one(ScoreChart)
        assert table.region.height >= 5 and chart.region.height >= 6  # three rows under the header, and the chart
        assert table.region.bottom <= 23 and chart.region.bottom <= 23
        assert not app.query_one("#left").display  # the info pane waits for its key
        shown = {k.description: k.region for k in app.query(FooterKey)}
        for what in ("Help", "Quit", "Score", "Submit"):
            assert what in shown and shown[what].right <= 80 and shown[what].width > 0, shown
        status = str(app.query_one("#status").render())
        assert status.startswith("⚠ local (NOT ISOLATED)")
        assert "left · RUNNING" in str(app.query_one("#clock-state").render())  # the countdown as words


async def test_the_info_key_shows_the_instructions_on_a_narrow_screen_and_hides_them_on_a_wide_one(toy_session):
    s = toy_session()
    app = _app(s)
    async with app.run_test(size=(80, 24)) as pilot:
        await _press(pilot, "i")
        assert app.query_one("#left").display and app.query_one("#anchors").region.width > 0
        assert app.query_one(ScoreTable).region.height >= 5  # the history keeps its room beside it
        await _press(pilot, "i")
        assert not app.query_one("#left").display
    s.lock.release()
    app = _app(toy_session())
    async with app.run_test(size=(200, 50)) as pilot:
        assert app.query_one("#left").display
        await _press(pilot, "i")
        assert not app.query_one("#left").display


async def test_at_120x40_the_table_header_is_whole(toy_session):
    app = _app(toy_session())
    async with app.run_test(size=(120, 40)) as pilot:
        await _score(pilot, "7")
        table = app.query_one(ScoreTable)
        assert table.virtual_size.width <= table.scrollable_content_region.width  # every column in view
        assert table.region.height >= 8


async def test_a_long_code_line_in_the_instructions_wraps_rather_than_being_cut(toy_session, env_copy):
    code = "python score.py --solution solution/answer.txt --repeat 5 --seed 1234 --report-json out.json THE_LINE_END"

    def edit(d):
        (d / "instructions.md").write_text(f"# Toy score\n\nRun:\n\n```bash\n{code}\n```\n")

    app = _app(toy_session(env_copy(FIXTURE_ENVS / "toy_score", edit)))
    async with app.run_test(size=(200, 50)) as pilot:
        await pilot.pause()
        fence = app.query_one(MarkdownFence)
        assert fence.max_scroll_x == 0  # nothing hidden to the right
        label = fence.query_one("Label")
        assert label.region.right <= app.query_one("#left").region.right
        assert "THE_LINE_END" in app.export_screenshot()


# -- the finish ---------------------------------------------------------------------------------

async def test_toasts_and_the_counts_line_number_scorings_and_attempts_alike(toy_session):
    app = _app(toy_session())
    async with app.run_test(size=(120, 40)) as pilot:
        await _score(pilot, "7")
        await _score(pilot, "4")
        await _score(pilot, "4")
        toasts = _toasts(app)
        assert toasts[-1].startswith("Scoring 3 (attempt 2): 4 ")  # scoring 3 is a re-score of attempt 2
        assert "re-score of attempt 2" in toasts[-1]
        assert "counts (lowest): 4 (normalized 0.75, attempt 2: median of 2 re-scores" in str(app.query_one("#best").render())


async def test_a_score_worse_than_the_start_shows_its_real_normalized_value(toy_session):
    app = _app(toy_session())
    async with app.run_test(size=(120, 40)) as pilot:
        await _score(pilot, "12")  # start 10, reference 2: (12 - 10) / (2 - 10) = -0.25
        table = app.query_one(ScoreTable)
        assert table.get_row_at(0)[3] == "-0.25"
        assert "normalized -0.25" in str(app.query_one("#best").render())
        assert app.session.history[-1].normalized == pytest.approx(-0.25)


async def test_submit_states_the_rule_in_one_sentence_before_the_participant_confirms(toy_session, env_copy):
    app = _app(toy_session(farm_env(env_copy)))
    async with app.run_test(size=(80, 24)) as pilot:
        await _press(pilot, "x")
        rule = str(app.screen.query_one("#rule").render())
        assert rule.startswith("What counts: scorings of unchanged files are one attempt")
        assert "the attempt with the lowest score counts" in rule
        assert "scored 3 more times" in rule and "even if it is worse" in rule
        assert rule.count(".") == 1  # one sentence


async def test_the_finish_reports_the_final_scoring_and_each_recount(toy_session, env_copy):
    s = toy_session(farm_env(env_copy))
    (s.workspace / "solution" / "answer.txt").write_text("noisy")
    app = _app(s)
    async with app.run_test(size=(120, 40)) as pilot:
        await _press(pilot, "s")
        await _press(pilot, "x")
        app.screen.query_one(Input).value = ""
        await _press(pilot, "enter")
        feed = _feed(app)
        # draws: 3 in the session, 1 at the final scoring (a re-score of attempt 1), then the recount's 5, 2, 4
        assert "final scoring done, scoring 2 (attempt 1): 1; next the recount" in feed
        assert "recount 1 of 3 of attempt 1: 5 (median so far 5); scoring 2 of 3 next" in feed
        assert "recount 2 of 3 of attempt 1: 2 (median so far 3.5); scoring 3 of 3 next" in feed
        assert "recount 3 of 3 of attempt 1: 4 (median so far 4)" in feed
        assert "the finish: counts 4, median of 3 fresh scorings of attempt 1" in feed
        assert any("Counts: 4 (normalized" in t and "fresh scorings of attempt 1" in t for t in _toasts(app))
        assert str(app.query_one("#scoring").render()) == ""  # the finish is over


def test_the_chart_line_is_the_counting_score_as_steps():
    # lower is better: 7, then 4, then a re-score that moves attempt 2's median to 5
    xs, ys = counting_steps([1.0, 2.0, 3.0], [7.0, 4.0, 5.0])
    assert (xs, ys) == ([1.0, 2.0, 2.0, 3.0, 3.0], [7.0, 7.0, 4.0, 4.0, 5.0])  # held until a scoring moves it
    assert counting_steps([1.0, 2.0], [float("nan"), 3.0]) == ([2.0], [3.0])
    assert COUNTS_LABEL == "counts if it ended here"


async def test_the_feed_shows_a_command_at_the_time_it_ran_and_its_missing_exit_status_in_words(toy_session):
    import time

    from rebench_tui.session.events import CommandsRecorded
    from rebench_tui.tui.messages import SessionUpdate

    ran = time.mktime((2026, 1, 1, 9, 15, 30, 0, 0, -1))  # local time 09:15:30, long before the rows are read
    rows = ({"type": "action", "action": {"type": "run_bash", "id": "7-1", "started_at": int(ran * 1000)}},
            {"type": "observation", "observation": {"id": "7-1", "exit_status": None, "started_at": int(ran * 1000)}},
            {"type": "log", "content": ["$ exit  (exit None, 0.0 s, in /home/agent)",
                                        {"event": "command", "id": "7-1", "command": "exit", "exit_status": None,
                                         "cwd": "/home/agent", "duration_s": 0.0, "notes": ["the shell exited"]}],
             "attributes": {"title": "command"}},
            {"type": "log", "content": ["$ make  (exit 2, 3.2 s, in /home/agent)",
                                        {"event": "command", "id": "7-0", "command": "make", "exit_status": 2,
                                         "cwd": "/home/agent", "duration_s": 3.2}], "attributes": {"title": "command"}})
    app = _app(toy_session())
    async with app.run_test(size=(120, 40)) as pilot:
        app.post_message(SessionUpdate(CommandsRecorded(rows)))
        await pilot.pause()
        feed = _feed(app)
        assert "09:15:30 $ exit  (the shell exited, 0.0 s, in /home/agent)" in feed
        assert "exit None" not in feed
        assert "$ make  (exit 2, 3.2 s, in /home/agent)" in feed  # no start time in the rows: stamped when read
