"""A real collector for tests: a SQLite file, an HTTP server on 127.0.0.1 (a free port), two
participants and a researcher; it can be stopped and started again on the same port."""

from __future__ import annotations

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
