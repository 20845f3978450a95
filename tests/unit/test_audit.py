"""The audit writer: the trace-entry contract, strict order, durability across a crash."""

import json
import math

import pytest
from pydantic import ValidationError

from rebench_tui.clock import FakeClock
from rebench_tui.trajectory.audit import AuditLog, read_entries, validate_file
from rebench_tui.trajectory.entries import TraceEntry, content_dict, log


def make(tmp_path, clock=None, usage=lambda: 12.3456):
    return AuditLog(tmp_path / "audit.jsonl", run_id=4242, clock=clock or FakeClock(), usage=usage)


def test_rows_follow_the_trace_entry_contract(tmp_path):
    a = make(tmp_path)
    a.append(log("hello", {"k": 1}, title="session"))
    a.append({"type": "intermediateScore", "score": "NaN", "message": {"timeout": True}, "details": {}})
    a.append({"type": "submission", "value": ""})
    a.append({"type": "error", "from": "server", "detail": "lost", "trace": None, "extra": None})
    a.append({"type": "action", "action": {"type": "run_bash", "args": {"command": "ls"}}})
    a.append({"type": "observation", "observation": {"exit_status": 0}})
    rows = read_entries(a.path)
    assert len(rows) == 6 == a.count
    for r in rows:
        TraceEntry.model_validate(r)
        assert r["runId"] == 4242 and r["agentBranchNumber"] == 0
        assert 1 <= r["index"] <= 2**53
        assert r["usageTotalSeconds"] == 12 and r["workingMs"] == 12346
    assert rows[0]["content"] == {"type": "log", "content": ["hello", {"k": 1}], "attributes": {"title": "session"}}
    assert rows[1]["content"]["score"] == "NaN"
    assert rows[3]["content"]["from"] == "server"
    assert validate_file(a.path) == []
    # plain JSON: no NaN literals anywhere
    assert "NaN," not in a.path.read_text().replace('"NaN"', "")


def test_content_is_strict():
    with pytest.raises(ValidationError):
        content_dict({"type": "log", "content": [], "extra_key": 1})
    with pytest.raises(ValidationError):
        content_dict({"type": "intermediateScore", "score": "fast", "message": {}, "details": {}})
    with pytest.raises(ValidationError):
        content_dict({"type": "error", "from": "participant", "detail": "x"})
    with pytest.raises(ValidationError):
        content_dict({"type": "teleport"})


def test_called_at_is_when_the_row_happened_and_never_decreases(tmp_path):
    """Rows of one millisecond share it (the chain orders them; a burst once got invented
    times 1 ms apart, up to 16 s after it was on disk); a wall clock stepping back does not take
    calledAt back before the row above; no row is stamped after the moment it is written."""
    clock = FakeClock()
    a = make(tmp_path, clock)
    a.append(log("a"))
    a.append(log("b"))  # same millisecond
    clock.jump_wall(-60)  # clock stepped back
    a.append(log("c"))
    clock.jump_wall(60)
    a.append_many([log(f"burst {i}") for i in range(2000)])
    rows = read_entries(a.path)
    called = [r["calledAt"] for r in rows]
    now = int(clock.time() * 1000)
    assert called[0] == called[1] == called[2] == now and all(c == now for c in called[3:])
    assert all(r["calledAt"] <= r["modifiedAt"] <= now for r in rows)
    assert validate_file(a.path) == []


def test_rows_are_stamped_with_when_their_fact_was_seen_never_later_than_now(tmp_path):
    clock = FakeClock()
    a = make(tmp_path, clock)
    now = int(clock.time() * 1000)
    a.append_many([log("seen 5 s ago"), log("seen 2 s ago"), log("seen in the future?"), log("no time")],
                  seen_ms=[now - 5000, now - 2000, now + 9000, None])
    a.append_many([log("seen before the row above")], seen_ms=[now - 9000])
    assert [r["calledAt"] for r in read_entries(a.path)] == [now - 5000, now - 2000, now, now, now]


def test_reservation_keeps_file_order_by_called_at(tmp_path):
    clock = FakeClock()
    a = make(tmp_path, clock)
    a.append(log("before"))
    clock.advance(1)
    res = a.reserve()  # a scoring starts
    clock.advance(5)
    a.append(log("file changed during scoring"))
    assert a.pending_path.exists()
    clock.advance(5)
    a.fill(res, {"type": "intermediateScore", "score": 1.0, "message": {}, "details": {}})
    assert not a.pending_path.exists()
    rows = read_entries(a.path)
    assert [r["content"]["type"] for r in rows] == ["log", "intermediateScore", "log"]
    assert rows[1]["calledAt"] == res[0]  # the score keeps the time scoring started
    assert validate_file(a.path) == []


def test_nested_reservations_fill_out_of_turn(tmp_path):
    clock = FakeClock()
    a = make(tmp_path, clock)
    r1 = a.reserve()
    clock.advance(1)
    r2 = a.reserve()
    clock.advance(1)
    a.append(log("x"))
    a.fill(r2, log("second"))
    a.fill(r1, log("first"))
    assert [r["content"]["content"][0] for r in read_entries(a.path)] == ["first", "second", "x"]
    assert validate_file(a.path) == []


def test_a_crash_during_a_reservation_loses_nothing(tmp_path):
    clock = FakeClock()
    a = make(tmp_path, clock)
    a.append(log("one"))
    a.reserve()
    clock.advance(2)
    a.append(log("two, written while scoring"))
    # the process dies here; a new writer opens the same log
    b = make(tmp_path, clock)
    rows = read_entries(b.path)
    assert [r["content"]["content"][0] for r in rows] == ["one", "two, written while scoring"]
    b.append(log("three"))
    assert validate_file(b.path) == []
    assert b.count == 3


def test_validate_file_names_bad_lines(tmp_path):
    a = make(tmp_path)
    a.append(log("ok"))
    a.append(log("ok2"))
    lines = a.path.read_text().splitlines()
    row = json.loads(lines[1])
    row["content"]["surprise"] = True
    lines[1] = json.dumps(row)
    lines.append("{not json")
    a.path.write_text("\n".join(lines) + "\n")
    problems = validate_file(a.path)
    assert [n for n, _ in problems] == [2, 3]


def test_append_many_is_one_batch(tmp_path):
    a = make(tmp_path)
    n = a.append_many([log(f"f{i}") for i in range(500)])
    assert n == 500 == len(read_entries(a.path))
    assert validate_file(a.path) == []


def test_rows_are_hash_chained_in_file_order(tmp_path):
    from rebench_tui.trajectory.audit import genesis_hash, line_hash

    clock = FakeClock()
    a = make(tmp_path, clock)
    a.append(log("one"))
    res = a.reserve()
    a.append(log("two, behind a reservation"))
    a.fill(res, {"type": "intermediateScore", "score": 1.0, "message": {}, "details": {}})
    a.append(log("three"))
    lines = a.path.read_text().splitlines()
    prev = genesis_hash(4242)
    for line in lines:
        claimed, actual = line_hash(line)
        assert claimed == actual
        assert json.loads(line)["prevHash"] == prev
        prev = claimed
    b = make(tmp_path, clock)  # reopening continues the chain
    b.append(log("four"))
    assert json.loads(b.path.read_text().splitlines()[-1])["prevHash"] == prev
