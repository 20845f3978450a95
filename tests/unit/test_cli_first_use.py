"""The command line as a new user meets it: help without an error, -h, grouped commands whose
descriptions are whole, a missing run file named as missing, and a live session's container kept
unless --force says otherwise. The help tests run the real entry point in a subprocess, so the
exit status is the process's own."""

from __future__ import annotations

import os
import subprocess
import sys

from click.testing import CliRunner

from rebench_tui.cli import HELP_GROUPS, main
from tests.conftest import ROOT


def _run(*argv: str, cwd=None) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "100"}
    return subprocess.run([sys.executable, "-m", "rebench_tui.cli", *argv], capture_output=True, text=True,
                          timeout=120, env=env, cwd=cwd)


def test_bare_rebench_tui_prints_the_help_and_exits_0():
    p = _run()
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("Usage: ") and "error" not in p.stdout + p.stderr


def test_dash_h_is_help_for_the_tool_and_for_a_command():
    top, sub = _run("-h"), _run("stop", "-h")
    assert top.returncode == 0 and "Sessions (a participant's):" in top.stdout, top.stderr
    assert sub.returncode == 0 and "--remove" in sub.stdout and "--force" in sub.stdout, sub.stderr


def test_help_groups_every_command_with_its_first_sentence_whole_and_an_example():
    text = CliRunner().invoke(main, ["--help"], terminal_width=100).output
    flat = " ".join(text.split())
    for title, members, example in HELP_GROUPS:
        assert f"{title}:" in text and f"e.g. {example}" in flat
    assert "Other:" not in text  # every command has its group
    assert "..." not in text.split("\n", 1)[1]  # nothing cut (the usage line's ARGS... aside)
    # the longest first sentence, whole (click's own listing cut it after 45 characters)
    assert ("Take the final score and finish a session without the screen: at or after the time limit it finishes "
            "as 'time_limit', before it as a submission.") in flat


def test_compare_of_a_missing_run_file_says_the_file_does_not_exist(tmp_path):
    (tmp_path / "sessions").mkdir()
    r = CliRunner().invoke(main, ["compare", "nosuchfile.eval", "--sessions-dir", str(tmp_path / "sessions")])
    assert r.exit_code == 1
    assert "error: nosuchfile.eval: no such file" in r.output and "no session" not in r.output, r.output


def test_stop_remove_refuses_a_live_session_without_force(toy_session):
    s = toy_session()  # open (its lock held by this process) and not finished
    r = CliRunner().invoke(main, ["stop", s.id, "--remove", "--sessions-dir", str(s.folder.parent)])
    assert r.exit_code == 2, r.output
    assert f"error: {s.id} is live: it is open in an app" in r.output and "it is not finished" in r.output
    assert "kept: the session and its container, untouched" in r.output and "add --force" in r.output
    # --force goes on (a local session has no container: it says so and removes nothing)
    r = CliRunner().invoke(main, ["stop", s.id, "--remove", "--force", "--sessions-dir", str(s.folder.parent)])
    assert r.exit_code == 0 and "no container" in r.output, r.output


def test_score_prints_the_scorers_message_as_words_not_a_python_dict(toy_session, monkeypatch):
    from tests.conftest import FIXTURE_ENVS

    s = toy_session()
    (s.workspace / "solution" / "answer.txt").write_text("4\n")
    s.close(pause_clock=True)
    monkeypatch.setenv("REBENCH_ENVIRONMENTS_DIR", str(FIXTURE_ENVS))
    r = CliRunner().invoke(main, ["score", s.id, "--sessions-dir", str(s.folder.parent)])
    assert r.exit_code == 0, r.output
    assert "scoring 1: score 4 (normalized 0.75); the scorer says: answer: 4" in r.output
    assert "{" not in r.output and "'" not in r.output


def test_message_words():
    from rebench_tui.scoring import message_words

    assert message_words({"answer": 7, "secret_ok": True, "time_ms": 0.123456, "parts": [1, 2]}) == \
        "answer: 7; secret ok: yes; time ms: 0.1235; parts: [1, 2]"
