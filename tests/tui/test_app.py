"""The screen through Textual's Pilot, at a fixed size, with an injected clock.

Workers are awaited with ``app.workers.wait_for_complete()``, never with sleeps.
"""

from __future__ import annotations

import math

import pytest
from textual.widgets import Digits

from rebench_tui.trajectory.audit import read_entries, validate_file
from rebench_tui.tui.app import RebenchApp
from rebench_tui.tui.screens.dialogs import NoteScreen, QuitScreen, SubmitScreen
from rebench_tui.tui.widgets.file_feed import FileFeed
from rebench_tui.tui.widgets.score_history import ScoreTable
from tests.conftest import FIXTURE_ENVS

SIZE = (140, 42)


@pytest.fixture
def session_for(toy_session):
    return toy_session


def digits(app) -> str:
    return str(app.query_one("#clock-digits", Digits).value)


def events(s, name):
    return [r for r in read_entries(s.folder / "audit.jsonl")
            if isinstance(r["content"].get("content"), list) and len(r["content"]["content"]) > 1
            and isinstance(r["content"]["content"][1], dict) and r["content"]["content"][1].get("event") == name]


async def test_score_key_adds_a_row(session_for):
    s = session_for()
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(ScoreTable)
        assert table.row_count == 0
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert table.row_count == 1
        row = table.get_row_at(0)
        assert row[0] == "1" and row[2] == "10" and row[3] == "0.00" and row[4] == "★"
        (s.workspace / "solution" / "answer.txt").write_text("2")
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert table.row_count == 2
        assert table.get_row_at(1)[3] == "1.00"  # normalized: the reference score
        assert table.get_row_at(0)[4] == "" and table.get_row_at(1)[4] == "★"
        assert "counts (lowest): 2" in str(app.query_one("#best").render())


async def test_second_score_press_while_scoring_says_so(session_for):
    s = session_for()
    (s.workspace / "solution" / "answer.txt").write_text("sleep")
    app = RebenchApp(s, watch_files=False)
    notes = []
    async with app.run_test(size=SIZE) as pilot:
        app.notify = lambda msg, **kw: notes.append(msg)  # capture what the user is told
        await pilot.press("s")
        await pilot.pause()
        await pilot.press("s")
        assert any("already running" in n for n in notes)
        await pilot.press("c")  # cancel it
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert any("cancelled" in n for n in notes)
        assert app.query_one(ScoreTable).row_count == 0
    assert events(s, "score_cancelled")


async def test_a_failure_outside_our_errors_leaves_a_usable_screen(session_for, monkeypatch):
    """A full disk (an OSError, not one of our errors) while scoring: the screen says so, scoring is not left
    marked as running, and the next press scores."""
    import errno

    s = session_for()
    real = s.scorer._started  # the scoring's start row: written after the snapshot, before the scorer
    calls = []

    def full_disk_once(*args, **kwargs):
        calls.append(1)
        if len(calls) == 1:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(s.scorer, "_started", full_disk_once)
    app = RebenchApp(s, watch_files=False)
    notes = []
    async with app.run_test(size=SIZE) as pilot:
        app.notify = lambda msg, **kw: notes.append(msg)
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert any("No space left on device" in n and "score again" in n for n in notes), notes
        assert app.query_one(ScoreTable).row_count == 0
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not any("already running" in n for n in notes), notes
        assert app.query_one(ScoreTable).row_count == 1


async def test_pause_stops_the_countdown(session_for, fake_clock):
    s = session_for()
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        assert digits(app) == "1:00:00"
        fake_clock.advance(61)
        app.refresh_clock()
        assert digits(app) == "0:58:59"
        await pilot.press("p")
        await pilot.pause()
        fake_clock.advance(600)
        app.refresh_clock()
        assert digits(app) == "0:58:59"
        assert "PAUSED" in str(app.query_one("#clock-state").render())
        await pilot.press("p")
        fake_clock.advance(59)
        app.refresh_clock()
        assert digits(app) == "0:58:00"
    first = s.meta.pauses[0]
    assert first.end - first.start == 600_000  # the quit that follows adds its own (open) pause


async def test_quit_asks_first_and_can_keep_the_clock_running(session_for, fake_clock):
    s = session_for()
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await pilot.pause()
        assert isinstance(app.screen, QuitScreen)
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, QuitScreen) and app.is_running
        await pilot.press("q")
        await pilot.pause()
        await pilot.click("#keep")
        await pilot.pause()
    assert app.closed_with == "keep"
    assert s.wclock.running and not s.lock.held
    assert events(s, "app_closed")


