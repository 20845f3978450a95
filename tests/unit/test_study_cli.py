"""The study's commands against a real collector on loopback: two participants' sessions
witnessed at once, `study status`, `finish` streaming its rows, and `verify --witness` failing
the consistent rewrite."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from rebench_tui.cli import main
from rebench_tui.config import Settings
from rebench_tui.study.attach import bind, binding, witness_session
from tests.conftest import FIXTURE_ENVS
from tests.study_collector import Study
from tests.study_rewrite import rewrite_score


@pytest.fixture
def study(tmp_path, fake_clock):
    s = Study(tmp_path / "study.db", now=fake_clock.time)
    yield s
    s.close()


def as_(study, who, tmp_path, **env):
    return {"REBENCH_STUDY_TOKEN": study.tokens[who], "REBENCH_ENVIRONMENTS_DIR": str(FIXTURE_ENVS),
            "REBENCH_CONFIG_DIR": str(tmp_path / "config"), **env}


def test_two_concurrent_sessions_are_listed_with_their_state(study, toy_session, fake_clock, tmp_path):
    a, b = toy_session(), toy_session()
    bind(a, study.url, "ada")
    bind(b, study.url, "bob")
    assert binding(a.folder) == {"url": study.url, "participant": "ada"}
    wa = witness_session(a, Settings(study_token=study.tokens["ada"]))
    wb = witness_session(b, Settings(study_token=study.tokens["bob"]))
    assert wa.wait_current(10) and wb.wait_current(10)  # (sent before the clock moves on: no gap)
    fake_clock.advance(900)
    (a.workspace / "solution" / "answer.txt").write_text("4")
    a.score()
    (b.workspace / "solution" / "answer.txt").write_text("7")
    b.score()
    (b.workspace / "solution" / "answer.txt").write_text("3")
    b.score()
    a.submit("done")
    assert wa.wait_current(10) and wb.wait_current(10), (wa.words(), wb.words())

    r = CliRunner().invoke(main, ["study", "status", study.url], env=as_(study, "res", tmp_path),
                           terminal_width=250)
    assert r.exit_code == 0, r.output
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[1:-1]]
            for line in r.output.splitlines() if line.startswith("│")}
    assert a.id in rows, r.output
    assert rows[a.id][1:4] == ["ada", "toy_score", "finished"] and rows[a.id][5:7] == ["2", "4"]
    assert rows[b.id][1:4] == ["bob", "toy_score", "live"] and rows[b.id][5:7] == ["2", "3"]
    assert rows[a.id][4] == "0:15:00 / 1:00:00" and rows[b.id][8] == "none"
    assert "2 session(s)" in r.output
    r = CliRunner().invoke(main, ["study", "status", study.url], env=as_(study, "ada", tmp_path))
    assert r.exit_code == 1 and "only a researcher" in r.output and "next: use a token" in r.output
    r = CliRunner().invoke(main, ["compare", "--study", study.url, "--no-humans", "--bootstrap", "0",
                                  "--finished-only", "--csv", "-o", str(tmp_path / "report")],
                           env=as_(study, "res", tmp_path), terminal_width=250)
    assert r.exit_code == 0, r.output
    runs = (tmp_path / "report" / "runs.csv").read_text()
    assert a.id in runs and b.id not in runs  # read from the collector; only the finished one with --finished-only
    assert "(ada),toy_score,human,human,True,2,900.0,4.0,0.75," in runs  # its scorings, working time, final score
    wa.stop(1)
    wb.stop(1)


def test_finish_streams_and_verify_witness_fails_the_rewrite(study, toy_session, fake_clock, tmp_path):
    s = toy_session()
    bind(s, study.url, "ada")
    (s.workspace / "solution" / "answer.txt").write_text("4")
    s.score()
    s.lock.release()
    env = as_(study, "ada", tmp_path)
    sessions = str(s.folder.parent)
    r = CliRunner().invoke(main, ["finish", s.id, "--sessions-dir", sessions], env=env)
    assert r.exit_code == 0, r.output
    assert "witness: current" in r.output  # every row, the finish included, reached the collector
    r = CliRunner().invoke(main, ["verify", s.id, "--witness", study.url, "--sessions-dir", sessions], env=env)
    assert r.exit_code == 0 and "are the ones" in r.output, r.output

    first = rewrite_score(s.folder, 4.0, 1.5)
    r = CliRunner().invoke(main, ["verify", s.id, "--sessions-dir", sessions], env=env)
    assert r.exit_code == 0, r.output  # the rewrite is consistent: the local checks pass
    r = CliRunner().invoke(main, ["verify", s.id, "--witness", study.url, "--sessions-dir", sessions], env=env,
                           terminal_width=300)
    assert r.exit_code == 1
    assert f"FAIL witness (line {first}): differs from the row the collector witnessed" in r.output
    assert "witnessed score 4" in r.output and "here score 1.5" in r.output


@pytest.mark.parametrize("who, extra, says, code", [
    ("ada", [], "--study needs --participant", 2),          # called wrongly: a usage error
    ("ada", ["--participant", "bob"], "this token is 'ada''s, not 'bob''s", 1),
    (None, ["--participant", "ada"], "no study token", 1),
])
def test_start_refuses_before_anything_starts(study, tmp_path, who, extra, says, code):
    env = as_(study, who or "ada", tmp_path)
    if who is None:
        env["REBENCH_STUDY_TOKEN"] = ""  # unset, and no token file in the config folder
    r = CliRunner().invoke(main, ["start", "toy_score", "--runtime", "local", "--study", study.url, *extra,
                                  "--sessions-dir", str(tmp_path / "sessions")], env=env, terminal_width=300)
    assert r.exit_code == code and says in r.output, r.output
    assert "nothing was started" in r.output and not (tmp_path / "sessions").exists()
