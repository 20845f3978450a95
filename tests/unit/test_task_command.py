"""The shell's `task` command: strict parsing of its requests, and the real script answered by the
session's desk on the local runtime (the same session commands as the app's keys)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from rebench_tui.runtime.capture import TASK
from rebench_tui.session.task_requests import (MAX_REQUEST_BYTES, MAX_TEXT, BadRequest, TaskRequest, parse_request,
                                               prompt_words)
from rebench_tui.trajectory.audit import read_entries

RID = "0123456789abcdef"


def req(**kw) -> bytes:
    return json.dumps({"v": 1, "id": RID, "verb": "status", **kw}).encode()


@pytest.mark.parametrize("verb,text", [("status", ""), ("score", ""), ("note", "tried a wider block"),
                                       ("submit", ""), ("submit", "final: v3"), ("pause", ""), ("resume", "")])
def test_each_known_request_parses(verb, text):
    assert parse_request(req(verb=verb, text=text)) == TaskRequest(RID, verb, text)


def test_note_text_keeps_newlines_and_is_trimmed():
    assert parse_request(req(verb="note", text="  line one\nline two\t \n")).text == "line one\nline two"


@pytest.mark.parametrize("raw,words,answerable", [
    (b"x" * (MAX_REQUEST_BYTES + 1), "over 8192 bytes", False),
    (b"\xff\xfe not utf-8", "not JSON", False),
    (b"[1, 2]", "not a JSON object", False),
    (json.dumps({"v": 1, "id": "../../etc", "verb": "status"}).encode(), "no valid id", False),
    (json.dumps({"v": 1, "id": "ABCDEF0123456789", "verb": "status"}).encode(), "no valid id", False),
    (req(v=2), "version 2", True),
    (req(verb="rm -rf"), "unknown request", True),
    (req(verb="score", extra=1), "unknown fields extra", True),
    (req(verb="note", text=7), "not a string", True),
    (req(verb="note", text="x" * (MAX_TEXT + 1)), "over 4000", True),
    (req(verb="note", text="bell\x07"), "control characters", True),
    (req(verb="note", text="   "), "note is empty", True),
    (req(verb="pause", text="now"), "pause takes no text", True),
])
def test_bad_requests_are_refused_with_what_is_wrong(raw, words, answerable):
    with pytest.raises(BadRequest) as err:
        parse_request(raw)
    assert words in str(err.value) and "nothing was done" in str(err.value)
    assert (err.value.request_id == RID) is answerable


def test_prompt_words():
    assert prompt_words(3 * 3600 + 59 * 60 + 59, True, False) == "3:59 left"
    assert prompt_words(61, False, False) == "0:01 left, paused"
    assert prompt_words(-5, True, False) == "0:00 left"
    assert prompt_words(100, True, True) == "session finished"


# -- the real script against the desk, on the local runtime -----------------------------------------
def run_task(s, *args: str, stdin: str = "") -> subprocess.CompletedProcess:
    """`task ARGS` as the shell key's shell would run it, while the desk looks for requests."""
    _argv, env, cwd = s.sandbox.shell_command()
    done = threading.Event()

    def desk() -> None:
        while not done.wait(0.05):
            s.desk.poll()

    t = threading.Thread(target=desk, daemon=True)
    t.start()
    try:
        return subprocess.run(["task", *args], env=env, cwd=cwd, input=stdin, capture_output=True, text=True, timeout=60)
    finally:
        done.set()
        t.join()


def notes(s) -> list[str]:
    return [r["content"]["content"][1]["note"] for r in read_entries(s.folder / "audit.jsonl")
            if r["content"]["type"] == "log" and isinstance(r["content"]["content"][1], dict)
            and r["content"]["content"][1].get("event") == "note"]


