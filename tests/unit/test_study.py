"""Study mode: a real collector on loopback (HTTP, a real SQLite file), real toy sessions that
stream their rows to it, a collector stopped and restarted mid-session, and the consistent
rewrite of a finished session that local checks pass and the witness catches."""

from __future__ import annotations

import json

import pytest

from rebench_tui.study.client import Collector
from rebench_tui.study.ledger import Ledger
from rebench_tui.study.server import CollectorServer
from rebench_tui.study.witness import Witness
from rebench_tui.trajectory.audit import read_entries


class Study:
    """A collector on 127.0.0.1 with a participant and a researcher; restartable on its port."""

    def __init__(self, db):
        self.db = db
        self.ledger = Ledger(db)
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

    def restart(self):
        self.ledger = Ledger(self.db)
        self.server = CollectorServer(self.ledger, ("127.0.0.1", self.port))
        self.server.start()


@pytest.fixture
def study(tmp_path):
    s = Study(tmp_path / "study.db")
    yield s
    s.server.stop()


def answer(session, text):
    (session.workspace / "solution" / "answer.txt").write_text(text)


def local_hashes(session):
    return [r["hash"] for r in read_entries(session.folder / "audit.jsonl")]


def test_rows_are_witnessed_as_written_and_through_a_collector_restart(study, toy_session, fake_clock):
    s = toy_session()
    w = Witness(s.folder, study.client("ada", timeout=1.0), retry_s=0.1).start(s.audit)
    assert w.wait_current(10), w.words()
    assert [r["hash"] for r in study.client("res").rows(s.id)] == local_hashes(s)
    assert w.words().startswith("witness: current")

    study.stop()  # the collector goes away mid-session
    fake_clock.advance(60)
    answer(s, "4")
    s.score()
    s.note("written while the collector was down")
    assert not w.wait_current(0.5)
    state = w.state()
    assert not state.current and "unreachable" in w.words() and "kept" in w.words()

    study.restart()  # the same database, the same port: the witness catches up by itself
    assert w.wait_current(10), w.words()
    rows = study.client("res").rows(s.id)
    assert [r["hash"] for r in rows] == local_hashes(s)
    assert [r["n"] for r in rows] == list(range(len(rows)))
    assert any(r["kind"] == "intermediateScore" for r in rows)
    w.stop(1)
