"""A whole session on the real engine driven over ssh:// through a real sshd on loopback."""

from __future__ import annotations

import subprocess
import time

import pytest

from rebench_tui.session import Session
from rebench_tui.store import Store
from rebench_tui.trajectory.audit import read_entries, validate_file
from rebench_tui.trajectory.verify import verify
from tests.sshd import remote_runtime, sshd  # noqa: F401 - fixtures

pytestmark = pytest.mark.docker


def file_rows(rows, path):
    return [r["content"]["content"][1] for r in rows if r["content"].get("attributes", {}).get("title") == "file"
            and r["content"]["content"][1]["path"] == path]


def event_rows(rows, name):
    return [r["content"]["content"][1] for r in rows if r["content"]["type"] == "log" and len(r["content"]["content"]) > 1
            and isinstance(r["content"]["content"][1], dict) and r["content"]["content"][1].get("event") == name]


def commands(rows):
    acts = {r["content"]["action"]["id"]: r["content"]["action"] for r in rows if r["content"]["type"] == "action"}
    obs = {r["content"]["observation"]["id"]: r["content"]["observation"] for r in rows if r["content"]["type"] == "observation"}
    return [(acts[i]["args"]["command"], obs[i]) for i in acts if i in obs]


def shell(s: Session, script: str, env: dict) -> subprocess.CompletedProcess:
    """The shell key's own command (docker -H ssh://… exec), with typed input instead of a terminal."""
    argv, _env, cwd = s.sandbox.shell_command()
    argv = ["-i" if a == "-it" else a for a in argv]
    return subprocess.run(argv, input=script.encode(), capture_output=True, timeout=120, env=env, cwd=cwd)


def collect_until(s: Session, pred, tries: int = 40) -> list[dict]:
    for _ in range(tries):
        s.collect_commands()
        rows = read_entries(s.folder / "audit.jsonl")
        if pred(rows):
            return rows
        time.sleep(0.25)
    return read_entries(s.folder / "audit.jsonl")


@pytest.fixture
def open_sessions():
    made: list[Session] = []
    yield made
    for s in made:
        if s.lock.held:
            s.close()
        s.sandbox.stop(remove=True)


def test_a_full_session_over_ssh(fixture_catalog, remote_runtime, sshd, settings, docker_client, open_sessions):
    env = fixture_catalog.get("toy_score")
    s = Session.create(env, "smoke", remote_runtime, settings.sessions, store=Store(settings.sessions))
    open_sessions.append(s)
    assert s.sandbox.remote and s.meta.host == sshd.url
    # the home is a volume on the engine's host, not a bind mount of this machine's folder
    mounts = {m["Destination"]: m for m in docker_client.containers.get(s.sandbox.container.id).attrs["Mounts"]}
    assert mounts["/home/agent"]["Type"] == "volume" and mounts["/home/agent"]["Name"] == f"rebench-home-{s.id}"
    owner = s.sandbox.exec(["stat", "-c", "%U %s", "solution/answer.txt"])
    assert owner.stdout.split()[0] == "agent", owner

    s.start_watching()
    s.start_capture(interval=3600)
    first = s.score()
    assert first.score == 10 and first.details["secret_ok"] is True

    # a change made in the container (on the remote host) reaches the record through the poller
    r = s.sandbox.exec(["sh", "-c", "echo 4 > solution/answer.txt && mkdir -p notes && echo idea > notes/a.txt"])
    assert r.ok, r
    s.watcher.flush()
    rows = read_entries(s.folder / "audit.jsonl")
    changed = file_rows(rows, "solution/answer.txt")
    assert len(changed) == 1 and changed[0]["event"] == "modified" and "-10\n+4" in changed[0]["diff"], changed
    assert file_rows(rows, "notes/a.txt")[0]["event"] == "created"

    # the shell key's command line, over the same ssh:// link, is captured
    p = shell(s, "echo hello-remote\necho 3 > solution/answer.txt\nexit\n", sshd.env())
    assert p.returncode == 0, p.stderr
    rows = collect_until(s, lambda rows: event_rows(rows, "shell_exit"))
    got = commands(rows)
    assert [c for c, _ in got] == ["echo hello-remote", "echo 3 > solution/answer.txt", "exit"], got
    assert got[0][1]["output"] == "hello-remote\n" and got[0][1]["exit_status"] == 0

    second = s.score()  # flushes the feed first: the change is recorded before the scoring
    assert second.score == 3
    rows = read_entries(s.folder / "audit.jsonl")
    kinds = [(r["content"].get("attributes", {}).get("title"), r["content"]["type"]) for r in rows]
    last_file = max(i for i, r in enumerate(rows) if r["content"].get("attributes", {}).get("title") == "file")
    assert last_file < [i for i, k in enumerate(kinds) if k[1] == "intermediateScore"][-1]
    assert len(file_rows(rows, "solution/answer.txt")) == 2

    s.submit("done")
    s.close()
    # the finish copies the remote home here, so the folder holds the work it records
    assert (s.workspace / "solution" / "answer.txt").read_text() == "3\n"
    assert (s.workspace / "notes" / "a.txt").read_text() == "idea\n"
    report = verify(s.folder)
    assert report.ok, report
    assert validate_file(s.folder / "audit.jsonl") == []

    # `stop --remove` keeps a copy of the remote home here, then removes the container and its volume
    from click.testing import CliRunner

    from rebench_tui.cli import main

    result = CliRunner().invoke(main, ["stop", s.id, "--remove", "--sessions-dir", str(settings.sessions)])
    assert result.exit_code == 0, result.output
    open_sessions.remove(s)
    assert (s.folder / "home-at-removal" / "agent" / "solution" / "answer.txt").read_text() == "3\n"
    assert "1 volume(s)" in result.output
    assert not docker_client.volumes.list(filters={"name": f"rebench-home-{s.id}"})
    assert not docker_client.containers.list(all=True, filters={"name": f"rebench-{s.id}"})
    assert verify(s.folder).ok  # the copy sits beside the record, not in it
