"""The collector is the authority in a study: it checks every row's schema and types (a 400 naming
the field, nothing of the request stored), writes a request in one transaction, takes a stub
only for a row above the size limit, takes no row after the finish, measures gaps by its own
receive time, and counts as the workstation does (a recount included). The witness sends
batches measured in bytes, splits them when refused as too large, and backs off while the
collector is down instead of trying once per written row."""

from __future__ import annotations

import json
import socket
import threading
import time

import pytest

from rebench_tui.study.client import Collector, CollectorRefused
from rebench_tui.study import ledger as ledger_module
from rebench_tui.study.server import CollectorServer
from rebench_tui.study.summary import summarize
from rebench_tui.study.witness import Witness
from rebench_tui.trajectory.audit import chain_line, genesis_hash
from tests.study_collector import Study

RUN = 77
MAX_ROW_BYTES = getattr(ledger_module, "MAX_ROW_BYTES", 1 << 20)
INFO = {"run_id": RUN, "env_id": "toy_score"}
START = {"event": "session_started", "env": "toy_score", "profile": "smoke", "time_limit_s": 3600,
         "score": {"direction": "lower", "aggregation": "min", "timing": True, "recount": 3},
         "anchors": {"start": 10.0, "reference": 1.0}}


@pytest.fixture
def study(tmp_path, fake_clock):
    s = Study(tmp_path / "study.db", now=fake_clock.time)
    yield s
    s.close()


def chain(contents, *, called=None, modified=None, edit=None):
    """Chained lines (no newline) of the given contents; ``edit(i, row)`` may change a row first."""
    prev, out = genesis_hash(RUN), []
    for i, content in enumerate(contents):
        at = (called or {}).get(i, 1000 + i)
        row = {"runId": RUN, "index": i + 1, "agentBranchNumber": 0, "calledAt": at,
               "modifiedAt": (modified or {}).get(i, at), "usageTotalSeconds": i, "workingMs": i * 1000,
               "content": content}
        if edit:
            edit(i, row)
        line, prev = chain_line(row, prev)
        out.append(line.rstrip("\n"))
    return out


def event(facts, text="x"):
    return {"type": "log", "content": [text, facts]}


def score(value, fp, recount=False):
    details = {"attempt": {"fingerprint": fp}, **({"recount": {"of": 1}} if recount else {})}
    return {"type": "intermediateScore", "score": value, "message": {}, "details": details}


def stored(study, sid="s1"):
    return study.ledger.head(sid)["count"]


def refusal(fn):
    with pytest.raises(CollectorRefused) as exc:
        fn()
    return exc.value.status, exc.value.what


def test_a_row_of_the_wrong_type_is_refused_naming_the_field_and_nothing_is_stored(study):
    ada = study.client("ada")

    def bad_usage(i, row):
        if i == 2:
            row["usageTotalSeconds"] = "a while"
    lines = chain([event(START), event({"event": "note"}), event({"event": "note"})], edit=bad_usage)
    status, what = refusal(lambda: ada.send("s1", 0, lines, INFO))
    assert status == 400 and "line 3" in what and "usageTotalSeconds" in what
    assert study.ledger.sessions() == [] and stored(study) == 0  # not even the good rows before it

    for bad, field in (({"time_limit_s": "eight hours"}, "time_limit_s"),
                       ({"score": {"direction": "sideways", "aggregation": "min"}}, "direction")):
        status, what = refusal(lambda: ada.send("s1", 0, chain([event({**START, **bad})]), INFO))
        assert status == 400 and field in what and stored(study) == 0
    assert ada.send("s1", 0, chain([event(START)]), INFO)["count"] == 1


def test_a_request_is_one_transaction(study):
    ada = study.client("ada")
    statements = []
    study.ledger.db.conn.set_trace_callback(statements.append)
    lines = chain([event(START)] + [event({"event": "note", "i": i}) for i in range(200)])
    assert ada.send("s1", 0, lines, INFO)["count"] == 201
    study.ledger.db.conn.set_trace_callback(None)
    commits = [s for s in statements if s.strip().upper().startswith("COMMIT")]
    assert len(commits) == 1, commits[:5]


def test_a_stub_is_taken_only_for_a_row_above_the_size_limit(study):
    ada = study.client("ada")
    lines = chain([event(START), event({"event": "note"})])
    row = json.loads(lines[1])
    small = {"hash": row["hash"], "prevHash": row["prevHash"], "calledAt": row["calledAt"], "kind": "log"}
    assert ada.send("s1", 0, lines[:1], INFO)["count"] == 1
    status, what = refusal(lambda: ada.send("s1", 1, [small], INFO))
    assert status == 400 and "stub" in what and stored(study) == 1
    status, _ = refusal(lambda: ada.send("s1", 1, [{**small, "bytes": 200}], INFO))
    assert status == 400  # a size it does not have changes nothing: under the limit, the row itself
    assert ada.send("s1", 1, [{**small, "bytes": MAX_ROW_BYTES + 1}], INFO)["count"] == 2


