"""Sessions on the local runtime with an injected clock: records, clock, lock, finish."""

import csv
import json
import math
import threading

import pytest

from rebench_tui.clock import FakeClock
from rebench_tui.errors import SessionError
from rebench_tui.runtime.local import LocalRuntime
from rebench_tui.session import Session, SessionMeta
from rebench_tui.session.events import ScoreRecorded, SessionFinished
from rebench_tui.session.session import ScoringBusy
from rebench_tui.trajectory.audit import read_entries, validate_file
from rebench_tui.trajectory.entries import log_event
from tests.conftest import FIXTURE_ENVS


@pytest.fixture
def toy(fixture_catalog):
    return fixture_catalog.get("toy_score")


@pytest.fixture
def make_session(toy_session):
    return toy_session


def answer(s, text):
    (s.workspace / "solution" / "answer.txt").write_text(text)


def types(s):
    return [r["content"]["type"] for r in read_entries(s.folder / "audit.jsonl")]


def test_create_lays_out_the_folder_and_records_the_start(make_session, toy):
    s = make_session()
    assert (s.workspace / "solution" / "answer.txt").read_text().strip() == "10"
    assert (s.workspace / "instructions.txt").read_text() == toy.instructions
    meta = SessionMeta.load(s.folder / "session.json")
    assert meta.env_id == "toy_score" and meta.task_id == "rebench_toy_score/main" and meta.runtime == "local"
    assert meta.isolated is False and meta.clock.limit_s == 3600
    rows = read_entries(s.folder / "audit.jsonl")
    assert "NOT ISOLATED" in rows[0]["content"]["content"][0]
    assert list(csv.reader(open(s.folder / "score_log.csv"))) == [["timestamp", "score", "message", "details"]]


def test_scores_are_recorded_everywhere_before_they_are_returned(make_session, fake_clock):
    s = make_session()
    heard = []
    s.subscribe(heard.append)
    fake_clock.advance(600)
    r1 = s.score()
    assert r1.score == 10 and r1.normalized == 0 and r1.working_s == pytest.approx(600)
    answer(s, "4")
    fake_clock.advance(600)
    r2 = s.score()
    assert r2.score == 4 and r2.normalized == pytest.approx(0.75)
    answer(s, "not a number")
    r3 = s.score()
    assert math.isnan(r3.score) and "not a number" in r3.message["error"]
    assert s.final().representative == 2 and s.final().n == 1  # three attempts; the second counts
    assert sum(isinstance(ev, ScoreRecorded) for ev in heard) == 3
    rows = [r for r in read_entries(s.folder / "audit.jsonl") if r["content"]["type"] == "intermediateScore"]
    assert [r["content"]["score"] for r in rows] == [10.0, 4.0, "NaN"]
    assert rows[1]["usageTotalSeconds"] == 1200
    log = list(csv.DictReader(open(s.folder / "score_log.csv")))
    assert [row["score"] for row in log] == ["10.0", "4.0", "nan"]
    assert json.loads(log[2]["message"])["error"].startswith("not a number")
    assert [x["attempt"] for x in s.store.scores(s.id)] == [1, 2, 3]
    assert s.store.get(s.id)["final_score"] == 4
    assert validate_file(s.folder / "audit.jsonl") == []


@pytest.mark.parametrize("text, key", [pytest.param("sleep", "timeout", marks=pytest.mark.slow),  # waits the 5 s timeout
                                       ("garbage", "error"), ("crash", "error"), ("nan", "error")])
def test_scorer_failures_are_nan_with_a_reason(make_session, text, key):
    s = make_session()
    answer(s, text)
    r = s.score()
    assert math.isnan(r.score) and key in r.message
    if text == "sleep":
        assert r.message == {"timeout": True} and r.details["timeout_s"] == 5


def test_huge_scorer_output_still_parses(make_session):
    s = make_session()
    answer(s, "huge")
    r = s.score()
    assert r.score == 1.5 and len(r.details["stdout_tail"]) < 5000


def test_second_scoring_while_one_runs_is_refused(make_session):
    import threading

    s = make_session()
    answer(s, "sleep")
    cancel = threading.Event()
    t = threading.Thread(target=s.score, kwargs={"cancel": cancel})
    t.start()
    while not s.scoring:
        pass
    with pytest.raises(ScoringBusy):
        s.score()
    cancel.set()  # the first one has done its part: no need to wait for its timeout
    t.join()


def test_cancelled_scoring_is_recorded_as_cancelled(make_session):
    import threading

    s = make_session()
    answer(s, "sleep")
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    assert s.score(cancel=cancel) is None
    rows = read_entries(s.folder / "audit.jsonl")
    assert rows[-1]["content"]["content"][1]["event"] == "score_cancelled"
    assert s.history == []


