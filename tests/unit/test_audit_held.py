"""A reservation kept across a crash (a scoring that was running): the rows written behind it wait
in the side journal until it is filled on reopening, then all go into the log in time order."""

from rebench_tui.clock import FakeClock
from rebench_tui.trajectory.audit import AuditLog, read_entries, validate_file
from rebench_tui.trajectory.entries import log


def test_a_held_reservation_keeps_the_journal_until_it_is_filled(tmp_path):
    clock = FakeClock()
    a = AuditLog(tmp_path / "audit.jsonl", run_id=7, clock=clock)
    a.append(log("before", {}, title="t"))
    clock.advance(1)
    reservation = a.reserve()  # a scoring starts
    clock.advance(1)
    a.append(log("during", {}, title="t"))  # waits in the journal
    assert [r["content"]["content"][0] for r in read_entries(a.path)] == ["before"]
    a.close()  # the app dies here: the reservation was in memory only

    b = AuditLog(tmp_path / "audit.jsonl", run_id=7, clock=clock, held=(reservation[0],))
    assert b.pending_path.exists() and len(read_entries(b.path)) == 1  # not merged: the scoring's row goes first
    clock.advance(1)
    b.append(log("resumed", {}, title="t"))  # a row written on reopening goes after those waiting
    b.fill(reservation, {"type": "intermediateScore", "score": "NaN", "message": {"error": "interrupted"}, "details": {}})
    rows = read_entries(b.path)
    assert [r["content"].get("content", ["score"])[0] for r in rows] == ["before", "score", "during", "resumed"]
    assert rows[1]["calledAt"] == reservation[0]
    assert not b.pending_path.exists() and validate_file(b.path) == []
    b.close()


def test_a_held_time_already_in_the_log_is_not_held(tmp_path):
    clock = FakeClock()
    a = AuditLog(tmp_path / "audit.jsonl", run_id=7, clock=clock)
    reservation = a.reserve()
    a.fill(reservation, {"type": "intermediateScore", "score": 1.0, "message": {}, "details": {}})
    a.close()  # the crash came after the row: its marker is stale
    b = AuditLog(tmp_path / "audit.jsonl", run_id=7, clock=clock, held=(reservation[0],))
    assert b._open == set()
    b.append(log("after", {}, title="t"))
    assert len(read_entries(b.path)) == 2
    b.close()
