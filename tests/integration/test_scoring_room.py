"""The scoring room, through the real engine: each scoring in a container of its own, on a
snapshot taken while the participant's container is frozen by the cgroup freezer.

Each test is a class of the ways past the old scorer (a process that escapes a freeze made of
signals, code kept where the record does not look, a special file that drops the snapshot), run
as a participant with a shell in the container would run it."""

from __future__ import annotations

import json
import math
import time

import pytest

from rebench_tui.catalog import load_catalog
from rebench_tui.errors import SessionError
from rebench_tui.runtime.docker_room import find_rooms
from rebench_tui.session import Session
from rebench_tui.store import Store
from rebench_tui.trajectory.entries import log_event
from rebench_tui.trajectory.verify import verify
from tests.conftest import FIXTURE_ENVS, KNOWN_IMAGES

pytestmark = pytest.mark.docker

PROBE = '''
if answer == "probe":
    import glob, socket
    seen = []
    for d in glob.glob("/proc/[0-9]*"):
        try:
            seen.append(open(d + "/cmdline", "rb").read().replace(b"\\0", b" ").decode(errors="replace"))
        except OSError:
            pass
    ticks = "/tmp/ticks"
    before = os.path.getsize(ticks) if os.path.exists(ticks) else -1
    time.sleep(1.5)
    after = os.path.getsize(ticks) if os.path.exists(ticks) else -1
    report({"score": 1.0, "message": {"answer": 1.0}, "details": {
        "procs": seen, "hostname": socket.gethostname(), "net": sorted(os.listdir("/sys/class/net")),
        "git": os.path.exists(os.path.join(home, "solution", ".git")),
        "cache": os.path.exists(os.path.join(home, "solution", ".cache")),
        "ticks_in_room": (before, after), "uid": os.stat(os.path.join(home, "solution", "answer.txt")).st_uid}})
    sys.exit(0)
'''


def probe_env(env_copy):
    def edit(d):
        score = d / "protected" / "score.py"
        text = score.read_text()
        anchor = 'secret_ok = open(os.path.join(protected, "secret.txt")).read().startswith("held-out")\n'
        score.write_text(text.replace(anchor, anchor + PROBE))

    return load_catalog(env_copy(FIXTURE_ENVS / "toy_score", edit), KNOWN_IMAGES).get("toy_score")


@pytest.fixture()
def room_session(docker_runtime, settings, env_copy):
    s = Session.create(probe_env(env_copy), "smoke", docker_runtime, settings.sessions, store=Store(settings.sessions))
    yield s
    if s.lock.held:
        s.close()
    s.sandbox.stop(remove=True)


def events(row):
    return log_event(row.get("content"))


def agent(s, script):
    return s.sandbox.exec(["sh", "-c", script], user="agent", timeout=30, workdir=s.sandbox.home)


