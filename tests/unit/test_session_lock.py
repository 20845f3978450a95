"""The session lock (one app per session) with real processes: a live holder refuses a second app;
a dead one, a zombie (an app killed when its login dropped, re-parented to a PID 1 that never
reaps) or a PID taken by a later process is a stale lock, taken over with a note."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rebench_tui.errors import SessionError
from rebench_tui.session.lock import SessionLock


def _lock(path: Path, pid: int, since: float) -> SessionLock:
    path.write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "since": since}))
    return SessionLock(path)


def _state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rfind(")") + 2:].split()[0]


@pytest.fixture
def sleeper():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def test_a_live_app_keeps_its_lock(tmp_path, sleeper):
    lock = _lock(tmp_path / "lock", sleeper.pid, time.time())
    assert lock.live_holder()["pid"] == sleeper.pid
    with pytest.raises(SessionError, match=f"open in another app: PID {sleeper.pid}"):
        lock.acquire()
    assert json.loads((tmp_path / "lock").read_text())["pid"] == sleeper.pid


def test_a_dead_app_s_lock_is_taken_over(tmp_path):
    proc = subprocess.Popen(["true"])
    proc.wait()
    lock = _lock(tmp_path / "lock", proc.pid, time.time())
    assert lock.live_holder() is None
    assert "stale lock left by PID" in lock.acquire()
    assert json.loads((tmp_path / "lock").read_text())["pid"] == os.getpid()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_zombie_app_s_lock_is_taken_over(tmp_path):
    proc = subprocess.Popen(["true"])  # never waited for until the end: a zombie, as an orphan under PID 1 is
    try:
        end = time.monotonic() + 10
        while _state(proc.pid) != "Z" and time.monotonic() < end:
            time.sleep(0.02)
        assert _state(proc.pid) == "Z"
        os.kill(proc.pid, 0)  # what the old check asked: a signal still reaches a zombie
        lock = _lock(tmp_path / "lock", proc.pid, time.time() - 1)
        assert lock.live_holder() is None
        assert f"stale lock left by PID {proc.pid}" in lock.acquire()
    finally:
        proc.wait()


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc")
def test_a_pid_reused_by_a_later_process_is_a_stale_lock(tmp_path, sleeper):
    lock = _lock(tmp_path / "lock", sleeper.pid, time.time() - 3600)  # written an hour before it started
    assert lock.live_holder() is None
    assert "stale lock" in lock.acquire()