async def test_quit_by_default_pauses_the_clock(session_for):
    s = session_for()
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("enter")  # the focused default: pause clock and quit
        await pilot.pause()
    assert app.closed_with == "pause" and not s.wclock.running
    assert events(s, "pause")


async def test_time_up_takes_the_final_score_and_finishes(session_for, fake_clock):
    s = session_for(time_limit_s=600)
    (s.workspace / "solution" / "answer.txt").write_text("4")
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        fake_clock.advance(601)
        app.refresh_clock()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert s.finished and s.meta.finish_reason == "time_limit"
        assert app.query_one(ScoreTable).row_count == 1
        assert digits(app) == "0:00:00"
        assert "FINISHED" in str(app.query_one("#clock-state").render())
        await pilot.press("s")  # scoring is closed now
        await app.workers.wait_for_complete()
        assert len(s.history) == 1


async def test_time_up_with_the_container_gone_finishes_and_ends_scoring_on_screen(session_for, fake_clock):
    """No final scoring can run (the sandbox is not running): the session finishes without one, and
    the screen does not stay on "scoring…" (the finish event ends it)."""
    s = session_for(time_limit_s=600)
    s.sandbox.is_running = lambda: False
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        fake_clock.advance(601)
        app.refresh_clock()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert s.finished and s.meta.finish_reason == "time_limit" and s.history == []
        assert str(app.query_one("#scoring").render()) == ""


async def test_submit_confirms_then_finishes(session_for):
    s = session_for()
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, SubmitScreen)
        await pilot.press(*"done")
        await pilot.press("enter")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert s.finished and s.meta.finish_reason == "submitted"
    subs = [r for r in read_entries(s.folder / "audit.jsonl") if r["content"]["type"] == "submission"]
    assert [r["content"]["value"] for r in subs] == ["done"]


async def test_note_key_records_a_note(session_for):
    s = session_for()
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n")
        await pilot.pause()
        assert isinstance(app.screen, NoteScreen)
        await pilot.press(*"coffee break")
        await pilot.press("enter")
        await pilot.pause()
    assert [e["content"]["content"][1]["note"] for e in events(s, "note")] == ["coffee break"]


async def test_file_feed_shows_workspace_changes(session_for):
    s = session_for()
    app = RebenchApp(s)
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()  # the watcher has started
        (s.workspace / "solution" / "answer.txt").write_text("3")
        s.watcher.flush()
        await pilot.pause()
        feed = app.query_one(FileFeed)
        assert feed.changes == 1
        assert any("modified solution/answer.txt" in str(line.text) for line in feed.lines)


async def test_hidden_environment_shows_that_a_scoring_happened_not_its_value(session_for, env_copy):
    def hide(d):
        t = (d / "environment.toml").read_text().replace('aggregation = "min"', 'aggregation = "last"\nvisibility = "hidden"')
        (d / "environment.toml").write_text(t)

    s = session_for(env_copy(FIXTURE_ENVS / "toy_score", hide))
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        row = app.query_one(ScoreTable).get_row_at(0)
        assert "10" not in row and row[2] == "hidden"
        assert "hidden" in str(app.query_one("#best").render())
    assert s.history[0].score == 10  # recorded all the same


async def test_keymap_file_remaps_bindings(session_for, tmp_path):
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('score = "f5"\n')
    s = session_for()
    app = RebenchApp(s, keymap_path=keymap, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.query_one(ScoreTable).row_count == 0
        await pilot.press("f5")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.query_one(ScoreTable).row_count == 1


async def test_history_is_shown_on_reopen(session_for, fake_clock):
    s = session_for()
    s.score()
    (s.workspace / "solution" / "answer.txt").write_text("nan")
    s.score()
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE):
        table = app.query_one(ScoreTable)
        assert table.row_count == 2 and table.get_row_at(1)[2] == "NaN"
    assert validate_file(s.folder / "audit.jsonl") == []
    assert math.isnan(s.history[1].score)


async def test_compare_key_shows_this_environments_sessions(session_for, fake_clock):
    from rebench_tui.tui.screens.compare import CompareScreen

    first = session_for()
    first.score()
    (first.workspace / "solution" / "answer.txt").write_text("4")
    fake_clock.advance(600)
    first.submit("")
    first.close()
    s = session_for()
    s.score()
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("v")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        assert {r.run_id for r in app.screen.comparison.runs} >= {first.id, s.id}
        await pilot.press("escape")
        await pilot.pause()
        assert not isinstance(app.screen, CompareScreen)


