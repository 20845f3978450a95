"""The researcher's commands survive bad records: a session whose start row has the wrong types is
left out of `study status` and `compare --study` with a warning (the rest of the study is still
shown), and `verify --witness` on a folder whose session.json is missing or not JSON says why in
one line and goes on to the next session."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from rebench_tui.cli import main
from rebench_tui.config import Settings
from rebench_tui.study.attach import bind, witness_session
from rebench_tui.trajectory.audit import chain_line, genesis_hash
from tests.study_collector import Study
from tests.unit.test_study_cli import as_

GOOD_START = {"event": "session_started", "env": "toy_score", "profile": "smoke", "time_limit_s": 3600,
              "score": {"direction": "higher", "aggregation": "max"}, "anchors": {"start": 0.0, "reference": 1.0}}


@pytest.fixture
def study(tmp_path, fake_clock):
    s = Study(tmp_path / "study.db", now=fake_clock.time)
    yield s
    s.close()


def start_lines(run_id, facts):
    row = {"runId": run_id, "index": 1, "agentBranchNumber": 0, "calledAt": 1000, "modifiedAt": 1000,
           "usageTotalSeconds": 0, "workingMs": 0, "content": {"type": "log", "content": ["session started", facts]}}
    line, _ = chain_line(row, genesis_hash(run_id))
    return [line.rstrip("\n")]


def plant(ledger, sid, who, lines, run_id):
    """Rows as a collector from before the start row's types were checked took them."""
    from rebench_tui.study.ledger import _fields

    with ledger.db.conn:
        ledger.db.execute("INSERT INTO sessions (id, participant, run_id, env_id, created_at) VALUES (?, ?, ?, ?, ?)",
                          [sid, who, run_id, "toy_score", 0])
        for n, line in enumerate(lines):
            ledger._insert(sid, n, _fields(json.loads(line), line, n), 0)


def witnessed_good_session(study, toy_session):
    s = toy_session()
    bind(s, study.url, "ada")
    w = witness_session(s, Settings(study_token=study.tokens["ada"]))
    (s.workspace / "solution" / "answer.txt").write_text("4")
    s.score()
    s.submit("done")
    assert w.wait_current(10), w.words()
    w.stop(1)
    return s


def test_a_start_row_of_the_wrong_type_is_left_out_of_the_studys_views_with_a_warning(study, toy_session, tmp_path):
    good = witnessed_good_session(study, toy_session)
    plant(study.ledger, "bad-limit", "bob", start_lines(11, {**GOOD_START, "time_limit_s": "eight hours"}), 11)
    plant(study.ledger, "bad-direction", "bob",
          start_lines(12, {**GOOD_START, "score": {"direction": "sideways", "aggregation": "max"}}), 12)
    env = as_(study, "res", tmp_path)
    r = CliRunner().invoke(main, ["study", "status", study.url], env=env, terminal_width=250)
    assert r.exit_code == 0, r.output
    assert good.id in r.output and "Traceback" not in r.output
    assert "bad-limit left out" in r.output and "time_limit_s" in r.output
    assert "bad-direction left out" in r.output and "direction" in r.output

    r = CliRunner().invoke(main, ["compare", "--study", study.url, "--no-humans", "--bootstrap", "0", "--csv",
                                  "-o", str(tmp_path / "report")], env=env, terminal_width=250)
    assert r.exit_code == 0, r.output
    assert "bad-limit left out" in r.output and "bad-direction left out" in r.output and "sideways" in r.output
    assert good.id in (tmp_path / "report" / "runs.csv").read_text()


@pytest.mark.parametrize("damage", ["missing", "not json"])
def test_verify_witness_says_why_in_one_line_and_goes_on(study, toy_session, tmp_path, damage):
    first, second = witnessed_good_session(study, toy_session), witnessed_good_session(study, toy_session)
    meta = first.folder / "session.json"
    if damage == "missing":
        meta.unlink()
    else:
        meta.write_text("{not json")
    env = as_(study, "ada", tmp_path)
    r = CliRunner().invoke(main, ["verify", "--witness", study.url, "--sessions-dir", str(first.folder.parent)],
                           env=env, terminal_width=250)
    assert r.exit_code == 1 and "Traceback" not in r.output, r.output
    assert "1 of 2 session(s) verified" in r.output
    said = [line for line in r.output.splitlines() if "FAIL witness" in line]
    assert said and "session.json" in said[0], r.output
    # the damaged folder's rows were still compared (under its name), and the next session's
    assert r.output.count(f"rows are the ones {study.url} witnessed") == 2, r.output


def test_a_participant_reading_a_made_up_session_is_answered_as_for_anothers(study, toy_session):
    good = witnessed_good_session(study, toy_session)
    bob = study.client("bob")
    answers = []
    for sid in (good.id, "no-such-session"):
        try:
            bob.request("GET", f"/v1/sessions/{sid}/rows")
        except Exception as exc:  # noqa: BLE001 - the refusal is what is compared
            answers.append((exc.status, exc.what.replace(sid, "ID")))
    assert answers[0] == answers[1] and answers[0][0] == 404
    assert json.loads(json.dumps(answers))  # plain words, nothing else