def test_pause_excludes_time_and_writes_vivaria_pause_rows(make_session, fake_clock):
    s = make_session()
    fake_clock.advance(100)
    assert s.pause()
    fake_clock.advance(1000)
    assert s.resume()
    fake_clock.advance(50)
    r = s.score()
    assert r.working_s == pytest.approx(150)
    meta = SessionMeta.load(s.folder / "session.json")
    (p,) = meta.pauses
    assert p.reason == "pauseHook" and p.end - p.start == 1_000_000


def test_reopen_continues_the_clock_and_history(make_session, toy, tmp_path, fake_clock):
    s = make_session()
    fake_clock.advance(300)
    s.score()
    s.close(pause_clock=False)
    fake_clock.advance(120)  # app closed, clock running by the participant's choice
    again = Session.open(s.folder, toy, LocalRuntime(), clock=fake_clock)
    try:
        assert again.wclock.used() == pytest.approx(420)
        assert [h.score for h in again.history] == [10.0]
        assert again.wclock.running
    finally:
        again.close(pause_clock=True)
    fake_clock.advance(5000)
    third = Session.open(s.folder, toy, LocalRuntime(), clock=fake_clock)
    try:
        assert third.wclock.used() == pytest.approx(420)  # paused on close: nothing added
    finally:
        third.lock.release()
    assert validate_file(s.folder / "audit.jsonl") == []


