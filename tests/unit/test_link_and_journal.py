"""The link monitor (with a fake engine) and state committed together with audit rows."""

from __future__ import annotations

import json
import threading

from rebench_tui.clock import FakeClock
from rebench_tui.runtime.poller import Scanner
from rebench_tui.session.journal import StateCommit
from rebench_tui.session.link import LinkMonitor
from rebench_tui.trajectory.audit import AuditLog, read_entries
from rebench_tui.trajectory.entries import log


class FakeEngine:
    def __init__(self) -> None:
        self.answering = True
        self.reconnects = 0

    def ping(self, timeout: float) -> None:
        if not self.answering:
            raise ConnectionError("no answer")

    def reconnect(self) -> None:
        self.reconnects += 1
        if not self.answering:
            raise ConnectionError("refused")


def test_link_lost_then_restored_after_backoff():
    eng = FakeEngine()
    events: list[tuple] = []
    lost, restored = threading.Event(), threading.Event()
    mon = LinkMonitor(eng.ping, eng.reconnect, lambda e: (events.append(("lost", e)), lost.set()),
                      lambda s, n: (events.append(("restored", n)), restored.set()), interval=0.01, backoff=0.01, cap=0.02)
    mon.start()
    try:
        eng.answering = False
        mon.suspect()
        assert lost.wait(5) and not mon.up
        assert not mon.wait_up(0.1)
        eng.answering = True
        assert restored.wait(5) and mon.up
    finally:
        mon.stop()
    assert [e[0] for e in events] == ["lost", "restored"] and "no answer" in events[0][1]
    assert eng.reconnects >= 1 and mon.losses == 1


def _audit(tmp_path):
    return AuditLog(tmp_path / "audit.jsonl", 7, FakeClock())


def test_commit_then_crash_before_state_keeps_the_rows_state(tmp_path):
    audit = _audit(tmp_path)
    journal = StateCommit(audit)
    state = tmp_path / "files.json"
    journal.commit(state, {"a": 1}, [log("one")])
    assert json.loads(state.read_text()) == {"a": 1} and not (tmp_path / "files.json.next").exists()
    # a crash after the rows were written but before the state moved into place
    (tmp_path / "files.json.next").write_text(json.dumps({"after": audit.count, "state": {"a": 2}}))
    assert "kept" in StateCommit(_audit(tmp_path)).recover(state)
    assert json.loads(state.read_text()) == {"a": 2}


def test_commit_then_crash_before_rows_keeps_the_old_state(tmp_path):
    audit = _audit(tmp_path)
    state = tmp_path / "commands.json"
    StateCommit(audit).commit(state, {"offset": 10}, [log("one")])
    (tmp_path / "commands.json.next").write_text(json.dumps({"after": audit.count + 2, "state": {"offset": 99}}))
    assert "derived again" in StateCommit(_audit(tmp_path)).recover(state)
    assert json.loads(state.read_text()) == {"offset": 10}
    assert len(read_entries(tmp_path / "audit.jsonl")) == 1


def test_rows_in_the_side_journal_count_as_written(tmp_path):
    audit = _audit(tmp_path)
    journal = StateCommit(audit)
    reservation = audit.reserve()
    journal.commit(tmp_path / "s.json", {"n": 1}, [log("waits behind the scoring")])
    assert journal.rows_written() == 1 and audit.count == 0
    audit.fill(reservation, log("the scoring"))
    assert audit.count == 2


def test_poller_scanner_sees_changes_and_skips_ignored(tmp_path):
    (tmp_path / "a.txt").write_text("x")
    (tmp_path / "__pycache__").mkdir()
    (tmp_path / "__pycache__" / "m.pyc").write_bytes(b"\0")
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "big.bin").write_bytes(b"\0")
    sc = Scanner(str(tmp_path), ["__pycache__", "assets/"])
    first = sc.scan()
    assert set(first) == {"a.txt"} and sc.changed == {"a.txt"}
    assert sc.scan() == first and sc.changed == set()
    (tmp_path / "a.txt").write_text("xy")
    again = sc.scan()
    assert sc.changed == {"a.txt"} and again["a.txt"]["size"] == 2 and again["a.txt"]["sha256"] != first["a.txt"]["sha256"]


def test_remote_feed_fingerprint_is_the_scanned_homes(tmp_path):
    """The remote file feed's state after its scans gives the same attempt fingerprint as a scan of
    the same files here: a remote scoring and a local one of equal files name one attempt."""
    from rebench_tui.session.files import DEFAULT_IGNORE, fingerprint, scan
    from rebench_tui.session.files import RemoteFileWatcher

    home = tmp_path / "home"
    (home / "solution").mkdir(parents=True)
    (home / "solution" / "x.py").write_text("x = 1\n")
    scanner = Scanner(str(home), list(DEFAULT_IGNORE))
    changed = threading.Event()

    class Stream:
        closed = False

        def __iter__(self):
            yield {"type": "scan", "full": True, "seq": 0, "files": scanner.scan()}
            changed.wait(5)
            files = scanner.scan()
            yield {"type": "scan", "seq": 1, "files": {r: files[r] for r in scanner.changed}, "deleted": []}
            while not self.closed:
                threading.Event().wait(0.05)
                yield {"type": "scan", "seq": 2, "files": {}, "deleted": []}

        def close(self):
            self.closed = True

    (tmp_path / "state").mkdir()
    w = RemoteFileWatcher(Stream, lambda changes, raw, state: None, tmp_path / "state" / "files.json", interval=0.05)
    assert w.state_fingerprint() is None  # no scan yet
    w.start()
    try:
        w.flush(timeout=2)
        first = w.state_fingerprint()
        assert first == fingerprint(scan(home)) and first[1] == 1
        (home / "solution" / "x.py").write_text("x = 2\n")
        changed.set()
        w.flush(timeout=2)
        assert w.state_fingerprint() == fingerprint(scan(home)) != first
    finally:
        w.stop()
