"""Study mode: a real collector on loopback (HTTP, a real SQLite file), real toy sessions that
stream their rows to it, a collector stopped and restarted mid-session, and the consistent
rewrite of a finished session that local checks pass and the witness catches."""

from __future__ import annotations

import pytest

from rebench_tui.study.witness import Witness
from rebench_tui.trajectory.audit import read_entries
from tests.study_collector import Study


@pytest.fixture
def study(tmp_path, fake_clock):
    s = Study(tmp_path / "study.db", now=fake_clock.time)
    yield s
    s.close()


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

    before = len(local_hashes(s))
    study.stop()  # the collector goes away mid-session
    fake_clock.advance(60)
    answer(s, "4")
    s.score()
    s.note("written while the collector was down")
    assert not w.wait_current(0.5)
    state = w.state()
    assert not state.current and "unreachable" in w.words() and "kept" in w.words()

    fake_clock.advance(300)
    study.restart()  # the same database, the same port: the witness catches up by itself
    assert w.wait_current(10), w.words()
    from rebench_tui.study.summary import summarize

    (seen,) = summarize(study.ledger, now=fake_clock.time)
    down = len(local_hashes(s)) - before  # the scoring's start and result, and the note: written while nobody witnessed them
    assert down == 3 and seen["gaps"] == down and seen["longest_gap_s"] == pytest.approx(300, abs=1)
    rows = study.client("res").rows(s.id)
    assert [r["hash"] for r in rows] == local_hashes(s)
    assert [r["n"] for r in rows] == list(range(len(rows)))
    assert any(r["kind"] == "intermediateScore" for r in rows)
    w.stop(1)


def test_the_consistent_rewrite_passes_verify_and_fails_the_witness(study, toy_session, fake_clock):
    from rebench_tui.study.check import check_witnessed
    from rebench_tui.trajectory.verify import verify
    from tests.study_rewrite import rewrite_score

    s = toy_session()
    w = Witness(s.folder, study.client("ada"), retry_s=0.1).start(s.audit)
    fake_clock.advance(600)
    answer(s, "4")
    s.submit("done")
    s.close(pause_clock=None)
    assert w.stop(10).current
    assert check_witnessed(s.folder, study.client("ada")).ok

    first = rewrite_score(s.folder, 4.0, 1.5)
    assert verify(s.folder).ok, [str(f) for f in verify(s.folder).findings if not f.ok]  # local checks cannot tell
    report = check_witnessed(s.folder, study.client("res"))
    bad = [f for f in report.findings if not f.ok]
    assert len(bad) == 1 and bad[0].line == first
    assert "witnessed score 4" in bad[0].detail and "here score 1.5" in bad[0].detail


def test_a_hidden_environments_counting_score_stays_hidden(study, toy_session, env_copy):
    from rebench_tui.study.summary import summarize
    from tests.conftest import FIXTURE_ENVS

    def hide(folder):
        toml = folder / "environment.toml"
        toml.write_text(toml.read_text().replace('direction = "lower"', 'direction = "lower"\nvisibility = "hidden"'))

    s = toy_session(env_copy(FIXTURE_ENVS / "toy_score", hide))
    assert s.hidden
    w = Witness(s.folder, study.client("ada"), retry_s=0.1).start(s.audit)
    s.score()
    assert w.wait_current(10)
    (seen,) = summarize(study.ledger)
    assert seen["scorings"] == 1 and seen["counting"] == "hidden"
    assert study.ledger.scorings(s.id)[0]["score"] == 10  # the researcher's database keeps the value
    w.stop(1)


def test_a_collector_down_at_start_is_a_note_not_a_refusal(tmp_path):
    import socket

    from rebench_tui.study.attach import check_participant
    from rebench_tui.study.client import Collector

    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    note = check_participant(Collector(f"http://127.0.0.1:{port}", "t", timeout=1), "ada")
    assert "does not answer now" in note and "sent once it does" in note


def test_a_log_cut_below_what_was_witnessed_is_never_called_current(study, toy_session):
    s = toy_session()
    s.note("one more row")
    w = Witness(s.folder, study.client("ada"), retry_s=0.1)
    assert w.wait_current(10)
    log = s.folder / "audit.jsonl"
    log.write_text("".join(log.read_text().splitlines(keepends=True)[:1]))  # rows removed by hand
    w2 = Witness(s.folder, study.client("ada"), retry_s=0.1)  # the session opened again
    assert not w2.wait_current(0.5)
    assert "rows were removed" in w2.words() and not w2.state().current
