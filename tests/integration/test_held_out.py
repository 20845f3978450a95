"""Held-out data in a real container: `agent` cannot read /protected by any ordinary
route, the root scorer does not follow a participant's link into it, and nothing in the
container reaches the host-side records."""

from __future__ import annotations

import os
import threading
import time

import pytest

from rebench_tui.errors import SessionError
from rebench_tui.runtime.docker_room import find_rooms
from rebench_tui.session import Session
from rebench_tui.store import Store
from rebench_tui.trajectory.audit import read_entries
from rebench_tui.trajectory.verify import verify

pytestmark = pytest.mark.docker

HELD_OUT = "held-out data the participant must never read"


@pytest.fixture
def session(fixture_catalog, docker_runtime, settings):
    s = Session.create(fixture_catalog.get("toy_score"), "smoke", docker_runtime, settings.sessions,
                       store=Store(settings.sessions))
    yield s
    if s.lock.held:
        s.close()
    s.sandbox.stop(remove=True)


def agent(s: Session, script: str):
    return s.sandbox.exec(["sh", "-c", script], user="agent", timeout=30)


def no_held_out_in_records(s: Session) -> None:
    for root, _dirs, files in os.walk(s.folder):
        if os.path.relpath(root, s.folder).startswith("workspace"):
            continue
        for name in files:
            data = open(os.path.join(root, name), "rb").read()
            assert HELD_OUT.encode() not in data, os.path.join(root, name)


def test_direct_reads_of_protected_are_denied(session):
    for probe in ("cat /protected/secret.txt", "ls /protected", "cat /protected/score.py",
                  "cp /protected/secret.txt /tmp/x", "tar cf - /protected", "find /protected -type f"):
        r = agent(session, probe)
        assert HELD_OUT not in r.stdout + r.stderr, probe
        assert r.exit_code != 0 or probe.startswith("find"), probe
    r = agent(session, "id; env")
    assert "protected" not in r.stdout.split("\n")[0]  # agent is not in the protected group
    assert HELD_OUT not in r.stdout and "TOY_TOKEN" not in r.stdout


def test_a_symlink_into_protected_is_refused_not_followed(session):
    answer = session.workspace / "solution" / "answer.txt"
    r = agent(session, "ln -sf /protected/secret.txt ~/solution/answer.txt && cat ~/solution/answer.txt")
    assert HELD_OUT not in r.stdout  # agent cannot read through it
    with pytest.raises(SessionError) as exc:
        session.score()
    assert "scoring refused" in str(exc.value) and "solution/answer.txt" in str(exc.value)
    assert session.history == []  # the scorer did not run
    rows = read_entries(session.folder / "audit.jsonl")
    assert rows[-1]["content"]["content"][1]["event"] == "score_refused"
    # other routes to the same place: a link to a folder, through /proc/<pid>/root, a relative chain
    for target in ("/protected", "/proc/1/root/protected/secret.txt", "../../../protected/secret.txt"):
        answer.unlink()
        agent(session, f"ln -sfn {target} ~/solution/answer.txt")
        with pytest.raises(SessionError):
            session.score()
    answer.unlink()
    answer.write_text("3")
    os.chown(answer, 1000, 1000)
    assert session.score().score == 3.0  # with the link gone, scoring works again
    no_held_out_in_records(session)
    assert verify(session.folder).ok


def test_scorer_process_and_temp_files_are_out_of_reach_while_it_runs(session):
    """The scorer runs in its scoring room, another container: the participant's container is
    frozen meanwhile, and what the participant runs then waits for the thaw; it never sees the
    scorer's process, and the temp files the scorer wrote the held-out text to went with the room."""
    (session.workspace / "solution" / "answer.txt").write_text("nap")
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("rec", session.score()))
    t.start()
    try:
        client = session.sandbox.runtime.client
        for _ in range(300):
            if find_rooms(client, session.meta.id):
                break
            time.sleep(0.05)
        assert find_rooms(client, session.meta.id), "no scoring room appeared"
        # the participant's command, asked for during the scoring: it runs once the container thaws
        r = agent(session, "pgrep -fa 'protected/[s]core[.]py'; grep -rl 'held-out' /tmp /var/tmp /dev/shm /run 2>/dev/null; "
                           "cat /tmp/scorer-plain.txt 2>&1; date +%s.%N")
        ran_at = float(r.stdout.split()[-1])
    finally:
        t.join(60)
    rec = result["rec"]
    assert rec.score == 1.0
    assert "score.py" not in r.stdout and HELD_OUT not in r.stdout, r.stdout
    assert ran_at >= rec.called_at_ms / 1000 + rec.details["duration_s"] - 0.5  # not before the scorer was done
    r = session.sandbox.exec(["sh", "-c", "find /tmp -name 'scorer-*'"], user="root", timeout=10)
    assert r.stdout.strip() == ""  # the scorer's temp files were the room's
    assert find_rooms(client, session.meta.id) == []
    no_held_out_in_records(session)


def test_a_link_made_while_the_scorer_runs_changes_nothing_it_scores(session):
    """A link into /protected asked for during a scoring is made only after it (the container is
    frozen), and the scoring room holds the snapshot, not the home: the result stands."""
    (session.workspace / "solution" / "answer.txt").write_text("nap")
    result = {}
    t = threading.Thread(target=lambda: result.setdefault("rec", session.score()))
    t.start()
    time.sleep(1.0)  # not a timed assert: the link is asked for during the 4-second nap either way
    agent(session, "ln -s /protected/secret.txt ~/peek")
    t.join(60)
    rec = result["rec"]
    assert rec.score == 1.0 and (session.workspace / "peek").is_symlink()
    with pytest.raises(SessionError, match="peek is a symbolic link out of your home"):
        session.score()  # the next snapshot would hold it: refused, naming it
    no_held_out_in_records(session)
    assert verify(session.folder).ok


def test_agent_environment_holds_no_secrets(session):
    r = agent(session, "env; cat /proc/1/environ 2>&1; cat /proc/self/environ | tr '\\0' '\\n'")
    for bad in (HELD_OUT, "TOY_TOKEN", "secret.txt"):
        assert bad not in r.stdout
    assert "REBENCH_PROTECTED=/protected" in r.stdout  # the path is public; its content is not


def test_no_mount_exposes_the_records(session, docker_client):
    info = docker_client.api.inspect_container(session.sandbox.container.id)
    sources = {m["Source"]: m["Destination"] for m in info["Mounts"]}
    folder = str(session.folder.resolve())
    for src, dest in sources.items():
        assert src != folder and not folder.startswith(src.rstrip("/") + "/"), (src, dest)  # no parent of the records
        if src.startswith(folder):
            assert src == str(session.workspace.resolve()) and dest == "/home/agent"
    before = (session.folder / "audit.jsonl").read_bytes()
    r = agent(session, "echo forged >> /home/agent/../audit.jsonl; echo forged >> /home/audit.jsonl; "
                       "echo forged > /home/agent/../score_log.csv; ls -la /home")
    assert r.stderr.count("Permission denied") == 3, r.stderr
    assert (session.folder / "audit.jsonl").read_bytes() == before
    assert b"forged" not in (session.folder / "score_log.csv").read_bytes()
    assert not (session.workspace.parent / "audit.jsonl").read_bytes().endswith(b"forged\n")
    r = agent(session, "ln -s ../audit.jsonl ~/a && echo forged >> ~/a; cat ~/a")
    assert (session.folder / "audit.jsonl").read_bytes() == before
    assert verify(session.folder).ok