DRAWS = (-1.462, -1.663, -1.628)  # the same unchanged solution, scored three times in a row (the reported case)


def noisy_env(env_copy, counter):
    """The toy environment with a scorer that, for the answer ``noisy``, returns the next of DRAWS:
    a timing score's noise, on files that do not change."""

    def edit(d):
        score = d / "protected" / "score.py"
        text = score.read_text()
        anchor = 'secret_ok = open(os.path.join(protected, "secret.txt")).read().startswith("held-out")\n'
        assert anchor in text
        draw = (f'if answer == "noisy":\n'
                f'    _n = int(open({str(counter)!r}).read()) if os.path.exists({str(counter)!r}) else 0\n'
                f'    open({str(counter)!r}, "w").write(str(_n + 1))\n'
                f'    answer = repr({DRAWS!r}[_n % {len(DRAWS)}])\n')
        score.write_text(text.replace(anchor, anchor + draw))

    return env_copy(FIXTURE_ENVS / "toy_score", edit)


async def press_score(app, pilot):
    await pilot.press("s")
    await app.workers.wait_for_complete()
    await pilot.pause()


@pytest.mark.parametrize("watch", [True, False], ids=["file recorder", "workspace scan"])
async def test_rescores_of_unchanged_files_count_with_their_median(session_for, env_copy, tmp_path, watch):
    s = session_for(noisy_env(env_copy, tmp_path / "draws"))
    (s.workspace / "solution" / "answer.txt").write_text("noisy\n")
    app = RebenchApp(s, watch_files=watch)
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()  # the file recorder has started (when watched)
        table = app.query_one(ScoreTable)
        best = app.query_one("#best")
        await press_score(app, pilot)
        row = table.get_row_at(0)
        assert (row[0], row[2], row[4], row[5], row[6]) == ("1", "-1.462", "★", "1", "1")  # n=1: the scoring itself
        assert "counts (lowest): -1.462" in str(best.render())
        await press_score(app, pilot)
        row = table.get_row_at(1)
        assert row[0] == "2" and row[2] == "-1.663" and row[5] == "re-score of 1"
        assert row[6] == "2 · -1.562 · -1.663–-1.462"  # the median of two is their mean
        assert "counts (lowest): -1.562" in str(best.render())  # not the luckier -1.663
        await press_score(app, pilot)
        rows = [table.get_row_at(i) for i in range(3)]
        assert [r[2] for r in rows] == ["-1.462", "-1.663", "-1.628"]
        assert [r[4] for r in rows] == ["★", "★", "★"]  # the three scorings whose median counts
        assert [r[5] for r in rows] == ["1", "re-score of 1", "re-score of 1"]
        assert all(r[6] == "3 · -1.628 · -1.663–-1.462" for r in rows)  # every row of the attempt, brought up to date
        text = str(best.render())
        assert "counts (lowest): -1.628" in text and "median of 3 re-scores, -1.663–-1.462" in text
        assert s.final().score == -1.628 and s.final().scorings == (1, 2, 3) and s.final().representative == 3

        # one changed byte is a new attempt: its single draw (-1.462) is not better than attempt 1's median
        (s.workspace / "solution" / "answer.txt").write_text("noisy \n")
        await press_score(app, pilot)
        row = table.get_row_at(3)
        assert row[2] == "-1.462" and row[4] == "" and row[5] == "2" and row[6] == "1"
        assert "counts (lowest): -1.628" in str(best.render())
    fps = [r.fingerprint for r in s.history]
    assert fps[0] == fps[1] == fps[2] != fps[3] and len(fps[0]) == 64
    sources = {r.details["attempt"]["source"] for r in s.history}
    assert sources == {"snapshot"}  # what was scored is the snapshot, whether the recorder watched or not
    assert all(r.n_files == s.history[0].n_files for r in s.history) and s.history[0].n_files >= 2
    rows = [r for r in read_entries(s.folder / "audit.jsonl") if r["content"]["type"] == "intermediateScore"]
    assert [r["content"]["details"]["attempt"]["fingerprint"] for r in rows] == fps
    assert s.store.get(s.id)["final_score"] == -1.628


