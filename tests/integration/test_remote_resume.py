"""The issue's whole path over ssh:// on loopback: start, score, file changes, commands, the link
cut for 10 s and restored, the app killed with SIGKILL at random moments and resumed. Afterwards
every record the app acknowledged is in the audit log exactly once, in order, the hash chain is
intact, nothing done in the container is missing, and working time is within 1 s of a reference
clock (the README's rule: it keeps running unless the participant pauses)."""

from __future__ import annotations

import fcntl
import io
import json
import os
import random
import signal
import subprocess
import sys
import tarfile
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from rebench_tui.errors import SessionError
from rebench_tui.session import Session
from rebench_tui.trajectory.audit import read_entries, validate_file
from rebench_tui.trajectory.verify import verify
from tests.conftest import FIXTURE_ENVS, ROOT
from tests.integration.test_remote_session import commands, event_rows
from tests.sshd import remote_runtime, sshd  # noqa: F401 - fixtures

pytestmark = pytest.mark.docker


def scoring_lock(log: Path) -> Path:
    """The lock the worker holds while it scores: the stand-in participant below starts its execs
    only between scorings (a scoring freezes the container, and an exec's process must never be
    made or taken down while the engine freezes it)."""
    return log.with_name("scoring.lock")


class Worker:
    """The headless app (tests/remote_worker.py) as a child process whose acks are collected."""

    def __init__(self, mode: str, where, host: str, log: Path) -> None:
        self.log = log
        with open(log, "ab") as err:
            self.proc = subprocess.Popen([sys.executable, "-m", "tests.remote_worker", mode, str(where), str(FIXTURE_ENVS),
                                          "toy_score", host], cwd=ROOT, stdout=subprocess.PIPE, stderr=err,
                                         env={**os.environ, "REBENCH_WORKER_LOCK": str(scoring_lock(log))})
        self.lines: list[dict] = []
        self.ready = threading.Event()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for raw in self.proc.stdout:
            msg = json.loads(raw)
            self.lines.append(msg)
            if "ready" in msg:
                self.ready.set()

    def wait_ready(self) -> str:
        if not self.ready.wait(120):
            self.proc.kill()
            raise AssertionError(f"the worker did not start: {self.log.read_text()[-3000:]}")
        return next(m["ready"] for m in self.lines if "ready" in m)

    def wait_for(self, pred, limit: float = 60) -> bool:
        deadline = time.monotonic() + limit
        while time.monotonic() < deadline:
            if any(pred(m) for m in list(self.lines)):
                return True
            time.sleep(0.1)
        return False

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)
        time.sleep(0.3)  # let the reader thread take the last lines the process printed

    @property
    def acks(self) -> list[dict]:
        return [m for m in self.lines if "ack" in m]


