"""The `task` command in a real container, typed into the shell key's own shell, carried out by the desk."""

from __future__ import annotations

import subprocess
import threading
import time

import pytest

from rebench_tui.session import Session
from rebench_tui.session.events import TimeWarning
from rebench_tui.trajectory.audit import read_entries

pytestmark = pytest.mark.docker


@pytest.fixture
def session(fixture_catalog, docker_runtime, settings):
    s = Session.create(fixture_catalog.get("toy_score"), "smoke", docker_runtime, settings.sessions)
    assert s.desk.start()
    s.desk.interval = 0.2
    yield s
    if s.lock.held:
        s.close()
    s.sandbox.stop(remove=True)


def shell(s: Session, script: str) -> subprocess.CompletedProcess:
    """The shell key's command with typed input (-i instead of -it: no terminal here; script makes the pty)."""
    argv, env, cwd = s.sandbox.shell_command()
    argv = ["-i" if a == "-it" else a for a in argv]
    return subprocess.run(argv, input=script.encode(), capture_output=True, timeout=180, env=env, cwd=cwd)


def test_task_status_and_note_inside_the_container(session):
    p = shell(session, "task status\ntask note hi from the shell\ntask note\nexit 0\n")
    out = p.stdout.decode(errors="replace")
    assert p.returncode == 0, p.stderr
    assert "working time: " in out and "clock running" in out and "0 scoring(s)" in out
    assert "note saved: hi from the shell" in out
    assert "the following arguments are required: text" in out  # argparse's refusal, before anything is asked
    assert " left] " in out  # the prompt carries the time left, from the file the desk keeps
    rows = read_entries(session.folder / "audit.jsonl")
    notes = [r["content"]["content"][1]["note"] for r in rows if r["content"]["type"] == "log"
             and isinstance(r["content"]["content"][1], dict) and r["content"]["content"][1].get("event") == "note"]
    assert notes == ["hi from the shell"]
    assert [r.verb for r in session.desk.handled] == ["status", "note"]


def test_a_warning_reaches_the_shell_before_its_next_prompt(session):
    def announce() -> None:  # once the shell is up (its `task status` answered), the clock announces a warning
        while not session.desk.handled:
            time.sleep(0.05)
        session.core.emit(TimeWarning(900))  # as Timekeeping.tick does; the desk listens

    t = threading.Thread(target=announce, daemon=True)
    t.start()
    p = shell(session, "task status\nwhile [ ! -s /run/rebench-task/warning ]; do sleep 0.1; done\nexit\n")
    t.join()
    assert p.returncode == 0, p.stderr
    assert "[rebench] 0:15:00 of working time left" in p.stdout.decode(errors="replace")


def test_the_participant_cannot_write_where_the_answers_are(session):
    # (the words are split in the typed line, which the terminal echoes: only the echo command joins them)
    p = shell(session, "touch /run/rebench-task/answer-0123456789abcdef && echo WRO''TE; "
                       "ls /run/rebench-task/in >/dev/null 2>&1 && echo LIS''TED; echo do''ne\nexit\n")
    out = p.stdout.decode(errors="replace")
    assert "done" in out and "WROTE" not in out and "LISTED" not in out
