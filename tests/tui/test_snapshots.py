"""Snapshot tests (pytest-textual-snapshot) of the session screen in its main states, the help,
quit and submit dialogs, and compare: each test renders the real app at a fixed size with the
injected clock and compares the SVG with the one accepted in ``__snapshots__/``.

Everything that varies between runs is fixed: the session id (no random suffix), the sessions
folder (one path, which the help screen shows; a lock keeps two test runs on one machine from
sharing it), the clock (fake). A changed screen fails
here; if the change is wanted, look at the report pytest writes and accept it with
``pytest tests/tui/test_snapshots.py --snapshot-update``.
"""

from __future__ import annotations

import fcntl
import shutil
import tempfile
from pathlib import Path

import pytest

from rebench_tui.catalog import load_catalog
from rebench_tui.runtime.local import LocalRuntime
from rebench_tui.session import Session
from rebench_tui.session import opening
from rebench_tui.store import Store
from rebench_tui.tui.app import RebenchApp
from tests.conftest import FIXTURE_ENVS, KNOWN_IMAGES

SIZE = (120, 36)
SESSIONS = Path(tempfile.gettempdir()) / "rebench-snapshots" / "sessions"  # shown by the help screen: one path


@pytest.fixture
def session(fake_clock, monkeypatch):
    """A toy_score session with a fixed id in a fixed folder, removed at the end."""
    with open(Path(tempfile.gettempdir()) / "rebench-snapshots.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another run of these tests on this machine waits
        shutil.rmtree(SESSIONS.parent, ignore_errors=True)
        monkeypatch.setattr(opening, "new_session_id", lambda env_id, wall: f"{env_id}-20260101-000000-snap")
        env = load_catalog(FIXTURE_ENVS, KNOWN_IMAGES).get("toy_score")
        s = Session.create(env, "smoke", LocalRuntime(), SESSIONS, clock=fake_clock, store=Store(SESSIONS))
        yield s
        s.lock.release()
        shutil.rmtree(SESSIONS.parent, ignore_errors=True)


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


def test_session_screen_at_the_start(session, snap_compare):
    assert snap_compare(_app(session), terminal_size=SIZE)


def test_session_screen_after_three_scorings(session, snap_compare):
    assert snap_compare(_app(session), terminal_size=SIZE, run_before=lambda pilot: _scored(pilot, "7", "4", "4"))


def test_session_screen_paused(session, snap_compare):
    async def pause(pilot):
        await pilot.press("p")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(_app(session), terminal_size=SIZE, run_before=pause)


def test_session_screen_finished(session, snap_compare):
    async def finish(pilot):
        await _scored(pilot, "5")
        await pilot.press("x")
        await pilot.pause()
        await pilot.press("enter")  # submit, with no text
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(_app(session), terminal_size=SIZE, run_before=finish)


@pytest.mark.parametrize("key", ["question_mark", "q", "x"], ids=["help", "quit dialog", "submit dialog"])
def test_dialogs(session, snap_compare, key):
    assert snap_compare(_app(session), terminal_size=SIZE, press=[key])


def test_compare_from_the_session(session, snap_compare):
    async def compare(pilot):
        await _scored(pilot, "6", "3")
        await pilot.press("v")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()

    assert snap_compare(_app(session), terminal_size=SIZE, run_before=compare)
