"""The app killed (SIGKILL) while its scorer runs in a real container, then the session resumed.

A child process opens the session and starts a scoring of the toy environment (whose answer
``sleep`` sleeps past any timeout, and ``nap`` sleeps 4 s then scores 1); the test kills the
child with SIGKILL while the scorer runs, as a crash or `kill -9` would, and resumes:

- still running on resume: the scorer's processes are ended (none is left in the container)
  and the scoring is recorded as interrupted, at its start time;
- finished while no app ran: its result is collected through the result channel and recorded
  as the scoring it was, at its start time; `rebench-tui score` says so.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rebench_tui.catalog import load_catalog
from rebench_tui.runtime.docker_room import find_rooms
from rebench_tui.session import Session
from rebench_tui.trajectory.audit import read_entries, validate_file
from rebench_tui.trajectory.verify import verify
from tests.conftest import FIXTURE_ENVS, IMAGES, KNOWN_IMAGES, ROOT

pytestmark = pytest.mark.docker

CHILD = r'''
import sys, threading, time
from pathlib import Path
import docker
from rebench_tui.catalog import load_catalog
from rebench_tui.runtime.docker_runtime import DockerRuntime
from rebench_tui.runtime.images import Recipes
from rebench_tui.session import Session

folder, envs, images, cache = map(Path, sys.argv[1:5])
env = load_catalog(envs, Recipes.load(images).names).get("toy_score")
s = Session.open(folder, env, DockerRuntime(docker.from_env(), None, images, cache))

def note_meanwhile():
    time.sleep(1.0)
    s.note("written while the scorer ran")
    print("noted", flush=True)

threading.Thread(target=note_meanwhile, daemon=True).start()
print("scoring", flush=True)
s.score()
print("scored", flush=True)
'''


@pytest.fixture
def slow_env(env_copy):
    """The toy environment with a scoring timeout long enough to kill the app during a scoring."""

    def edit(dest: Path) -> None:
        toml = dest / "environment.toml"
        toml.write_text(toml.read_text().replace('score_timeout = "5s"', 'score_timeout = "120s"'))

    root = env_copy(FIXTURE_ENVS / "toy_score", edit)
    return root, load_catalog(root, KNOWN_IMAGES).get("toy_score")


def scorer_processes(session) -> list[str]:
    """The scorer's processes: in the scoring's room (a container of its own), or anywhere else of
    the session's (there should be none)."""
    sb = session.sandbox
    found = []
    for c in [sb.container, *find_rooms(sb.runtime.client, session.meta.id)]:
        c.reload()
        if c.status != "running":
            continue
        top = c.top(ps_args="-eo pid,args")
        found += [" ".join(p) for p in top.get("Processes") or [] if "score.py" in " ".join(p) or "supervise.py" in " ".join(p)]
    return found


def crash_during_scoring(s: Session, env_root: Path, settings, answer: str) -> dict:
    """Open the session in a child process, start a scoring, SIGKILL the child while the scorer
    runs; returns the scoring's marker as the child left it."""
    (s.workspace / "solution" / "answer.txt").write_text(answer + "\n")
    s.close()
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(s.folder), str(env_root), str(IMAGES), str(settings.cache_dir)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        assert child.stdout.readline().strip() == "scoring", child.stderr.read()
        assert child.stdout.readline().strip() == "noted", child.stderr.read()
        deadline = time.monotonic() + 30
        while not [p for p in scorer_processes(s) if "score.py" in p]:
            assert time.monotonic() < deadline, "the scorer never started"
            time.sleep(0.1)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == -signal.SIGKILL
    return json.loads((s.folder / ".state" / "scoring.json").read_text())


def scored_rows(folder: Path) -> list[dict]:
    return [r for r in read_entries(folder / "audit.jsonl") if r["content"]["type"] == "intermediateScore"]


