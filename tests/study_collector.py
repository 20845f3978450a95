"""A real collector for tests: a SQLite file, an HTTP server on 127.0.0.1 (a free port), two
participants and a researcher; it can be stopped and started again on the same port."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from rebench_tui.study.client import Collector
from rebench_tui.study.ledger import Ledger
from rebench_tui.study.server import CollectorServer


class Study:
    """A collector on 127.0.0.1 with a participant and a researcher; restartable on its port."""

    def __init__(self, db, now=None):
        """``now``: the collector's clock (a test's fake clock, so both sides share one time)."""
        self.db = db
        self.now = now
        self.ledger = self._ledger()
        self.tokens = {"ada": self.ledger.add("ada"), "bob": self.ledger.add("bob"),
                       "res": self.ledger.add("res", "researcher")}
        self.server = CollectorServer(self.ledger, ("127.0.0.1", 0))
        self.port = self.server.server_address[1]
        self.server.start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def client(self, who, timeout=5.0):
        return Collector(self.url, self.tokens[who], timeout=timeout)

    def stop(self):
        self.server.stop()
        self.ledger.close()

    def _ledger(self):
        return Ledger(self.db) if self.now is None else Ledger(self.db, now=self.now)

    def restart(self):
        self.ledger = self._ledger()
        self.server = CollectorServer(self.ledger, ("127.0.0.1", self.port))
        self.server.start()

    def close(self):
        try:
            self.server.stop()
        finally:
            self.ledger.close()


BIN = str(Path(sys.executable).with_name("rebench-tui"))


def serve_process(db: Path, port: int, log: Path, env: dict | None = None, **popen) -> subprocess.Popen:
    """`rebench-tui collector serve` as a process of its own, once it says it is serving. Its stderr
    goes to ``log``, never to a pipe nobody drains (a full pipe would hold it at its next line)."""
    with open(log, "w") as fh:
        p = subprocess.Popen([BIN, "collector", "serve", "--db", str(db), "--port", str(port), "--stop-after", "3m"],
                             env=env, stderr=fh, text=True, **popen)
    end = time.monotonic() + 60
    while "collector serving" not in log.read_text() and p.poll() is None and time.monotonic() < end:
        time.sleep(0.05)
    assert "collector serving" in log.read_text(), log.read_text()
    return p


def stop_process(p: subprocess.Popen, sig: int, log: Path) -> None:
    """Send ``sig`` and wait up to 30 s; a collector still running then is killed and the test fails
    with what it printed."""
    p.send_signal(sig)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        p.kill()
        raise AssertionError(f"collector serve did not stop on {signal.Signals(sig).name}: {log.read_text()[-3000:]}") from None