def test_sigkill_and_resume_over_ssh_with_a_link_cut(fixture_catalog, remote_runtime, sshd, settings, docker_client):
    seed = int(os.environ.get("REBENCH_FAULT_SEED", random.randrange(1 << 30)))
    rng = random.Random(seed)
    print(f"fault seed {seed} (REBENCH_FAULT_SEED={seed} repeats this run)")
    settings.sessions.mkdir(parents=True, exist_ok=True)

    log = settings.sessions.parent / "worker.log"
    w = Worker("create", settings.sessions, sshd.url, log)
    folder = w.wait_ready()
    ref_start = time.monotonic()  # the reference clock starts with the session's
    assert w.wait_for(lambda m: m.get("ack") == "score"), w.lines
    meta = json.loads(open(f"{folder}/session.json").read())
    container = docker_client.containers.get(f"rebench-{meta['id']}")
    written: dict[str, str] = {}
    typed: list[str] = []
    acks: list[dict] = []

    def work(n: int) -> None:
        """The participant, on the engine's host: files (copied in, which works frozen or not) and a
        shell command through the hooks (an exec: only between scorings, and not while the container
        is left frozen by an app killed during a scoring; it thaws on the next resume)."""
        for _ in range(n):
            i = len(written)
            name = f"work/f{i:03d}.txt"
            written[name] = f"version {i} {rng.random()}\n"
            data = written[name].encode()
            buf = io.BytesIO()
            with tarfile.open(fileobj=buf, mode="w") as tar:
                for folder in ("work",):
                    info = tarfile.TarInfo(folder)
                    info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, 0o755, 1000, 1000
                    tar.addfile(info)
                info = tarfile.TarInfo(name)
                info.size, info.mode, info.uid, info.gid = len(data), 0o644, 1000, 1000
                tar.addfile(info, io.BytesIO(data))
            assert container.put_archive("/home/agent", buf.getvalue())
            if i % 3 == 0:
                with open(scoring_lock(log), "a") as lock:
                    fcntl.flock(lock, fcntl.LOCK_EX)
                    container.reload()
                    if container.status == "running":
                        cmd = f"echo typed-{i}"
                        typed.append(cmd)
                        p = subprocess.run(["docker", "exec", "-i", "-u", "root", "-w", "/home/agent", container.id, "script",
                                            "-q", "-f", "-e", "-c", "exec setpriv --reuid=1000 --regid=1000 --init-groups env "
                                            "HOME=/home/agent bash --login", "/dev/null"], input=f"{cmd}\nexit\n".encode(),
                                           capture_output=True, timeout=60)
                        assert p.returncode == 0, p.stderr
                        time.sleep(0.4)  # the engine takes the exec's process down after it ends
            time.sleep(rng.uniform(0.05, 0.4))

    # 1. working, then the link is cut for 10 s and restored while the app runs
    work(4)
    sshd.stop()
    cut_at = time.monotonic()
    assert w.wait_for(lambda m: m.get("ack") == "link_lost", limit=30), w.lines
    work(3)  # done while the link is down
    time.sleep(max(0.0, 10 - (time.monotonic() - cut_at)))
    sshd.start()
    assert w.wait_for(lambda m: m.get("ack") == "link_restored", limit=40), w.lines
    work(3)

    # 2. SIGKILL at random moments, resume each time
    for _round in range(2):
        work(rng.randint(1, 4))
        time.sleep(rng.uniform(0.0, 2.5))
        w.kill()
        acks += w.acks
        work(rng.randint(1, 3))  # done while no app runs
        w = Worker("resume", folder, sshd.url, log)
        w.wait_ready()
        # a second app on the same session is refused, naming the process that holds it
        env = fixture_catalog.get("toy_score")
        with pytest.raises(SessionError, match=f"PID {w.proc.pid}"):
            Session.open(Path(folder), env, remote_runtime)
    work(2)
    assert w.wait_for(lambda m: m.get("ack") == "score" and m not in acks, limit=60)
    w.kill()
    acks += w.acks

    # 3. the last resume, in this process: everything done in the container is recorded
    s = Session.open(Path(folder), fixture_catalog.get("toy_score"), remote_runtime)
    try:
        s.start_watching()
        s.start_capture(interval=3600)
        s.watcher.flush()
        for _ in range(20):
            s.collect_commands()
            got = [c for c, _ in commands(read_entries(s.folder / "audit.jsonl"))]
            if all(t in got for t in typed):
                break
            time.sleep(0.3)
        working = s.wclock.used()
        reference = time.monotonic() - ref_start
    finally:
        s.close()
        s.sandbox.stop(remove=True)

    rows = read_entries(s.folder / "audit.jsonl")
    assert validate_file(s.folder / "audit.jsonl") == []  # strictly increasing calledAt, the contract
    report = verify(s.folder)
    assert report.ok, report  # the hash chain and the score log
    file_rows = [r["content"]["content"][1] for r in rows if r["content"].get("attributes", {}).get("title") == "file"]
    versions = Counter((f["path"], f.get("sha256")) for f in file_rows)
    assert not [k for k, n in versions.items() if n > 1], "a file change recorded twice"
    # every acknowledged record is there exactly once
    for a in acks:
        if a["ack"] == "file":
            assert versions[(a["path"], a["sha256"])] == 1, a
        elif a["ack"] == "command":
            assert sum(1 for r in rows if r["content"]["type"] == "action" and r["content"]["action"]["id"] == a["id"]) == 1, a
        elif a["ack"] == "score":
            assert sum(1 for r in rows if r["content"]["type"] == "intermediateScore" and r["calledAt"] == a["called_at"]) == 1, a
    assert sum(a["ack"] == "score" for a in acks) >= 2 and any(a["ack"] == "file" for a in acks)
    # nothing the participant did is missing: each file once as created, each command once
    created = Counter(f["path"] for f in file_rows if f["event"] == "created")
    assert {p: created[p] for p in written} == {p: 1 for p in written}
    got = Counter(c for c, _ in commands(rows))
    assert {t: got[t] for t in typed} == {t: 1 for t in typed}
    assert len(event_rows(rows, "link_lost")) == 1 and len(event_rows(rows, "link_restored")) == 1
    assert len(event_rows(rows, "session_resumed")) == 3
    assert abs(working - reference) < 1.0, (working, reference)
