"""Snapshot tests (pytest-textual-snapshot) of the session screen in its main states, the help,
quit and submit dialogs, and compare: each test renders the real app at a fixed size with the
injected clock and compares the SVG with the one accepted in ``__snapshots__/``.

Everything that varies between runs is fixed: the session id (no random suffix), the sessions
folder (one path, which the help screen shows; a lock keeps two test runs on one machine from
sharing it), the clock (fake), the input cursor (not blinking), and the moment of the picture: every
test waits until the screen has settled (``_settled``) rather than trusting Textual's ``pause()``, which
judges "idle" by the process's CPU use and, on a loaded machine, returned before a table had measured
its new rows (CI once saw "re-score of 1" cut to "re-scor"). A changed screen fails
here; if the change is wanted, look at the report pytest writes and accept it with
``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import asyncio
import fcntl
import shutil
import tempfile
import time
from pathlib import Path

import pytest

from textual.widgets import DataTable, Input

from rebench_tui.catalog import load_catalog
from rebench_tui.runtime.local import LocalRuntime
from rebench_tui.session import Session
from rebench_tui.session import opening
from rebench_tui.store import Store
from rebench_tui.tui.app import RebenchApp
from tests.conftest import FIXTURE_ENVS, KNOWN_IMAGES

SIZE = (120, 40)
# The sizes a participant's terminal has: a laptop's default, a usual window, a wide screen. Each
# picture was looked at (rendered to PNG) before it was accepted.
SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)], ids=["80x24", "120x40", "200x50"])
SESSIONS = Path(tempfile.gettempdir()) / "rebench-snapshots" / "sessions"  # shown by the help screen: one path


@pytest.fixture
def session(fake_clock, monkeypatch):
    """A toy_score session with a fixed id in a fixed folder, removed at the end."""
    with open(Path(tempfile.gettempdir()) / "rebench-snapshots.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run of these tests on this machine waits
        shutil.rmtree(SESSIONS.parent, ignore_errors=True)
        monkeypatch.setattr(opening, "new_session_id", lambda env_id, wall: f"{env_id}-20260101-000000-snap")
        monkeypatch.setenv("TZ", "UTC")  # the feed's times (the fake clock's) read the same on any machine
        time.tzset()
        env = load_catalog(FIXTURE_ENVS, KNOWN_IMAGES).get("toy_score")
        s = Session.create(env, "smoke", LocalRuntime(), SESSIONS, clock=fake_clock, store=Store(SESSIONS))
        yield s
        s.lock.release()
        shutil.rmtree(SESSIONS.parent, ignore_errors=True)


async def _settled(pilot, limit_s: float = 20.0) -> None:
    """Wait until the screen is what a user would see a moment later: no table has rows or cells
    left to measure (DataTable does that when its queue runs empty), no input cursor blinks, and
    two pictures taken a pause apart are the same."""
    app = pilot.app
    for screen in app.screen_stack:
        for field in screen.query(Input):
            field.cursor_blink = False  # shown steadily: a blink is a matter of when the picture is taken
    loop = asyncio.get_running_loop()
    deadline = loop.time() + limit_s
    before = None
    while loop.time() < deadline:
        await pilot.pause(0.05)
        tables = [t for screen in app.screen_stack for t in screen.query(DataTable)]
        if any(t._require_update_dimensions or t._updated_cells for t in tables):  # Textual has no public "measured"
            continue
        await pilot.wait_for_scheduled_animations()
        now = app.export_screenshot()
        if now == before:
            return
        before = now
    raise AssertionError(f"the screen did not settle within {limit_s:.0f} s")


def _pressing(*keys: str):
    """A ``run_before`` that presses ``keys``, then waits for the screen to settle."""

    async def run(pilot) -> None:
        await pilot.press(*keys)
        await pilot.app.workers.wait_for_complete()
        await _settled(pilot)

    return run


def _app(s) -> RebenchApp:
    app = RebenchApp(s, watch_files=False, keymap={})
    app.NOTIFICATION_TIMEOUT = 600  # a slow machine must not see a toast gone that a fast one shows
    return app


async def _scored(pilot, *answers: str) -> None:
    """Score the toy environment once per answer (its score is the number in answer.txt)."""
    app = pilot.app
    for answer in answers:
        (app.session.workspace / "solution" / "answer.txt").write_text(answer)
        app.session.clock.advance(600)
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()


@SIZES
def test_session_screen_at_the_start(session, snap_compare, size):
    assert snap_compare(_app(session), terminal_size=size, run_before=_pressing())


@SIZES
def test_session_screen_after_three_scorings(session, snap_compare, size):
    async def three(pilot):
        await _scored(pilot, "7", "4", "4")
        await _settled(pilot)

    assert snap_compare(_app(session), terminal_size=size, run_before=three)


def test_session_screen_with_the_info_pane_at_80x24(session, snap_compare):
    async def info(pilot):
        await _scored(pilot, "7")
        await _pressing("i")(pilot)

    assert snap_compare(_app(session), terminal_size=(80, 24), run_before=info)


def test_session_screen_paused(session, snap_compare):
    assert snap_compare(_app(session), terminal_size=SIZE, run_before=_pressing("p"))


@SIZES
def test_session_screen_finished(session, snap_compare, size):
    async def finish(pilot):
        await _scored(pilot, "12", "5")
        await pilot.press("x")
        await pilot.pause()
        await _pressing("enter")(pilot)  # submit, with no text

    assert snap_compare(_app(session), terminal_size=size, run_before=finish)


@SIZES
@pytest.mark.parametrize("key", ["question_mark", "q", "x", "n"], ids=["help", "quit dialog", "submit dialog", "note dialog"])
def test_dialogs(session, snap_compare, key, size):
    async def open_dialog(pilot):
        await _scored(pilot, "7")  # a row in the table behind the dialog
        await _pressing(key)(pilot)

    assert snap_compare(_app(session), terminal_size=size, run_before=open_dialog)


def test_compare_from_the_session(session, snap_compare):
    async def compare(pilot):
        await _scored(pilot, "6", "3")
        await _pressing("v")(pilot)

    assert snap_compare(_app(session), terminal_size=SIZE, run_before=compare)
