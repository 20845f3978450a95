"""What a new user types: sessions named by id or by folder, and bad options answered in one line.

Bad options run the real command line in a subprocess, so a Python traceback would show as it
does in a terminal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from rebench_tui.cli import main
from tests.conftest import ROOT


@pytest.fixture
def closed_session(toy_session, fake_clock):
    s = toy_session()
    fake_clock.advance(30)
    (s.workspace / "solution" / "answer.txt").write_text("4\n")
    s.score()
    s.submit("done")
    s.close()
    return s


@pytest.mark.parametrize("how", ["id", "prefix", "relative folder", "absolute folder", "folder with slash", "missing path, known id"])
def test_verify_export_and_score_take_ids_and_folders_alike(closed_session, tmp_path, monkeypatch, how):
    s = closed_session
    sessions = s.folder.parent
    monkeypatch.chdir(sessions.parent)
    name = {"id": s.id, "prefix": s.id[:-3], "relative folder": f"{sessions.name}/{s.id}",
            "absolute folder": str(s.folder), "folder with slash": f"{sessions.name}/{s.id}/",
            "missing path, known id": f"elsewhere/{s.id}"}[how]
    r = CliRunner().invoke(main, ["verify", name, "--sessions-dir", str(sessions)])
    assert r.exit_code == 0, r.output
    assert f"{s.id}: verified" in r.output
    r = CliRunner().invoke(main, ["export", name, "--format", "csv", "-o", str(tmp_path / "out"), "--sessions-dir", str(sessions)])
    assert r.exit_code == 0, r.output
    assert (tmp_path / "out" / f"{s.id}-csv" / "scores.csv").is_file()


def test_a_session_folder_outside_the_sessions_folder_is_found_without_sessions_dir(closed_session, tmp_path, monkeypatch):
    s = closed_session
    monkeypatch.setenv("REBENCH_SESSIONS_DIR", str(tmp_path / "empty"))
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(main, ["verify", str(s.folder)])
    assert r.exit_code == 0 and f"{s.id}: verified" in r.output, r.output


def test_a_folder_that_is_not_a_session_is_named_in_the_error(closed_session, tmp_path):
    (tmp_path / "notes").mkdir()
    r = CliRunner().invoke(main, ["verify", str(tmp_path / "notes"), "--sessions-dir", str(closed_session.folder.parent)])
    assert r.exit_code == 1
    assert "is a folder without a session.json" in r.output and "sessions/<id>" in r.output


BAD = [
    (["start", "triton_cumsum", "--time-limit", "-5m"], "--time-limit", "8h, 90m"),
    (["start", "triton_cumsum", "--time-limit", "0"], "--time-limit", "positive duration"),
    (["start", "triton_cumsum", "--time-limit=nan"], "--time-limit", "positive duration"),
    (["start", "triton_cumsum", "--time-limit", "8 hours"], "--time-limit", "8h, 90m"),
    (["start", "triton_cumsum", "--profile", "gpu2"], "--profile", "'gpu', 'smoke'"),
    (["start", "triton_cumsum", "--runtime", "podman"], "--runtime", "'auto', 'docker', 'local'"),
    (["start"], "ENV_ID", "rebench-tui start --help"),
    (["start", "triton_cumsum", "--frobnicate"], "--frobnicate", "rebench-tui start --help"),
    (["--frobnicate"], "--frobnicate", "rebench-tui --help"),
    (["strat", "triton_cumsum"], "strat", "rebench-tui --help"),
    (["compare", "--k-max", "0"], "--k-max", "x>=1"),
    (["export", "x", "--format", "html"], "--format", "'inspect', 'vivaria', 'csv'"),
    (["sessions", "--status", "paused"], "--status", "'active', 'finished'"),
    (["prepare", "fix_embedding", "--from", "/nonexistent/folder"], "--from", "does not exist"),
]


@pytest.mark.parametrize("argv,names,fix", BAD, ids=[" ".join(a) for a, _n, _f in BAD])
def test_every_bad_option_is_one_line_naming_the_fix(argv, names, fix, tmp_path):
    p = subprocess.run([str(Path(sys.executable).with_name("rebench-tui")), *argv], capture_output=True, text=True, timeout=120,
                       cwd=ROOT, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "COLUMNS": "300", "PYTHONPATH": str(ROOT),
                                      "REBENCH_SESSIONS_DIR": str(tmp_path / "sessions")})
    assert p.returncode == 2, (p.stdout, p.stderr)
    assert "Traceback" not in p.stderr and p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert lines[0].startswith("error: ") and names in lines[0] and fix in lines[0], lines[0]


def test_a_relative_sessions_dir_scores_like_an_absolute_one(toy_session, tmp_path, monkeypatch):
    """--sessions-dir sessions (relative) used to give the local runtime's scorer relative paths: every scoring NaN."""
    s = toy_session()
    (s.workspace / "solution" / "answer.txt").write_text("4\n")
    s.close()
    monkeypatch.chdir(s.folder.parent.parent)
    monkeypatch.setenv("REBENCH_ENVIRONMENTS_DIR", str(ROOT / "tests" / "fixtures" / "environments"))
    r = CliRunner().invoke(main, ["score", s.id, "--sessions-dir", s.folder.parent.name])
    assert r.exit_code == 0, r.output
    assert "score 4 (normalized 0.75)" in r.output, r.output
