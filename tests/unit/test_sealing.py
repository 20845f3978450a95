"""Hidden scores sealed to a researcher's key: real toy sessions on the local runtime (real files,
a real index), whose folders must hold no score in clear, whose records still verify without the
key, and whose values the researcher's key (and only it) gives back."""

from __future__ import annotations

import math
import os
import sqlite3

import pytest
from click.testing import CliRunner

from rebench_tui.trajectory.audit import read_entries
from rebench_tui.trajectory.sealing import CLEAR_WARNING, SealError, write_keypair
from rebench_tui.trajectory.session_records import SessionRecords
from rebench_tui.trajectory.verify import verify
from tests.conftest import FIXTURE_ENVS

VALUE = 3.2178  # written as 32178e-4, so the workspace file itself never holds its repr
NORMALIZED = (10 - VALUE) / (10 - 2)


def hide(folder):
    toml = folder / "environment.toml"
    toml.write_text(toml.read_text().replace('direction = "lower"', 'direction = "lower"\nvisibility = "hidden"'))


@pytest.fixture
def hidden_env(env_copy):
    return env_copy(FIXTURE_ENVS / "toy_score", hide)


@pytest.fixture
def keys(tmp_path):
    private = tmp_path / "keys" / "researcher.key"
    private.parent.mkdir()
    pub, _public = write_keypair(private)
    return private, pub


def scored(toy_session, env_root, finish=True):
    s = toy_session(env_root)
    (s.workspace / "solution" / "answer.txt").write_text("32178e-4\n")
    rec = s.score()
    assert rec is not None and rec.score == pytest.approx(VALUE)  # the session itself knows it (the screen hides it)
    if finish:
        s.submit("done")
    s.close(pause_clock=None)
    return s


def folder_bytes(root):
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def holding(root, needle: bytes) -> list[str]:
    return [str(p.relative_to(root)) for p, data in folder_bytes(root).items() if needle in data]


def test_a_sealed_session_holds_no_score_in_clear_and_verifies_without_the_key(toy_session, hidden_env, keys,
                                                                                 monkeypatch, tmp_path):
    private, pub = keys
    monkeypatch.setenv("REBENCH_SEAL_TO", str(pub))
    monkeypatch.delenv("REBENCH_RESEARCHER_KEY", raising=False)
    s = scored(toy_session, hidden_env)
    sessions = tmp_path / "sessions"
    for needle in (repr(VALUE), repr(NORMALIZED), f"{VALUE:.4g}", f"{VALUE:.6g}"):
        assert holding(sessions, needle.encode()) == [], needle  # session folder and index alike
    with sqlite3.connect(sessions / "index.db") as db:
        assert {r[0] for r in db.execute("SELECT score FROM scores")} == {None}  # the score key's and the submission's
        assert [r[0] for r in db.execute("SELECT final_score FROM sessions")] == [None]

    rows = read_entries(s.folder / "audit.jsonl")
    start = next(r for r in rows if "session_started" in str(r["content"]))
    assert start["content"]["content"][1]["seal_to"] == pub.read_text().strip()  # the rule is the chain's
    scores = [r["content"] for r in rows if r["content"]["type"] == "intermediateScore"]
    assert len(scores) == 2 and all(c["score"] is None and c["message"] == {"sealed": True}
                                    and c["details"]["sealed"] is True for c in scores)
    report = verify(s.folder)
    assert report.ok, [str(f) for f in report.findings if not f.ok]