def test_each_scoring_runs_in_a_room_of_its_own_that_sees_nothing_of_the_participant(room_session):
    s = room_session
    (s.workspace / "solution" / "answer.txt").write_text("probe")
    # A participant process that keeps writing (and would keep doing so through a freeze made of
    # signals: it re-arms itself with SIGCONT); the cgroup freezer holds it all the same.
    # (started as from the participant's own shell: not under the app's supervisor, which ends what it leaves)
    s.sandbox.container.exec_run(["sh", "-c", "trap '' TSTP; while :; do date +%s.%N >> /tmp/ticks; kill -CONT $$; "
                                  "sleep 0.05; done"], user="agent", workdir="/home/agent", detach=True)
    agent(s, "mkdir -p solution/.git solution/.cache && echo 'FAST=1' > solution/.git/kernel.py "
             "&& echo w > solution/.cache/weights.bin")
    time.sleep(0.5)
    first = s.score()
    second = s.score()
    d1, d2 = first.details, second.details
    assert d1["room"]["container"] != d2["room"]["container"]  # a new container for each scoring
    assert d1["room"]["network"] == "none" and d1["net"] == ["lo"]
    assert not any("ticks" in p or "sleep 0.05" in p for p in d1["procs"]), d1["procs"]  # its own PID namespace
    assert d1["ticks_in_room"] == [-1, -1]  # a fresh /tmp: nothing of the participant's container
    assert d1["git"] is False and d1["cache"] is False  # what the record ignores is not scored either
    assert d1["uid"] == 1000  # the attempt's copy is the participant's, as the home is
    assert d1["attempt"]["source"] == "snapshot" and d1["attempt"]["fingerprint"] == first.fingerprint
    assert first.fingerprint == second.fingerprint  # same files, same attempt
    assert find_rooms(s.sandbox.runtime.client, s.meta.id) == []  # each room removed when its scoring ended
    # The participant's container was frozen through each scoring: no tick while the scorer ran.
    ticks = [float(t) for t in s.sandbox.container.exec_run(["cat", "/tmp/ticks"]).output.split()]
    rows = [json.loads(line) for line in (s.folder / "audit.jsonl").read_text().splitlines()]
    starts = [e for e in map(events, rows) if e and e["event"] == "scoring_started"]
    assert [e["token"] for e in starts] == [d1["room"]["token"], d2["room"]["token"]]
    for rec in (first, second):
        begun = rec.called_at_ms / 1000 + 0.3
        ended = begun + rec.details["duration_s"] - 0.3
        assert not [t for t in ticks if begun < t < ended], (begun, ended)
    assert len(ticks) > 5 and ticks[-1] > time.time() - 5  # it ran before, between and after the scorings
    s.close()
    report = verify(s.folder)
    assert report.ok, [str(f) for f in report.findings if not f.ok]


def test_a_named_pipe_or_a_link_out_ends_the_scoring_naming_the_file(room_session):
    s = room_session
    agent(s, "mkfifo solution/feed")
    with pytest.raises(SessionError, match="solution/feed is a named pipe"):
        s.score()
    agent(s, "rm solution/feed && ln -s /protected/secret.txt solution/answer2.txt")
    with pytest.raises(SessionError, match="solution/answer2.txt is a symbolic link out of your home"):
        s.score()
    rows = [json.loads(line) for line in (s.folder / "audit.jsonl").read_text().splitlines()]
    refused = [e for e in map(events, rows) if e and e["event"] == "score_refused"]
    assert [r["reason"] for r in refused] == ["snapshot", "snapshot"]
    assert s.sandbox.is_running() and s.sandbox.container.status == "running"  # thawed after the refusal
    agent(s, "rm solution/answer2.txt")
    assert s.score().score == 10.0  # and the next scoring runs


def test_the_recount_scores_the_kept_snapshot_and_never_touches_the_home(docker_runtime, settings, env_copy):
    def edit(d):
        m = d / "environment.toml"
        m.write_text(m.read_text().replace('timeout = "30s"\n', 'timeout = "30s"\ntiming = true\nrecount = 3\n'))

    env = load_catalog(env_copy(FIXTURE_ENVS / "toy_score", edit), KNOWN_IMAGES).get("toy_score")
    s = Session.create(env, "smoke", docker_runtime, settings.sessions, store=Store(settings.sessions))
    try:
        for value in ("3", "1", "5"):
            agent(s, f"echo {value} > solution/answer.txt")
            s.score()
        agent(s, "echo 4 > solution/answer.txt")
        s.submit()  # attempt 2 (1.0) leads; its snapshot is scored three more times in rooms
        recount = [r for r in s.core.history if r.recount]
        assert [r.score for r in recount] == [1.0, 1.0, 1.0] and s.meta.final_score == 1.0
        assert {r.fingerprint for r in recount} == {s.core.history[1].fingerprint}
        assert (s.workspace / "solution" / "answer.txt").read_text() == "4\n"  # the home stayed as the participant left it
        assert len({r.details["room"]["container"] for r in recount}) == 3
        s.close()
        report = verify(s.folder)
        assert report.ok, [str(f) for f in report.findings if not f.ok]
    finally:
        if s.lock.held:
            s.close()
        s.sandbox.stop(remove=True)