def test_a_scoring_running_when_the_app_was_killed_is_ended_and_recorded_as_interrupted(slow_env, docker_runtime, settings):
    env_root, env = slow_env
    s = Session.create(env, "smoke", docker_runtime, settings.sessions)
    try:
        marker = crash_during_scoring(s, env_root, settings, "sleep")
        assert scored_rows(s.folder) == []  # nothing in the log yet: the row was reserved in memory only
        assert [p for p in scorer_processes(s) if "score.py" in p], "the scorer should run on"

        again = Session.open(s.folder, env, docker_runtime)
        try:
            assert scorer_processes(again) == []  # the scorer's group and its supervisor are gone
            (rec,) = again.history
            assert math.isnan(rec.score) and rec.called_at_ms == marker["called_at"]
            info = rec.details["interrupted"]
            assert info["outcome"] == "ended" and info["started_at_ms"] == marker["called_at"] and info["ran_s"] > 0
            assert rec.details["attempt"] == marker["attempt"] and "interrupted" in rec.message["error"]
            (note,) = again.resume_notes
            assert "interrupted" in note and "score again" in note
            assert not (s.folder / ".state" / "scoring.json").exists()
            rows = read_entries(s.folder / "audit.jsonl")
            kinds = [(r["content"]["type"], (r["content"].get("content") or [""])[0]) for r in rows]
            at = [i for i, r in enumerate(rows) if r["content"]["type"] == "intermediateScore"][0]
            noted = [i for i, (_k, text) in enumerate(kinds) if text == "written while the scorer ran"][0]
            assert at < noted, kinds  # the row written during the scoring waited behind the scoring's own
            resumed = [r for r in rows if "session resumed" in str(r["content"].get("content"))][-1]
            assert resumed["content"]["content"][1]["interrupted_scoring"]["outcome"] == "ended"
            assert validate_file(s.folder / "audit.jsonl") == []
            (again.workspace / "solution" / "answer.txt").write_text("3\n")
            assert again.score().score == 3  # scoring works as before
        finally:
            again.close()
        report = verify(s.folder)
        assert report.ok, report.findings
    finally:
        s.sandbox.stop(remove=True)


def test_a_scoring_that_finished_while_no_app_ran_is_collected_on_resume(slow_env, docker_runtime, settings):
    env_root, env = slow_env
    s = Session.create(env, "smoke", docker_runtime, settings.sessions)
    try:
        marker = crash_during_scoring(s, env_root, settings, "nap")  # sleeps 4 s, then scores 1
        deadline = time.monotonic() + 60
        while s.sandbox.exec_status(marker["token"])["state"] != "finished":
            assert time.monotonic() < deadline, "the orphaned scorer never finished"
            time.sleep(0.5)
        assert scored_rows(s.folder) == []
        (s.workspace / "solution" / "answer.txt").write_text("2\n")
        cli = Path(sys.executable).with_name("rebench-tui")
        p = subprocess.run([str(cli), "score", str(s.folder)], capture_output=True, text=True, timeout=300, cwd=ROOT,
                           env={**os.environ, "REBENCH_ENVIRONMENTS_DIR": str(env_root), "COLUMNS": "400",
                                "REBENCH_SESSIONS_DIR": str(settings.sessions)})
        assert p.returncode == 0, p.stderr
        assert "finished while the app was closed; its result was collected and recorded as scoring 1 (score 1)" in p.stderr
        assert "scoring 2: score 2" in p.stdout
        first, second = scored_rows(s.folder)
        assert first["calledAt"] == marker["called_at"] and first["content"]["score"] == 1.0
        assert first["content"]["details"]["recovered"]["outcome"] == "collected"
        assert first["content"]["details"]["scorer_matches_catalog"] is True  # read through the normal parse path
        assert second["content"]["score"] == 2.0
        assert validate_file(s.folder / "audit.jsonl") == []
        assert verify(s.folder).ok
    finally:
        s.sandbox.stop(remove=True)
