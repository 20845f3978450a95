"""`rebench-tui start --study` as a participant runs it: the real command in a terminal (a pty),
a real `collector serve` that is stopped and started again mid-session, then `study status` and
`verify --witness` from the command line."""

from __future__ import annotations

import os
import pty
import select
import signal
import socket
import subprocess
import time

import pytest

from tests.conftest import FIXTURE_ENVS, ROOT
from tests.study_collector import BIN, serve_process, stop_process

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Terminal:
    """A command in a pty; what it drew is kept in ``screen``."""

    def __init__(self, argv, env):
        self.pid, self.fd = pty.fork()
        if self.pid == 0:  # the child: become the command
            os.environ.clear()
            os.environ.update(env)
            os.execv(argv[0], argv)
        self.screen = bytearray()

    def until(self, cond, timeout_s=30.0) -> bool:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            if cond(bytes(self.screen)):
                return True
            ready, _, _ = select.select([self.fd], [], [], 0.2)
            if ready:
                try:
                    self.screen.extend(os.read(self.fd, 65536))
                except OSError:
                    break
        return cond(bytes(self.screen))

    def press(self, keys: bytes) -> None:
        os.write(self.fd, keys)

    def wait(self, timeout_s=30.0) -> int:
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            self.until(lambda _s: False, 0.2)
            done, status = os.waitpid(self.pid, os.WNOHANG)
            if done:
                return os.waitstatus_to_exitcode(status)
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        raise AssertionError("the app did not quit")


def test_start_with_study_is_witnessed_through_a_collector_restart(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REBENCH_ENVIRONMENTS_DIR": str(FIXTURE_ENVS),
           "REBENCH_CONFIG_DIR": str(tmp_path / "config"), "TERM": "xterm-256color"}
    db, port = tmp_path / "study.db", _free_port()
    url = f"http://127.0.0.1:{port}"

    def token(who, *extra):
        r = subprocess.run([BIN, "collector", "token", who, "--db", str(db), *extra], capture_output=True, text=True,
                           env=env, timeout=60)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    logs = []

    def serve():
        logs.append(tmp_path / f"collector-{len(logs)}.log")
        return serve_process(db, port, logs[-1], env)

    def stop(p):
        stop_process(p, signal.SIGINT, logs[-1])

    def status():
        r = subprocess.run([BIN, "study", "status", url], capture_output=True, text=True, timeout=60,
                           env={**env, "REBENCH_STUDY_TOKEN": researcher})
        assert r.returncode == 0, r.stderr
        return r.stdout

    ada, researcher = token("ada"), token("res", "--researcher")
    collector = serve()
    app = None
    try:
        app = Terminal([BIN, "start", "toy_score", "--runtime", "local", "--profile", "smoke", "--study", url,
                        "--participant", "ada", "--sessions-dir", str(tmp_path / "sessions")],
                       {**env, "REBENCH_STUDY_TOKEN": ada, "COLUMNS": "220", "LINES": "40"})
        assert app.until(lambda s: b"witness: current" in s), app.screen[-2000:]
        stop(collector)
        app.press(b"s")  # a scoring while nobody witnesses
        assert app.until(lambda s: b"collector unreachable" in s), app.screen[-2000:]
        collector = serve()
        mark = len(app.screen)
        assert app.until(lambda s: b"witness: current" in s[mark:]), app.screen[-2000:]
        app.press(b"q")
        time.sleep(1.0)
        app.press(b"\r")  # "pause clock and quit"
        assert app.wait() == 0
        app = None
        (folder,) = (tmp_path / "sessions").glob("toy_score-*")
        shown = status()
        assert folder.name in shown and "ada" in shown and "live" in shown and " 10 " in shown
        r = subprocess.run([BIN, "verify", folder.name, "--witness", url, "--sessions-dir", str(tmp_path / "sessions")],
                           capture_output=True, text=True, env={**env, "REBENCH_STUDY_TOKEN": researcher}, timeout=60)
        assert r.returncode == 0 and "ok   witness: all" in r.stdout, r.stdout + r.stderr
    finally:
        if app is not None:
            os.kill(app.pid, signal.SIGKILL)
            os.waitpid(app.pid, 0)
        if collector.poll() is None:
            stop(collector)