def test_the_researchers_key_reads_the_values_back_and_without_it_they_say_sealed(toy_session, hidden_env, keys,
                                                                                   monkeypatch, tmp_path):
    from rebench_tui.compare.imports import read_human_session
    from rebench_tui.trajectory.export_csv import export_csv

    private, pub = keys
    monkeypatch.setenv("REBENCH_SEAL_TO", str(pub))
    monkeypatch.delenv("REBENCH_RESEARCHER_KEY", raising=False)
    s = scored(toy_session, hidden_env)

    rec = SessionRecords.load(s.folder)  # no key: sealed, said so, and no number
    assert rec.sealed == 2 and all(x.sealed and math.isnan(x.value) for x in rec.scorings)
    assert any("sealed" in w for w in rec.warnings) and rec.meta.final_score is None
    run = read_human_session(s.folder)
    assert any("sealed" in n for n in run.notes) and all(math.isnan(x.score) for x in run.scorings)
    out = export_csv(s.folder, tmp_path / "export-clear")
    assert holding(out, repr(VALUE).encode()) == []

    monkeypatch.setenv("REBENCH_RESEARCHER_KEY", str(private))
    rec = SessionRecords.load(s.folder)
    assert rec.sealed == 0 and [x.value for x in rec.scorings] == [pytest.approx(VALUE)] * 2
    assert rec.counting.score == pytest.approx(VALUE) and rec.meta.final_score == pytest.approx(VALUE)
    assert rec.final_scoring in rec.scorings and not rec.final_scoring.sealed
    run = read_human_session(s.folder)
    assert [x.score for x in run.scorings] == [pytest.approx(VALUE)] * 2 and not any("sealed" in n for n in run.notes)
    out = export_csv(s.folder, tmp_path / "export-opened")
    assert holding(out, repr(VALUE).encode())  # the researcher's export holds the value


def test_a_wrong_key_is_refused_in_words(toy_session, hidden_env, keys, monkeypatch, tmp_path):
    _private, pub = keys
    monkeypatch.setenv("REBENCH_SEAL_TO", str(pub))
    s = scored(toy_session, hidden_env, finish=False)
    other = tmp_path / "other.key"
    write_keypair(other)
    monkeypatch.setenv("REBENCH_RESEARCHER_KEY", str(other))
    with pytest.raises(SealError, match="does not open"):
        SessionRecords.load(s.folder)


def test_a_resumed_session_keeps_sealing_by_its_start_row(toy_session, hidden_env, keys, monkeypatch, fake_clock,
                                                          tmp_path):
    from rebench_tui.catalog import load_catalog
    from rebench_tui.runtime.local import LocalRuntime
    from rebench_tui.session import Session
    from tests.conftest import KNOWN_IMAGES

    _private, pub = keys
    monkeypatch.setenv("REBENCH_SEAL_TO", str(pub))
    s = scored(toy_session, hidden_env, finish=False)
    monkeypatch.delenv("REBENCH_SEAL_TO")  # the settings change; the chain's rule holds
    env = load_catalog(hidden_env, KNOWN_IMAGES).get("toy_score")
    again = Session.open(s.folder, env, LocalRuntime(), clock=fake_clock)
    try:
        assert again.core.seal_to == pub.read_text().strip()
        (again.workspace / "solution" / "answer.txt").write_text("271828e-5\n")
        assert again.score().score == pytest.approx(2.71828)
        again.submit("done")
    finally:
        again.close(pause_clock=None)
    assert holding(s.folder, b"2.71828") == [] and holding(s.folder, repr(VALUE).encode()) == []
    assert verify(s.folder).ok


def test_without_a_key_a_hidden_session_says_its_scores_are_in_clear(toy_session, hidden_env, monkeypatch):
    monkeypatch.delenv("REBENCH_SEAL_TO", raising=False)
    s = scored(toy_session, hidden_env, finish=False)
    assert CLEAR_WARNING in s.status_line()
    start = next(r for r in read_entries(s.folder / "audit.jsonl") if "session_started" in str(r["content"]))
    assert CLEAR_WARNING in start["content"]["content"][0]
    assert holding(s.folder, repr(VALUE).encode())  # today's behaviour, now said: the values are in clear


def test_a_visible_session_neither_seals_nor_warns(toy_session, keys, monkeypatch):
    _private, pub = keys
    monkeypatch.setenv("REBENCH_SEAL_TO", str(pub))
    s = scored(toy_session, FIXTURE_ENVS, finish=False)
    assert CLEAR_WARNING not in s.status_line() and s.core.seal_to is None
    assert holding(s.folder, repr(VALUE).encode())


def test_a_seal_to_that_is_no_key_refuses_the_start(toy_session, hidden_env, monkeypatch, tmp_path):
    monkeypatch.setenv("REBENCH_SEAL_TO", str(tmp_path / "missing.pub"))
    with pytest.raises(SealError, match="neither a public key"):
        toy_session(hidden_env)
    assert not (tmp_path / "sessions").exists() or not any((tmp_path / "sessions").glob("toy_score*"))