def test_no_row_is_taken_after_the_finish(study):
    ada = study.client("ada")
    lines = chain([event(START), event({"event": "session_finished", "reason": "submitted"}), event({"event": "note"})])
    status, what = refusal(lambda: ada.send("s1", 0, lines, INFO))
    assert status == 409 and "finish" in what and stored(study) == 0
    assert ada.send("s1", 0, lines[:2], INFO)["count"] == 2
    status, what = refusal(lambda: ada.send("s1", 2, lines[2:], INFO))
    assert status == 409 and "line 3 follows the finish row (line 2)" in what and stored(study) == 2


def test_a_gap_is_measured_by_the_collectors_receive_time_not_the_rows_modified_at(study, fake_clock):
    ada = study.client("ada")
    # the second row was held back five minutes, and its modifiedAt claims it was written then
    lines = chain([event(START), event({"event": "note"})], called={1: 2000}, modified={1: 2000 + 300_000})
    fake_clock.advance(1)
    ada.send("s1", 0, lines[:1], INFO)
    fake_clock.advance(300)
    ada.send("s1", 1, lines[1:], INFO)
    (seen,) = summarize(study.ledger, now=fake_clock.time)
    assert seen["gaps"] == 1 and seen["longest_gap_s"] == pytest.approx(299, abs=1)


def test_the_collector_counts_as_the_workstation_does_recount_included(study):
    ada = study.client("ada")
    # six attempts, the luckiest draws 0.5; the finish recounts the leading attempt: 1, 5, 2
    scorings = [score(v, f"fp{i}") for i, v in enumerate((3.0, 0.5, 5.0, 2.0, 4.0, 1.5))]
    recount = [score(v, "fp1", recount=True) for v in (1.0, 5.0, 2.0)]
    assert ada.send("s1", 0, chain([event(START)] + scorings + recount), INFO)["count"] == 10
    (seen,) = summarize(study.ledger)
    assert seen["scorings"] == 9 and seen["counting"] == 2.0  # the recount's median, not the lucky draw


def test_a_session_of_non_ascii_text_is_sent_in_pieces_the_collector_takes(tmp_path, toy_session):
    study = Study(tmp_path / "study.db")
    study.server.stop()
    study.server = CollectorServer(study.ledger, ("127.0.0.1", study.port), max_body=256 << 10)
    study.server.start()
    try:
        s = toy_session()
        for i in range(80):  # 80 rows of 8,000 characters, each 2 bytes in UTF-8 (12 escaped as \\uXXXX)
            s.note(f"{i} " + "é" * 8000)
        w = Witness(s.folder, study.client("ada"), retry_s=0.1)
        assert w.wait_current(30), w.words()
        assert study.ledger.head(s.id)["count"] == len((s.folder / "audit.jsonl").read_text().splitlines())
        statuses = [r["status"] for r in study.ledger.db.query("SELECT status FROM refusals")]
        assert 413 in statuses and set(statuses) <= {404, 413}  # (404: the new session's first head)
    finally:
        study.close()


def test_one_row_too_large_for_the_collector_is_said_as_such(tmp_path, toy_session):
    study = Study(tmp_path / "study.db")
    study.server.stop()
    study.server = CollectorServer(study.ledger, ("127.0.0.1", study.port), max_body=16 << 10)
    study.server.start()
    try:
        s = toy_session()
        s.note("x" * (100 << 10))
        w = Witness(s.folder, study.client("ada"), retry_s=0.1)
        assert not w.wait_current(3)
        assert "too large (413)" in w.words() and "unreachable" not in w.words()
    finally:
        study.close()


def test_while_the_collector_is_down_written_rows_do_not_each_start_a_connection(toy_session):
    attempts = []
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    stop = threading.Event()

    def refuse_all():  # a collector that accepts and hangs up at once: every try is counted
        listener.settimeout(0.05)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            attempts.append(1)
            conn.close()

    t = threading.Thread(target=refuse_all, daemon=True)
    t.start()
    try:
        s = toy_session()
        w = Witness(s.folder, Collector(f"http://127.0.0.1:{listener.getsockname()[1]}", "t", timeout=1),
                    retry_s=0.5).start(s.audit)
        time.sleep(0.3)  # the first try has failed: the witness is backing off
        before = len(attempts)
        for i in range(40):
            s.note(f"row {i}")
        written = 40
        time.sleep(0.2)
        assert len(attempts) - before < written // 4, (before, len(attempts))
        w._stop.set()
        w._poke.set()
    finally:
        stop.set()
        t.join(2)
        listener.close()