def test_task_note_and_status_go_through_the_session(toy_session):
    s = toy_session()
    p = run_task(s, "note", "tried", "a", "wider", "block")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "note saved: tried a wider block"
    assert notes(s) == ["tried a wider block"]  # the same row as the n key's
    p = run_task(s, "status")
    assert p.returncode == 0, p.stderr
    assert "working time: " in p.stdout and "clock running" in p.stdout and "0 scoring(s); no valid score yet" in p.stdout
    # the prompt's file says the time left
    assert (s.folder / ".state" / "task" / "prompt").read_text().endswith(" left\n")


def test_task_pause_resume_and_score_follow_the_session_rules(toy_session):
    s = toy_session()
    assert run_task(s, "pause").returncode == 0 and not s.wclock.running
    p = run_task(s, "pause")
    assert p.returncode == 1 and "already paused" in p.stderr
    assert run_task(s, "resume").returncode == 0 and s.wclock.running
    p = run_task(s, "score")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("score 1: ") and len(s.history) == 1
    p = run_task(s, "submit", stdin="n\n")  # not confirmed: nothing is asked of the app
    assert p.returncode == 1 and "Not submitted" in p.stdout and not s.finished
    p = run_task(s, "submit", "--yes", "v1")
    assert p.returncode == 0, p.stderr
    assert "submitted: the session is finished" in p.stdout and s.finished and s.meta.submission == "v1"
    p = run_task(s, "note", "too late")
    assert p.returncode == 1 and "finished" in p.stderr and notes(s) == []


def test_a_forged_request_is_answered_with_the_error_and_a_link_is_never_read(toy_session, tmp_path):
    s = toy_session()
    inbox = s.folder / ".state" / "task" / "in"
    (inbox / "request").write_text(json.dumps({"v": 1, "id": RID, "verb": "delete-everything"}))
    assert s.desk.poll() is None
    answer = json.loads((inbox.parent / f"answer-{RID}").read_text())
    assert answer["ok"] is False and "unknown request" in answer["text"]
    assert not (inbox / "request").exists()
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({"v": 1, "id": RID, "verb": "note", "text": "from a file only root may read"}))
    (inbox / "request").symlink_to(secret)
    assert s.desk.poll() is None and notes(s) == []


def test_help_lists_every_command():
    p = subprocess.run([sys.executable, str(TASK), "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0
    for verb in ("status", "score", "note", "submit", "pause", "resume"):
        assert verb in p.stdout
    p = subprocess.run([sys.executable, str(TASK), "submit", "--help"], capture_output=True, text=True, timeout=30)
    assert p.returncode == 0 and "finishes" in p.stdout


def test_outside_a_session_task_says_so():
    env = {**os.environ, "REBENCH_TASK_DIR": "/nonexistent-spool"}
    p = subprocess.run([sys.executable, str(TASK), "status"], capture_output=True, text=True, timeout=30, env=env)
    assert p.returncode == 2 and "not in a rebench-tui session" in p.stderr


def test_the_desk_gives_the_time_warning_while_the_app_is_away_and_the_prompt_hears_of_it(toy_session, fake_clock):
    s = toy_session()
    spool = s.folder / ".state" / "task"
    s.desk.start()  # subscribes to the session's events; its own looks are driven here
    s.desk.stop()
    s.desk.poll()
    assert (spool / "prompt").read_text() == "1:00 left\n" and not (spool / "warning").exists()
    fake_clock.advance(46 * 60)  # 14 min left: the 15-minute warning is due, and nobody else asks
    s.desk.poll()
    warnings = [r["content"]["content"][1] for r in read_entries(s.folder / "audit.jsonl") if r["content"]["type"] == "log"
                and isinstance(r["content"]["content"][1], dict) and r["content"]["content"][1].get("event") == "time_warning"]
    assert [w["remaining_s"] for w in warnings] == [900]  # the same row as the app's clock writes
    seq, text = (spool / "warning").read_text().split(" ", 1)
    assert seq.isdigit() and text == "0:15:00 of working time left\n"
    assert (spool / "prompt").read_text() == "0:14 left\n"
    s.desk.poll()
    assert (spool / "warning").read_text().split(" ", 1)[0] == seq  # given once
