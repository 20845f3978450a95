"""Hostile inputs against the records, part of the hostile-input suite: a finished
session stays finished, a damaged session.json, score log or index gets the one-line error (what
was kept, what to do next) in every command, the working time is bounded, and every row's time is
when its fact was seen. Each case failed on the code before these tests; the OOM kill inside a
container is in tests/integration/test_hostile_records_docker.py."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from rebench_tui.cli import main
from rebench_tui.clock import SystemClock
from rebench_tui.errors import RebenchError, SessionError
from rebench_tui.runtime.local import LocalRuntime
from rebench_tui.session import Session, SessionMeta
from rebench_tui.store import Store
from rebench_tui.trajectory.audit import chain_line, read_entries
from rebench_tui.trajectory.entries import log
from rebench_tui.trajectory.verify import verify
from tests.conftest import FIXTURE_ENVS


@pytest.fixture(autouse=True)
def fixture_environments(monkeypatch):
    monkeypatch.setenv("REBENCH_ENVIRONMENTS_DIR", str(FIXTURE_ENVS))


def cli(*argv: str, sessions: Path):
    r = CliRunner().invoke(main, [*argv, "--sessions-dir", str(sessions)], env={"COLUMNS": "250"})
    # a crash shows as an exception other than SystemExit: our errors exit with a status of their own
    assert r.exception is None or isinstance(r.exception, SystemExit), (argv, r.output, r.exception)
    assert "Traceback" not in r.output, r.output
    return r


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file of a session folder, by path: what a command must leave as it was."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def failing(report) -> list[str]:
    return [str(f) for f in report.findings if not f.ok]


@pytest.fixture
def finished(toy_session, fake_clock):
    s = toy_session()
    for answer in ("8", "5", "6", "7"):
        (s.workspace / "solution" / "answer.txt").write_text(answer)
        fake_clock.advance(60)
        s.score()
    s.submit("final")
    s.close()
    s.store.close()
    return s


@pytest.fixture
def active(toy_session, fake_clock):
    s = toy_session()
    (s.workspace / "solution" / "answer.txt").write_text("4")
    fake_clock.advance(60)
    s.score()
    s.close()
    s.store.close()
    return s


# -- 1. finished is a fact of the record, not a word in a file ---------------------------------------
def test_session_json_edited_from_finished_to_active_fails_verify_and_takes_no_scoring(finished):
    s = finished
    meta = json.loads((s.folder / "session.json").read_text())
    meta["status"] = "active"
    (s.folder / "session.json").write_text(json.dumps(meta, indent=2))
    report = verify(s.folder)
    assert not report.ok and any("session state" in f and "session.json says active" in f for f in failing(report))
    before = snapshot(s.folder)
    r = cli("score", s.id, sessions=s.folder.parent)
    assert r.exit_code == 1 and "is finished" in r.output and "next:" in r.output, r.output
    assert snapshot(s.folder) == before  # no fifth scoring, no row, no lock left behind
    assert not verify(s.folder).ok  # still says so
    r = cli("repair", s.id, sessions=s.folder.parent)
    assert r.exit_code == 0 and "session.json: rebuilt from the audit log" in r.output, r.output
    assert verify(s.folder).ok, failing(verify(s.folder))
    assert SessionMeta.load(s.folder / "session.json").status == "finished"


@pytest.mark.parametrize("command", ["score", "finish"])
def test_a_command_on_a_finished_session_writes_nothing(finished, command):
    s = finished
    before = snapshot(s.folder)
    r = cli(command, s.id, sessions=s.folder.parent)
    if command == "score":
        assert r.exit_code == 1 and "is finished" in r.output and "next:" in r.output, r.output
    else:
        assert r.exit_code == 0 and "already finished" in r.output, r.output
    assert snapshot(s.folder) == before  # not even a "session resumed" row after the finish
    assert verify(s.folder).ok


def test_opening_a_finished_session_is_refused_before_anything_is_written(finished, fixture_catalog):
    s = finished
    before = snapshot(s.folder)
    with pytest.raises(SessionError, match="is finished"):
        Session.open(s.folder, fixture_catalog.get("toy_score"), LocalRuntime())
    assert snapshot(s.folder) == before


def test_the_core_refuses_every_write_once_the_finish_row_is_there(toy_session, fake_clock):
    s = toy_session()
    s.submit("done")
    before = snapshot(s.folder)
    del before["lock"]  # held by this process until it closes the session
    with pytest.raises(RebenchError, match="finished"):
        s.note("after the finish")
    with pytest.raises(RebenchError, match="finished"):
        s.score()
    with pytest.raises(RebenchError, match="finished"):
        s.ending.shell_opened(["bash"])
    with pytest.raises(RebenchError, match="finished"):
        s.audit.append(log("a row from anywhere"))
    assert s.pause() is False and s.resume() is False
    s.close()
    assert snapshot(s.folder) == before
    assert verify(s.folder).ok


def test_a_row_after_the_finish_fails_verify_on_its_line(finished):
    s = finished
    path = s.folder / "audit.jsonl"
    rows = read_entries(path)
    last = rows[-1]
    extra = {k: last[k] for k in ("runId", "agentBranchNumber", "calledAt", "modifiedAt", "usageTotalSeconds")}
    extra.update(index=12345, content=log("session resumed on a laptop", {"event": "session_resumed"}, title="session"))
    line, _digest = chain_line(extra, last["hash"])
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(line)  # a well-chained row: only the rule "nothing after the finish" can catch it
    report = verify(s.folder)
    assert not report.ok
    (finding,) = [f for f in report.findings if f.check == "rows after the finish"]
    assert finding.line == len(rows) + 1 and "1 row(s) follow the finish row" in finding.detail


# -- 2. a damaged session.json, score log or index: one line, kept, next -------------------------------
DAMAGES = {
    "truncated JSON": lambda p: p.write_text("{"),
    "missing": lambda p: p.unlink(),
    "a list": lambda p: p.write_text("[]"),
    "wrong types": lambda p: p.write_text('{"id": 3}'),
    "binary": lambda p: p.write_bytes(b"\xff\xfe\x00\x01"),
    "a folder": lambda p: (p.unlink(), p.mkdir()),
}


def one_line_error(r, *, exit_code: int = 1) -> None:
    assert r.exit_code == exit_code, r.output
    assert "error:" in r.output and "next:" in r.output and "rebench-tui repair" in r.output, r.output


@pytest.mark.parametrize("damage", list(DAMAGES), ids=list(DAMAGES))
def test_a_damaged_session_json_gives_one_line_in_every_command(active, finished, damage, tmp_path):
    s, good = active, finished
    sessions = s.folder.parent
    DAMAGES[damage](s.folder / "session.json")
    for argv in (["resume", s.id], ["score", s.id], ["finish", s.id], ["stop", s.id]):
        one_line_error(cli(*argv, sessions=sessions))
    r = cli("verify", s.id, sessions=sessions)
    assert r.exit_code == 1 and "FAIL session.json" in r.output and "rebench-tui repair" in r.output, r.output
    r = cli("verify", sessions=sessions)  # every session: the damaged one is reported, the others checked
    assert r.exit_code == 1 and f"{good.id}: verified" in r.output and f"{s.id}: FAILED" in r.output, r.output
    r = cli("sessions", sessions=sessions)
    assert r.exit_code == 0 and "DAMAGED" in r.output and f"rebench-tui repair {s.id}" in r.output, r.output
    r = cli("export", s.id, "--format", "csv", "-o", str(tmp_path / "out"), sessions=sessions)
    assert r.exit_code == 1 and "FAILED" in r.output and "rebench-tui repair" in r.output, r.output
    r = cli("compare", "-o", str(tmp_path / "report"), "--csv", sessions=sessions)  # the good one compared, this one said
    assert r.exit_code == 0 and f"skipped {s.folder}" in r.output and "rebench-tui repair" in r.output, r.output
    r = cli("repair", s.id, sessions=sessions)
    assert r.exit_code == 0 and "session.json: rebuilt from the audit log" in r.output, r.output
    assert verify(s.folder).ok, failing(verify(s.folder))
    meta = SessionMeta.load(s.folder / "session.json")
    assert meta.status == "active" and meta.run_id == read_entries(s.folder / "audit.jsonl")[0]["runId"]
    assert meta.task_id == "rebench_toy_score/main" and meta.clock.limit_s == 3600 and meta.start_score == 10.0


def test_repair_gives_back_the_session_json_the_session_wrote(finished):
    s = finished
    original = SessionMeta.load(s.folder / "session.json")
    (s.folder / "session.json").write_text("{")
    r = cli("repair", s.id, sessions=s.folder.parent)
    assert r.exit_code == 0, r.output
    rebuilt = SessionMeta.load(s.folder / "session.json")
    same = ("id", "run_id", "env_id", "task_id", "task_version", "title", "profile", "runtime", "host", "isolated",
            "status", "finish_reason", "completed_at", "pauses", "warnings_given", "direction", "aggregation",
            "visibility", "start_score", "reference_score", "anchors", "setting", "score_timeout_s", "submission",
            "final_score", "final_attempt", "final_scorings")
    assert {k: getattr(rebuilt, k) for k in same} == {k: getattr(original, k) for k in same}
    assert rebuilt.clock.limit_s == original.clock.limit_s and rebuilt.clock.running_since_wall is None
    assert rebuilt.clock.banked_s == pytest.approx(original.clock.banked_s, abs=0.001)
    assert verify(s.folder).ok


SCORE_LOG_DAMAGES = {
    "missing": lambda p: p.unlink(),
    "binary": lambda p: p.write_bytes(b"\xff\xfe\x00garbage"),
    "a row cut": lambda p: p.write_text("".join(p.read_text().splitlines(True)[:-1])),
    "empty": lambda p: p.write_text(""),
}


@pytest.mark.parametrize("damage", list(SCORE_LOG_DAMAGES), ids=list(SCORE_LOG_DAMAGES))
def test_a_damaged_score_log_is_said_and_rebuilt(active, damage):
    s = active
    DAMAGE = SCORE_LOG_DAMAGES[damage]
    DAMAGE(s.folder / "score_log.csv")
    r = cli("verify", s.id, sessions=s.folder.parent)
    assert r.exit_code == 1 and "FAIL score log" in r.output, r.output
    before = snapshot(s.folder)
    one_line_error(cli("score", s.id, sessions=s.folder.parent))
    assert snapshot(s.folder) == before  # refused before anything was written
    r = cli("repair", s.id, sessions=s.folder.parent)
    assert r.exit_code == 0 and "score_log.csv: rebuilt from the audit log's 1 scoring row(s)" in r.output, r.output
    assert verify(s.folder).ok, failing(verify(s.folder))


def test_a_finished_sessions_rebuilt_score_log_is_the_one_its_finish_row_hashed(finished):
    s = finished
    (s.folder / "score_log.csv").unlink()
    r = cli("repair", s.id, sessions=s.folder.parent)
    assert r.exit_code == 0 and "byte for byte the file the finish row recorded" in r.output, r.output
    assert verify(s.folder).ok, failing(verify(s.folder))


def test_a_missing_index_is_rebuilt_and_said(active):
    s = active
    for name in ("index.db", "index.db-wal", "index.db-shm"):
        (s.folder.parent / name).unlink(missing_ok=True)
    r = cli("sessions", sessions=s.folder.parent)
    assert r.exit_code == 0 and s.id[:20] in r.output and "was missing" in r.output, r.output


# -- 3. the working time is bounded -------------------------------------------------------------------
@pytest.mark.parametrize("limit", ["99999h", "1e300", "169h", "604801"])
def test_a_working_time_above_seven_days_is_refused_before_anything_starts(limit, tmp_path, monkeypatch):
    opened = []
    monkeypatch.setattr("rebench_tui.cli.sessions._run_app", lambda session: (opened.append(session), session.close()))
    r = cli("start", "toy_score", "--runtime", "local", "--time-limit", limit, sessions=tmp_path / "sessions")
    assert r.exit_code == 2 and "7 days" in r.output and "next:" in r.output and "168h" in r.output, r.output
    assert not opened and not [p for p in (tmp_path / "sessions").glob("toy_score-*")]


def test_the_core_and_the_manifest_bound_the_working_time_too(fixture_catalog, tmp_path, env_copy):
    from rebench_tui.catalog import load_catalog
    from tests.conftest import KNOWN_IMAGES

    with pytest.raises(SessionError, match="7 days"):
        Session.create(fixture_catalog.get("toy_score"), "smoke", LocalRuntime(), tmp_path / "s", time_limit_s=1e300)
    assert not (tmp_path / "s").exists() or not list((tmp_path / "s").iterdir())
    root = env_copy(FIXTURE_ENVS / "toy_score", lambda d: (d / "environment.toml").write_text(
        (d / "environment.toml").read_text().replace('limit = "1h"', 'limit = "99999h"')))
    problems = [str(p) for p in load_catalog(root, KNOWN_IMAGES).problems]
    assert any("7 days" in p for p in problems), problems


# -- 4. every row's time is when its fact was seen ----------------------------------------------------
def _burst(session, n: int, clock) -> list[tuple[int, int, int]]:
    """Make ``n`` files at once under the file recorder (its child process); returns, per batch of
    rows the session wrote, (first row, last row, the clock's ms when the write had returned)."""
    audit = session.core.audit
    batches: list[tuple[int, int, int]] = []
    append_many = audit.append_many

    def timed(contents, **kw):
        first = audit.count
        out = append_many(contents, **kw)
        batches.append((first, audit.count, int(clock.time() * 1000)))
        return out

    audit.append_many = timed
    session.start_watching(interval=0.05)
    burst = session.workspace / "burst"
    burst.mkdir()
    for i in range(n):
        (burst / f"f{i:05d}.txt").write_text(str(i))
    assert session.watcher.flush(timeout=60)
    return batches


@pytest.mark.parametrize("clock_kind", ["fake", "real"])
def test_a_burst_of_files_is_never_stamped_after_it_was_written(toy_session, fake_clock, fixture_catalog, tmp_path,
                                                                  clock_kind):
    if clock_kind == "fake":
        s, clock = toy_session(), fake_clock
    else:
        clock = SystemClock()
        s = Session.create(fixture_catalog.get("toy_score"), "smoke", LocalRuntime(), tmp_path / "real",
                           clock=clock, store=Store(tmp_path / "real"))
    try:
        batches = _burst(s, 5000, clock)
        s.close()
    finally:
        s.lock.release()
    rows = read_entries(s.folder / "audit.jsonl")
    files = [(i, r) for i, r in enumerate(rows) if r["content"].get("attributes", {}).get("title") == "file"]
    assert len(files) >= 5000
    written_by = {}
    for first, last, at in batches:
        for i in range(first, last):
            written_by[i] = at
    late = [(i, r["calledAt"] - written_by[i]) for i, r in files if i in written_by and r["calledAt"] > written_by[i]]
    assert not late, f"{len(late)} rows stamped after they were written, up to {max(d for _i, d in late)} ms"
    assert all(r["calledAt"] <= r["modifiedAt"] for r in rows)
    assert all(isinstance(r["content"]["content"][1].get("mtime_ms"), int) for _i, r in files)
    assert verify(s.folder).ok, failing(verify(s.folder))


# -- 5. the recorder quits cleanly; a link is shown as a link ----------------------------------------
def test_the_file_recorder_child_quits_without_a_fatal_error(tmp_path):
    from rebench_tui.session.files import FileRecorder

    (tmp_path / "ws").mkdir()
    state = tmp_path / "state" / "files.json"
    for i in range(3):
        rec = FileRecorder(tmp_path / "ws", lambda changes, raw: None, state, interval=0.05)
        rec.start()
        (tmp_path / "ws" / f"f{i}").write_text("x")
        rec.flush()
        proc = rec._proc
        rec.stop()
        assert proc.returncode == 0
    log_text = (tmp_path / "state" / "file-recorder.log").read_text()
    assert "Fatal Python error" not in log_text, log_text


def test_a_link_is_recorded_and_shown_as_a_link(toy_session):
    s = toy_session()
    try:
        s.start_watching(interval=0.05)
        os.symlink("/protected", s.workspace / "prot_dir")
        assert s.watcher.flush(timeout=10)
        s.close()
    finally:
        s.lock.release()
    rows = [r["content"]["content"] for r in read_entries(s.folder / "audit.jsonl")
            if r["content"].get("attributes", {}).get("title") == "file"]
    (text, facts), = [row for row in rows if row[1]["path"] == "prot_dir"]
    assert text == "created link prot_dir → /protected", text
    assert facts["kind"] == "link" and facts["target"] == "/protected"


def test_the_closing_row_tells_a_closed_session_from_an_interrupted_one(toy_session, fake_clock):
    from rebench_tui.trajectory.state import read_chain_state

    s = toy_session()
    assert read_chain_state(s.folder).state == "active"  # open now, in this process
    s.close(pause_clock=None)
    assert read_chain_state(s.folder).state == "active"
    t = toy_session()
    t.lock.path.write_text(json.dumps({"pid": 999999999, "host": socket.gethostname(), "since": time.time()}))
    t.lock.held = False  # the app was killed: its lock stays, no closing row
    state = read_chain_state(t.folder)
    assert state.state == "interrupted" and "never closed" in state.detail
    assert verify(t.folder).ok  # an interrupted session is not a damaged one
    (t.folder / "lock").unlink()