def test_second_app_on_the_same_session_is_refused(make_session, toy, fake_clock):
    import os
    import subprocess
    import sys

    s = make_session()
    with pytest.raises(SessionError) as exc:
        Session.open(s.folder, toy, LocalRuntime(), clock=fake_clock)
    assert f"PID {os.getpid()}" in str(exc.value)
    s.close()
    # another process holds it now: refused with that process's PID; released when it exits
    code = ("import sys, time; from pathlib import Path; from rebench_tui.session import Session; "
            "from rebench_tui.catalog import load_catalog; from rebench_tui.runtime.local import LocalRuntime; "
            "env = load_catalog(Path(sys.argv[2])).get('toy_score'); "
            "s = Session.open(Path(sys.argv[1]), env, LocalRuntime()); print('open', flush=True); time.sleep(30)")
    from tests.conftest import FIXTURE_ENVS

    proc = subprocess.Popen([sys.executable, "-c", code, str(s.folder), str(FIXTURE_ENVS)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "open"
        with pytest.raises(SessionError) as exc:
            Session.open(s.folder, toy, LocalRuntime(), clock=fake_clock)
        assert f"PID {proc.pid}" in str(exc.value)
    finally:
        proc.kill()
        proc.wait()
    again = Session.open(s.folder, toy, LocalRuntime(), clock=fake_clock)  # a dead holder's lock is taken over
    again.close()


def test_warnings_then_time_limit_takes_the_final_score(make_session, fake_clock):
    s = make_session(time_limit_s=3 * 3600)
    heard = []
    s.subscribe(heard.append)
    fake_clock.advance(3600 + 1)
    assert s.tick() == [7200]
    assert s.tick() == []
    fake_clock.advance(2 * 3600 - 60)
    assert sorted(s.tick()) == [300, 900, 3600]
    assert not s.time_is_up
    answer(s, "3")
    fake_clock.advance(120)
    assert s.time_is_up
    rec = s.finish_at_time_limit()
    assert rec.score == 3 and rec.working_s == pytest.approx(3 * 3600)
    assert s.finished and s.meta.final_score == 3 and s.meta.finish_reason == "time_limit"
    assert any(isinstance(ev, SessionFinished) and ev.reason == "time_limit" for ev in heard)
    with pytest.raises(SessionError):
        s.score()
    assert types(s)[-1] == "log"


def test_a_time_warning_and_the_finish_at_the_same_moment_both_land_the_finish_last(make_session, fake_clock):
    """Time up while a warning is being written (the app's clock tick and its final scoring are two
    threads): the finish waits for the warning's row, so the log ends with the finish row and the
    tick does not fail on a closed record."""
    s = make_session(time_limit_s=600)
    s.sandbox.is_running = lambda: False  # no final scoring: the finish comes at once
    audit = s.core.audit
    real_append, in_tick, finished, errors = audit.append, threading.Event(), threading.Event(), []

    def slow_append(row, *a, **k):
        if (log_event(row) or {}).get("event") == "time_warning":
            in_tick.set()
            finished.wait(2)  # give the finish the chance to go first (the old code let it)
        return real_append(row, *a, **k)

    audit.append = slow_append
    fake_clock.advance(601)

    def tick():
        try:
            s.tick()
        except Exception as exc:  # noqa: BLE001 - the failure is the finding
            errors.append(exc)

    ticker = threading.Thread(target=tick)
    ticker.start()
    assert in_tick.wait(5)
    s.finish_at_time_limit()
    finished.set()
    ticker.join(10)
    assert errors == [] and s.finished
    rows = read_entries(s.folder / "audit.jsonl")
    events_in_order = [(log_event(r["content"]) or {}).get("event") for r in rows]
    assert events_in_order[-1] == "session_finished" and "time_warning" in events_in_order[:-1]


def test_submit_scores_once_more_and_finishes(make_session):
    s = make_session()
    answer(s, "5")
    s.score()
    answer(s, "7")
    rec = s.submit("my answer")
    assert rec.score == 7
    assert s.final().score == 5  # min rule: the best valid score counts, not the last
    t = types(s)
    assert t[-3:] == ["intermediateScore", "submission", "log"]
    with pytest.raises(SessionError):
        s.submit("again")


def test_notes(make_session):
    s = make_session()
    s.note("  trying a two-pass scan  ")
    s.note("   ")
    rows = read_entries(s.folder / "audit.jsonl")
    notes = [r for r in rows if r["content"].get("attributes", {}).get("title") == "note"]
    assert len(notes) == 1 and notes[0]["content"]["content"][1] == {"event": "note", "note": "trying a two-pass scan"}


def test_protected_folder_is_copied_for_the_local_runtime(make_session):
    s = make_session()
    r = s.score()
    assert r.details["secret_ok"] is True


# -- re-scores of unchanged files -------------------------------------------------------------------

DRAWS = (-1.462, -1.663, -1.628)  # one unchanged solution scored three times in a row (the reported case)


def noisy_env(env_copy, counter, draws=DRAWS):
    """The toy environment with a scorer whose answer ``noisy`` scores the next of ``draws``, in
    turn: a timing score's noise on files that do not change."""

    def edit(d):
        score = d / "protected" / "score.py"
        text = score.read_text()
        anchor = 'secret_ok = open(os.path.join(protected, "secret.txt")).read().startswith("held-out")\n'
        draw = (f'if answer == "noisy":\n'
                f'    _n = int(open({str(counter)!r}).read()) if os.path.exists({str(counter)!r}) else 0\n'
                f'    open({str(counter)!r}, "w").write(str(_n + 1))\n'
                f'    answer = repr({tuple(draws)!r}[_n % {len(draws)}])\n')
        assert anchor in text
        score.write_text(text.replace(anchor, anchor + draw))

    return env_copy(FIXTURE_ENVS / "toy_score", edit)


def test_rescores_share_a_fingerprint_and_the_final_score_is_their_median(make_session, env_copy, tmp_path, fake_clock):
    from rebench_tui.session.reindex import index_rows
    from rebench_tui.trajectory.verify import verify

    s = make_session(noisy_env(env_copy, tmp_path / "draws"))
    answer(s, "noisy")
    records = [s.score() for _ in range(3)]
    assert [r.score for r in records] == list(DRAWS)
    assert len({r.fingerprint for r in records}) == 1 and records[0].n_files >= 2
    assert records[0].details["attempt"] == {"fingerprint": records[0].fingerprint, "n_files": records[0].n_files,
                                             "source": "snapshot", "bytes": records[0].details["attempt"]["bytes"]}
    best = s.final()
    assert (best.score, best.n, best.scorings, best.representative) == (-1.628, 3, (1, 2, 3), 3)
    assert (best.low, best.high) == (-1.663, -1.462)
    assert s.store.get(s.id)["final_score"] == -1.628  # not the luckiest draw, -1.663
    assert [x["fingerprint"] for x in s.store.scores(s.id)] == [records[0].fingerprint] * 3

    fake_clock.advance(60)
    s.finish("submitted")
    assert s.meta.final_score == -1.628 and s.meta.final_attempt == 3 and s.meta.final_scorings == [1, 2, 3]
    finish = [r for r in read_entries(s.folder / "audit.jsonl") if r["content"]["type"] == "log"][-1]["content"]["content"]
    assert "median of 3 scorings" in finish[0] and finish[1]["final_scorings"] == [1, 2, 3]
    s.close()
    report = verify(s.folder)
    assert report.ok, [str(f) for f in report.findings]
    (session_row, score_rows), = list(index_rows(s.folder.parent))
    assert session_row["final_score"] == -1.628 and [r["fingerprint"] for r in score_rows] == [records[0].fingerprint] * 3

    # a session.json that claims the luckiest draw is found
    meta = json.loads((s.folder / "session.json").read_text())
    (s.folder / "session.json").write_text(json.dumps({**meta, "final_score": -1.663}))
    bad = [f for f in verify(s.folder).findings if not f.ok]
    assert [f.check for f in bad] == ["final score"] and "median of attempt 1's 3 scorings" in bad[0].detail


def test_a_changed_file_is_a_new_attempt_and_changed_back_rejoins_the_old_one(make_session):
    s = make_session()
    a = s.score()
    answer(s, "4")
    b = s.score()
    (s.workspace / "notes.md").write_text("not in solution/, still part of the attempt\n")
    c = s.score()
    (s.workspace / "notes.md").unlink()
    answer(s, "10\n")
    d = s.score()  # the starting files again, byte for byte
    assert a.fingerprint != b.fingerprint != c.fingerprint and d.fingerprint == a.fingerprint
    assert c.n_files == a.n_files + 1
    assert [x.number for x in s.attempts()] == [1, 2, 3] and s.attempts()[0].indexes == (0, 3)
    assert s.final().score == 4 and s.final().representative == 2


def test_reopened_sessions_keep_grouping_re_scores(make_session, toy, env_copy, tmp_path, fake_clock):
    from rebench_tui.catalog import load_catalog
    from tests.conftest import KNOWN_IMAGES

    root = noisy_env(env_copy, tmp_path / "draws")
    s = make_session(root)
    answer(s, "noisy")
    s.score()
    s.score()
    s.close()
    env = load_catalog(root, KNOWN_IMAGES).get("toy_score")
    again = Session.open(s.folder, env, LocalRuntime(), clock=fake_clock)
    try:
        assert [r.fingerprint for r in again.history] == [s.history[0].fingerprint] * 2
        again.score()
        assert again.final().score == -1.628 and again.final().n == 3
    finally:
        again.close()


def test_the_time_limit_holds_without_the_screen(make_session, fake_clock):
    """After zero a plain scoring is refused in the core (the refusal is recorded); the final one still runs."""
    s = make_session(time_limit_s=600)
    answer(s, "6")
    fake_clock.advance(601)
    assert s.time_is_up
    with pytest.raises(SessionError) as err:
        s.score()
    assert "working time of 0:10:00 is up" in str(err.value) and f"rebench-tui resume {s.id}" in err.value.fix
    row = read_entries(s.folder / "audit.jsonl")[-1]["content"]
    assert row["type"] == "log" and '"reason": "time_limit"' in json.dumps(row) and "score_refused" in json.dumps(row)
    assert "intermediateScore" not in types(s)
    rec = s.finish_at_time_limit()
    assert rec.score == 6 and rec.working_s == pytest.approx(600)
    assert s.finished and s.meta.final_score == 6


def test_rebench_tui_score_after_the_deadline_is_refused(make_session, monkeypatch):
    """The command line obeys the same rule: a session whose clock ran out while closed cannot be scored."""
    from click.testing import CliRunner

    from rebench_tui.cli import main

    s = make_session(time_limit_s=600)
    answer(s, "2")
    s.close(pause_clock=False)  # left running; the fake clock's wall time is long past, so zero has passed
    monkeypatch.setenv("REBENCH_ENVIRONMENTS_DIR", str(FIXTURE_ENVS))
    r = CliRunner().invoke(main, ["score", s.id, "--sessions-dir", str(s.folder.parent)])
    assert r.exit_code != 0
    assert "working time of 0:10:00 is up" in r.output and "rebench-tui finish" in r.output
    assert "intermediateScore" not in types(s)
    # ...and the fix it names works without the screen: the final scoring runs, then the finish.
    r = CliRunner().invoke(main, ["finish", s.id, "--sessions-dir", str(s.folder.parent)])
    assert r.exit_code == 0, r.output
    assert "finished (time_limit) after final scoring 1; final score 2" in r.output
    meta = SessionMeta.load(s.folder / "session.json")
    assert meta.status == "finished" and meta.finish_reason == "time_limit" and meta.final_score == 2
    assert types(s).count("intermediateScore") == 1
    r = CliRunner().invoke(main, ["finish", s.id, "--sessions-dir", str(s.folder.parent)])
    assert r.exit_code == 0 and "already finished" in r.output


@pytest.mark.parametrize("how", ["submit", "time_limit"])
def test_a_final_scoring_that_fails_still_finishes_the_session(make_session, fake_clock, monkeypatch, how):
    """Finishing is the core's rule, not the screen's: the last scoring failing (here a full disk while
    writing its start row) still leaves a finished session, and the error reaches the caller."""
    import errno

    s = make_session(time_limit_s=600)

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(s.scorer, "_started", full_disk)
    if how == "time_limit":
        fake_clock.advance(601)
    with pytest.raises(OSError):
        s.submit("my answer") if how == "submit" else s.finish_at_time_limit()
    assert s.finished and s.meta.finish_reason == ("submitted" if how == "submit" else "time_limit")
    assert types(s)[-1] == "log" and "session_finished" in str(read_entries(s.folder / "audit.jsonl")[-1])
    assert not s.scoring  # nothing left marked as running
    s.close(pause_clock=None)