def test_study_keygen_writes_a_private_key_only_its_owner_reads(tmp_path):
    from rebench_tui.cli import main

    out = tmp_path / "r.key"
    result = CliRunner().invoke(main, ["study", "keygen", str(out)])
    assert result.exit_code == 0, result.output
    assert os.stat(out).st_mode & 0o777 == 0o600
    public = (tmp_path / "r.key.pub").read_text().strip()
    assert public in result.output and public not in out.read_text()
    again = CliRunner().invoke(main, ["study", "keygen", str(out)])
    assert again.exit_code != 0 and "never overwritten" in again.output


def test_the_collector_witnesses_only_ciphertext_and_the_researcher_counts_it(toy_session, hidden_env, keys,
                                                                               monkeypatch, tmp_path, fake_clock):
    from rebench_tui.study.summary import opened_counting, summarize
    from rebench_tui.study.witness import Witness
    from rebench_tui.trajectory.sealing import load_private_key
    from tests.study_collector import Study

    private, pub = keys
    monkeypatch.setenv("REBENCH_SEAL_TO", str(pub))
    study = Study(tmp_path / "study.db", now=fake_clock.time)
    try:
        s = toy_session(hidden_env)
        w = Witness(s.folder, study.client("ada"), retry_s=0.1).start(s.audit)
        (s.workspace / "solution" / "answer.txt").write_text("32178e-4\n")
        s.score()
        assert w.wait_current(10), w.words()
        w.stop(1)
        assert holding(tmp_path, repr(VALUE).encode()) == []  # the study's database included
        (seen,) = summarize(study.ledger)
        assert seen["counting"] == "sealed" and study.ledger.scorings(s.id)[0]["score"] is None
        lines = [r["line"] for r in study.client("res").rows(s.id)]
        assert opened_counting(lines, load_private_key(private)) == pytest.approx(VALUE)
        other = tmp_path / "other.key"
        write_keypair(other)
        assert opened_counting(lines, load_private_key(other)) == "sealed"
    finally:
        study.close()


def test_repair_rebuilds_a_sealed_session_without_the_key(toy_session, hidden_env, keys, monkeypatch):
    from rebench_tui.trajectory.rebuild import rebuild

    private, pub = keys
    monkeypatch.setenv("REBENCH_SEAL_TO", str(pub))
    monkeypatch.delenv("REBENCH_RESEARCHER_KEY", raising=False)
    s = scored(toy_session, hidden_env)
    (s.folder / "session.json").unlink()
    (s.folder / "score_log.csv").write_text("timestamp,score,message,details\n")
    done = rebuild(s.folder)
    assert len(done) == 2, done
    assert holding(s.folder, repr(VALUE).encode()) == []
    report = verify(s.folder)
    assert report.ok, [str(f) for f in report.findings if not f.ok]
    monkeypatch.setenv("REBENCH_RESEARCHER_KEY", str(private))
    assert SessionRecords.load(s.folder).meta.final_score == pytest.approx(VALUE)  # the rebuilt file keeps the seal


def test_the_chain_covers_the_ciphertext_and_no_clear_final_score_may_stand_beside_it(toy_session, hidden_env, keys,
                                                                                      monkeypatch):
    import json

    _private, pub = keys
    monkeypatch.setenv("REBENCH_SEAL_TO", str(pub))
    s = scored(toy_session, hidden_env)
    meta = json.loads((s.folder / "session.json").read_text())
    (s.folder / "session.json").write_text(json.dumps({**meta, "final_score": 2.0}))
    bad = [f for f in verify(s.folder).findings if not f.ok]
    assert [f.check for f in bad] == ["final score"] and "beside scores that are sealed" in bad[0].detail
    (s.folder / "session.json").write_text(json.dumps(meta))

    audit = s.folder / "audit.jsonl"
    text = audit.read_text()
    at = text.index('"blob":"') + len('"blob":"') + 10
    audit.write_text(text[:at] + ("A" if text[at] != "A" else "B") + text[at + 1:])
    assert any(f.check == "hash chain" for f in verify(s.folder).findings if not f.ok)
