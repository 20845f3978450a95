"""Exit statuses a script can trust (0 done, 1 failed or crashed, 2 called wrongly), a keymap file
checked before any session opens, and quitting that closes the session off the screen's thread.

The crash and keymap tests run the real command line in a subprocess with Textual's headless
driver, so the exit status is the process's own."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

from click.testing import CliRunner

from rebench_tui.cli import main
from rebench_tui.trajectory.audit import read_entries
from rebench_tui.tui.app import RebenchApp
from tests.conftest import FIXTURE_ENVS, ROOT

HEADLESS = "textual.drivers.headless_driver:HeadlessDriver"


def _cli(tmp_path, code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HOME": str(tmp_path), "TEXTUAL_DRIVER": HEADLESS,
           "REBENCH_ENVIRONMENTS_DIR": str(FIXTURE_ENVS), "REBENCH_CONFIG_DIR": str(tmp_path / "config"),
           "REBENCH_SESSIONS_DIR": str(tmp_path / "sessions"), "COLUMNS": "300"}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=180, env=env, cwd=tmp_path)


def _closed(toy_session):
    s = toy_session()
    s.close()
    return s


def test_a_crash_inside_the_screen_exits_1_and_says_what_was_kept(toy_session, tmp_path):
    s = _closed(toy_session)
    code = ("from rebench_tui.tui.app import RebenchApp\n"
            "def boom(self): raise RuntimeError('a bug in the screen')\n"
            "RebenchApp.on_mount = boom\n"
            "from rebench_tui.cli import main\n"
            f"main(['resume', {s.id!r}, '--sessions-dir', {str(s.folder.parent)!r}])\n")
    p = _cli(tmp_path, code)
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    assert "a bug in the screen" in p.stderr  # Textual's traceback
    assert "error: the screen stopped on an error" in p.stderr and "next: resume with" in p.stderr, p.stderr[-2000:]
    assert not s.lock.path.exists()  # the session was closed all the same: its lock is free


def test_a_bad_keymap_is_an_error_line_before_any_session_starts(tmp_path):
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "keymap.toml").write_text('scroe = "f5"\n')
    p = _cli(tmp_path, "from rebench_tui.cli import main\n"
                       "main(['start', 'toy_score', '--runtime', 'local', '--profile', 'smoke'])\n")
    assert p.returncode == 1, (p.returncode, p.stderr[-2000:])
    assert "Traceback" not in p.stderr, p.stderr[-2000:]
    lines = p.stderr.strip().splitlines()
    assert lines[0].startswith("error: the keymap file") and "unknown binding id 'scroe'" in lines[0], lines
    assert lines[-1].startswith("next: binding ids are:"), lines
    assert not (tmp_path / "sessions").exists() or not any((tmp_path / "sessions").iterdir())  # nothing started


def test_a_bad_keymap_stops_resume_before_the_session_opens(toy_session, tmp_path, monkeypatch):
    s = _closed(toy_session)
    rows = len(read_entries(s.folder / "audit.jsonl"))
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "keymap.toml").write_text('score = ""\n')
    monkeypatch.setenv("REBENCH_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("REBENCH_ENVIRONMENTS_DIR", str(FIXTURE_ENVS))
    r = CliRunner().invoke(main, ["resume", s.id, "--sessions-dir", str(s.folder.parent)])
    assert r.exit_code == 1, r.output
    assert "no keys for 'score'" in r.output and "next:" in r.output
    assert len(read_entries(s.folder / "audit.jsonl")) == rows  # the session was never reopened


def test_failures_exit_1_and_usage_errors_exit_2(tmp_path, monkeypatch):
    monkeypatch.setenv("REBENCH_SESSIONS_DIR", str(tmp_path / "sessions"))
    (tmp_path / "sessions").mkdir()
    run = CliRunner().invoke
    assert run(main, ["verify", "no-such-session"]).exit_code == 1  # our error: a failure
    assert run(main, ["export", "--format", "csv"]).exit_code == 2  # names no session: called wrongly
    assert run(main, ["prepare"]).exit_code == 2
    assert run(main, ["compare", "--budget", "soon"]).exit_code == 2
    assert run(main, ["list", "--bogus"]).exit_code == 2  # click's own usage error


async def test_quitting_closes_the_session_off_the_screens_thread(toy_session):
    s = toy_session()
    app = RebenchApp(s, watch_files=False)
    screen_thread = threading.get_ident()
    closed_on = []
    close = s.close

    def tracking_close(**kw):
        closed_on.append(threading.get_ident())
        close(**kw)

    s.close = tracking_close
    async with app.run_test(size=(140, 42)) as pilot:
        await pilot.press("q")
        await pilot.pause()
        await pilot.press("enter")  # pause the clock and quit
        await pilot.pause()
    assert closed_on and screen_thread not in closed_on, "the session was closed on the screen's thread"
    assert not s.lock.held and not s.wclock.running