async def test_the_screen_says_where_the_sessions_anchors_come_from(tmp_path, fake_clock):
    from rebench_tui.catalog import Anchors, load_catalog
    from rebench_tui.runtime.local import LocalRuntime
    from rebench_tui.session import Session
    from tests.conftest import KNOWN_IMAGES

    env = load_catalog(FIXTURE_ENVS, KNOWN_IMAGES).get("toy_score")
    calibrated = Anchors(10.0, 4.0, "calibrated", "calibrated on gpu-host 2026-12-03: 3 run(s) each; 1 x NVIDIA H200",
                         {"stale": []})
    s = Session.create(env, "smoke", LocalRuntime(), tmp_path / "sessions", clock=fake_clock, anchors=calibrated)
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        line = app.query_one("#anchors")
        assert "anchors (calibrated): start 10, reference 4 — calibrated on gpu-host" in str(line.render())
        assert not line.has_class("stale")
        (s.workspace / "solution" / "answer.txt").write_text("7")
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert app.query_one(ScoreTable).get_row_at(0)[3] == "0.50"  # (10 - 7) / (10 - 4)
    uncal = Session.create(env, "smoke", LocalRuntime(), tmp_path / "sessions2", clock=fake_clock,
                           anchors=Anchors(10.0, 2.0, "uncalibrated", "uncalibrated: placeholder figures"))
    app = RebenchApp(uncal, watch_files=False)
    async with app.run_test(size=SIZE):
        assert app.query_one("#anchors").has_class("stale")


async def test_the_screen_says_where_the_session_is_not_in_the_papers_setting(env_copy, toy_session):
    from tests.unit.test_setting import DIFFERS, with_paper

    s = toy_session(env_copy(FIXTURE_ENVS / "toy_score", with_paper(DIFFERS)))
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE):
        line = app.query_one("#setting")
        text = " ".join(str(line.render()).split())
        assert "differs from the paper's in 1 — judge: a rule-based stand-in" in text and line.has_class("differs")
    plain = toy_session()  # the fixture states no paper setting
    app = RebenchApp(plain, watch_files=False)
    async with app.run_test(size=SIZE):
        line = app.query_one("#setting")
        assert "states no paper setting" in str(line.render()) and not line.has_class("differs")


async def test_a_score_reaches_the_screen_by_one_message_that_carries_it(session_for):
    """One message per result: the screen hears a scoring once, as a ``ScoreRecorded`` event that
    brings the history and the counting score with it; "scoring…" ends with that same message."""
    from textual.message import Message

    from rebench_tui.session.events import ScoreRecorded
    from rebench_tui.tui import messages
    from rebench_tui.tui.messages import SessionUpdate

    assert [n for n, v in vars(messages).items()
            if isinstance(v, type) and issubclass(v, Message) and v is not Message] == ["SessionUpdate"]
    s = session_for()
    app = RebenchApp(s, watch_files=False)
    heard = []
    async with app.run_test(size=SIZE) as pilot:
        real = app.post_message
        app.post_message = lambda m: (heard.append(m), real(m))[1]
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        scores = [m.event for m in heard if isinstance(m, SessionUpdate) and isinstance(m.event, ScoreRecorded)]
        assert len(scores) == 1 and scores[0].record.score == 10 and len(scores[0].history) == 1
        assert scores[0].counting is not None and scores[0].counting.score == 10
        assert app.query_one(ScoreTable).row_count == 1
        assert str(app.query_one("#scoring").render()) == ""  # "scoring…" ends with the same message


async def test_the_screen_thread_writes_no_record(session_for):
    """Pause, resume, a note and a scoring: every audit row and every session.json save happens on a
    worker thread, none on the screen's (a slow disk never freezes the keys)."""
    import threading

    s = session_for()
    writers: list[tuple[str, threading.Thread]] = []
    real_append, real_save = s.audit.append, s.core.save
    s.audit.append = lambda content: (writers.append(("row", threading.current_thread())), real_append(content))[1]
    s.core.save = lambda: (writers.append(("session.json", threading.current_thread())), real_save())[1]
    app = RebenchApp(s, watch_files=False)
    async with app.run_test(size=SIZE) as pilot:
        screen_thread = threading.current_thread()
        for keys in (["p"], ["p"], ["n", *"on the loop?", "enter"], ["s"]):
            await pilot.press(*keys)
            await app.workers.wait_for_complete()
            await pilot.pause()
        assert app.query_one(ScoreTable).row_count == 1
        on_screen = [what for what, t in writers if t is screen_thread]
    assert {what for what, _t in writers} == {"row", "session.json"}  # the patches saw the writes
    assert not on_screen, on_screen
    assert [e["content"]["content"][1]["note"] for e in events(s, "note")] == ["on the loop?"]
