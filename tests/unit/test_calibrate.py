"""`rebench-tui calibrate` on the local runtime with the toy environment (its scorer scores the
number in solution/answer.txt), real files and real scorer runs: what a calibration file holds,
what a new session is normalized with afterwards, and every way a calibration refuses or fails."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from rebench_tui.calibrate import CalibrationError, calibrate
from rebench_tui.catalog import anchors_in_effect, load_catalog
from rebench_tui.catalog.anchors import AnchorsError
from rebench_tui.catalog.calibration import calibration_path, load_calibration
from rebench_tui.cli import main
from rebench_tui.runtime.local import LocalRuntime
from rebench_tui.session import Session
from tests.conftest import FIXTURE_ENVS, KNOWN_IMAGES, ROOT

TOY = FIXTURE_ENVS / "toy_score"


def _set_reference(answer: str, command: str | None = None):
    """An edit for env_copy: the toy's reference answer (and a command run before scoring it)."""

    def edit(d):
        (d / "reference" / "answer.txt").write_text(answer)
        if command is not None:
            t = (d / "environment.toml").read_text()
            t = t.replace('reference = { files = { "solution/answer.txt" = "reference/answer.txt" } }',
                          'reference = { files = { "solution/answer.txt" = "reference/answer.txt" }, command = '
                          + command + ', workdir = "solution", timeout = "20s" }')
            (d / "environment.toml").write_text(t)

    return edit


def _toy(root):
    cat = load_catalog(root, KNOWN_IMAGES)
    assert not cat.problems, cat.problems
    return cat.get("toy_score")


def _calibrate(env, tmp_path, runs=2, **kw):
    return calibrate(env, "smoke", LocalRuntime(), runs=runs, config_dir=tmp_path / "config", cache_dir=tmp_path / "cache",
                     project_root=ROOT, **kw)


def test_calibration_file_holds_runs_medians_and_the_setting(env_copy, tmp_path):
    env = _toy(env_copy(TOY, _set_reference("4")))
    said = []
    out = _calibrate(env, tmp_path, runs=3, progress=said.append)
    path = calibration_path(tmp_path / "config", "toy_score", "smoke")
    assert out.path == path and path.is_file()
    data = json.loads(path.read_text())
    assert data["start"]["scores"] == [10.0, 10.0, 10.0] and data["reference"]["scores"] == [4.0, 4.0, 4.0]
    assert (data["start"]["median"], data["reference"]["median"], data["reference"]["spread"]) == (10.0, 4.0, 0.0)
    assert data["runs"] == 3 and data["env_version"] == "1.0.0" and data["direction"] == "lower"
    assert data["reference"]["setup"]["files"] == {"solution/answer.txt": "reference/answer.txt"}
    # the setting: host, runtime, packages as the sandbox's Python sees them, scorer digest, git, date
    assert data["host"]["runtime"] == "local" and data["host"]["isolated"] is False and data["image"] is None
    assert "pydantic" in {k.lower() for k in data["packages"]} and data["gpus"] == []
    assert data["scorer_sha256"] == env.scorer_sha256 == data["scorer_sha256_reported"]
    assert len(data["git"]["commit"]) == 40 and data["rebench_tui"] and data["date"].startswith("20")
    assert data["manifest"] == {"start": 10.0, "reference": 2.0, "anchors": "measured"}
    # the runs were real scorings in a real session, kept for inspection
    rows = [json.loads(line) for line in (tmp_path / "cache" / "calibration-sessions").glob("*/audit.jsonl").__next__().read_text().splitlines()]
    assert sum(r["content"]["type"] == "intermediateScore" for r in rows) == 6
    assert any("reference: scoring 3 of 3: 4" in m for m in said)
    # the manifest's reference (2) is outside the profile's tolerance (0) of the calibrated 4: said
    assert out.drift() == ["the manifest's reference 2 is 2 from the calibrated median 4 (tolerance 0)"]


def test_a_new_session_is_normalized_by_the_calibrated_anchors_and_records_them(env_copy, tmp_path, fake_clock):
    env = _toy(env_copy(TOY, _set_reference("4")))
    assert anchors_in_effect(env, "smoke", tmp_path / "config").kind == "measured"  # nothing calibrated yet
    _calibrate(env, tmp_path)
    anchors = anchors_in_effect(env, "smoke", tmp_path / "config")
    assert (anchors.kind, anchors.start, anchors.reference) == ("calibrated", 10.0, 4.0)
    assert "no GPU" in anchors.summary and "local runtime" in anchors.summary
    s = Session.create(env, "smoke", LocalRuntime(), tmp_path / "sessions", clock=fake_clock, anchors=anchors)
    try:
        (s.workspace / "solution" / "answer.txt").write_text("7")
        rec = s.score()
        assert rec.normalized == pytest.approx(0.5)  # (10 - 7) / (10 - 4); the manifest's 10 -> 2 would say 0.375
        meta = json.loads((s.folder / "session.json").read_text())
        assert (meta["start_score"], meta["reference_score"]) == (10.0, 4.0)
        assert meta["anchors"]["kind"] == "calibrated" and meta["anchors"]["provenance"]["reference"]["scores"] == [4.0, 4.0]
        first = json.loads((s.folder / "audit.jsonl").read_text().splitlines()[0])
        assert first["content"]["content"][1]["anchors"] == meta["anchors"]
        assert "normalized between start 10 and reference 4" in first["content"]["content"][0]
    finally:
        s.lock.release()


def test_a_changed_scorer_makes_the_calibration_stale(env_copy, tmp_path):
    root = env_copy(TOY, _set_reference("4"))
    _calibrate(_toy(root), tmp_path)
    with open(root / "toy_score" / "protected" / "score.py", "a") as fh:
        fh.write("\n# changed\n")
    anchors = anchors_in_effect(_toy(root), "smoke", tmp_path / "config")
    assert anchors.provenance["stale"] == ["the scorer (protected/) changed since this calibration"]
    assert "STALE" in anchors.summary


def _copy(tmp_path, edit, name: str):
    """Another edited copy of the toy in its own folder (env_copy makes one per test)."""
    import shutil

    root = tmp_path / name
    shutil.copytree(TOY, root / "toy_score", ignore=shutil.ignore_patterns("__pycache__"))
    edit(root / "toy_score")
    return root


def test_a_failed_calibration_keeps_the_previous_file(env_copy, tmp_path):
    _calibrate(_toy(env_copy(TOY, _set_reference("4"))), tmp_path)
    path = calibration_path(tmp_path / "config", "toy_score", "smoke")
    before = path.read_bytes()
    # a reference command that fails
    broken = _toy(_copy(tmp_path, _set_reference("3", '["python3", "-c", "import sys; print(\'no luck\', file=sys.stderr); sys.exit(3)"]'), "a"))
    with pytest.raises(CalibrationError) as exc:
        _calibrate(broken, tmp_path)
    assert "exited with status 3" in exc.value.what and "no luck" in exc.value.what
    assert "no calibration file was written" in exc.value.kept and exc.value.fix
    assert path.read_bytes() == before
    # a reference that scores NaN
    with pytest.raises(CalibrationError) as exc:
        _calibrate(_toy(_copy(tmp_path, _set_reference("nan"), "b")), tmp_path)
    assert "gave no valid score" in exc.value.what and "answer rejected" in exc.value.what
    assert path.read_bytes() == before
    # a reference no better than the start
    with pytest.raises(CalibrationError) as exc:
        _calibrate(_toy(_copy(tmp_path, _set_reference("12"), "c")), tmp_path)
    assert "did not beat the starting one" in exc.value.what
    assert path.read_bytes() == before


def test_the_reference_command_runs_in_the_home_before_scoring(env_copy, tmp_path):
    cmd = '["python3", "-c", "open(\'answer.txt\', \'w\').write(\'5\')"]'  # rewrites the copied answer
    out = _calibrate(_toy(env_copy(TOY, _set_reference("3", cmd))), tmp_path)
    assert out.calibration.reference.scores == [5.0, 5.0]
    assert out.calibration.reference.setup["command_s"] >= 0


def test_profiles_that_cannot_be_calibrated_here_say_why(catalog, tmp_path):
    with pytest.raises(CalibrationError) as exc:
        calibrate(catalog.get("nanogpt_chat_rl"), "gpu", LocalRuntime(), runs=1, config_dir=tmp_path, cache_dir=tmp_path,
                  project_root=ROOT)
    assert "cannot be calibrated on this project's machines" in exc.value.what and "judge" in exc.value.what
    assert "published" in exc.value.kept
    for env in catalog.environments.values():  # every profile says how it is calibrated, or why it cannot be here
        for name in env.profile_names:
            cal = env.profile(name).calibration
            assert cal is not None and (cal.unavailable or cal.reference is not None), (env.id, name)
            if name == "smoke":
                assert not cal.unavailable and cal.tolerance is not None, env.id


def test_unreadable_or_misplaced_calibration_files_are_clear_errors(env_copy, tmp_path):
    env = _toy(env_copy(TOY))
    path = calibration_path(tmp_path, "toy_score", "smoke")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(AnchorsError) as exc:
        anchors_in_effect(env, "smoke", tmp_path)
    assert str(path) in exc.value.what and "remove" in exc.value.fix
    _calibrate(env, tmp_path / "elsewhere")
    data = json.loads(calibration_path(tmp_path / "elsewhere" / "config", "toy_score", "smoke").read_text())
    data["profile"] = "gpu"
    path.write_text(json.dumps(data))
    with pytest.raises(AnchorsError) as exc:
        anchors_in_effect(env, "smoke", tmp_path)
    assert "is for toy_score/gpu" in exc.value.what
    assert load_calibration(calibration_path(tmp_path / "elsewhere" / "config", "toy_score", "smoke")).runs == 2


def test_cli_calibrate_prints_the_runs_and_where_it_wrote(env_copy, tmp_path):
    root = env_copy(TOY, _set_reference("4"))
    env = {"REBENCH_ENVIRONMENTS_DIR": str(root), "REBENCH_CONFIG_DIR": str(tmp_path / "config"),
           "REBENCH_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "160"}
    r = CliRunner().invoke(main, ["calibrate", "toy_score", "--profile", "smoke", "--runs", "2", "--runtime", "local"], env=env)
    assert r.exit_code == 0, r.output
    assert "10, 10" in r.output and "4, 4" in r.output and "no image (local runtime)" in r.output
    assert "the manifest's reference 2 is 2 from the calibrated median 4" in r.output
    assert str(calibration_path(tmp_path / "config", "toy_score", "smoke")) in r.output
    # and `list -v` says the profile is calibrated here, with the file
    r = CliRunner().invoke(main, ["list", "-v"], env=env)
    assert "in effect here: start 10, reference 4 — calibrated on" in r.output
    assert math.isfinite(load_calibration(calibration_path(tmp_path / "config", "toy_score", "smoke")).duration_s)


def _scores_in_order(tmp_path):
    (audit,) = (tmp_path / "cache" / "calibration-sessions").glob("*/audit.jsonl")
    rows = [json.loads(line) for line in audit.read_text().splitlines()]
    return [r["content"]["score"] for r in rows if r["content"]["type"] == "intermediateScore"]


def test_a_files_only_reference_takes_turns_with_the_start(env_copy, tmp_path):
    """Start, reference, start, reference: a load change falls on both. A folder merged over the
    home is taken back out for the start (here solution/ with another answer and an extra file)."""
    def edit(d):
        (d / "reference" / "sol").mkdir()
        (d / "reference" / "sol" / "answer.txt").write_text("4")
        (d / "reference" / "sol" / "extra.txt").write_text("only in the reference")
        t = (d / "environment.toml").read_text()
        (d / "environment.toml").write_text(t.replace('{ "solution/answer.txt" = "reference/answer.txt" }',
                                                      '{ "solution" = "reference/sol" }'))

    out = _calibrate(_toy(env_copy(TOY, edit)), tmp_path, runs=3)
    assert _scores_in_order(tmp_path) == [10.0, 4.0, 10.0, 4.0, 10.0, 4.0]
    assert out.calibration.reference.setup["order"] == "alternating"


def test_a_reference_built_by_a_command_is_scored_after_every_start(env_copy, tmp_path):
    cmd = '["python3", "-c", "open(\'answer.txt\', \'w\').write(\'5\')"]'
    out = _calibrate(_toy(env_copy(TOY, _set_reference("3", cmd))), tmp_path)
    assert _scores_in_order(tmp_path) == [10.0, 10.0, 5.0, 5.0]
    assert out.calibration.reference.setup["order"] == "starts first"


def test_cli_calibrate_shows_progress_on_a_terminal(env_copy, tmp_path, monkeypatch):
    """On a terminal a spinner names the step under way with the time so far; each step also stays as a line."""
    import io

    from rich.console import Console

    from rebench_tui.cli import common as cli

    screen = io.StringIO()
    monkeypatch.setattr(cli, "err", Console(file=screen, force_terminal=True, width=120, soft_wrap=True))
    root = env_copy(TOY, _set_reference("4"))
    env = {"REBENCH_ENVIRONMENTS_DIR": str(root), "REBENCH_CONFIG_DIR": str(tmp_path / "config"),
           "REBENCH_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "160"}
    r = CliRunner().invoke(main, ["calibrate", "toy_score", "--profile", "smoke", "--runs", "2", "--runtime", "local"], env=env)
    assert r.exit_code == 0, r.output
    shown = screen.getvalue()
    assert "… start: scoring 1 of 2" in shown, shown  # the step's line, kept
    assert "calibrating toy_score: " in shown and "0:00:0" in shown, shown  # the live line: step and elapsed time


def test_a_folder_closed_to_the_participant_is_found_on_the_way_to_the_cache():
    import os
    import shutil
    import tempfile

    from rebench_tui.calibrate import closed_to

    base = Path(tempfile.mkdtemp(dir="/tmp"))  # tmp_path lies under a folder of mode 700 itself
    try:
        base.chmod(0o755)
        (base / "open").mkdir(mode=0o755)
        (base / "shut").mkdir()
        (base / "shut").chmod(0o700)
        other = os.getuid() + 1000
        assert closed_to(base / "open" / "cache" / "calibration-sessions", other) is None
        assert closed_to(base / "shut" / "cache" / "calibration-sessions", other) == base / "shut"
        assert closed_to(base / "shut" / "cache", os.getuid()) is None  # its owner may pass
    finally:
        shutil.rmtree(base)


@pytest.mark.skipif(not hasattr(__import__("os"), "geteuid") or __import__("os").geteuid() != 0,
                    reason="--participant-uid is for a calibration run as root")
def test_a_participant_uid_that_cannot_reach_the_cache_is_refused_before_anything_runs(tmp_path):
    (tmp_path / "cache").mkdir(mode=0o700)
    with pytest.raises(CalibrationError) as exc:
        calibrate(_toy(FIXTURE_ENVS), "smoke", LocalRuntime(), runs=1, config_dir=tmp_path / "config",
                  cache_dir=tmp_path / "cache", project_root=ROOT, participant_uid=1000)
    assert "uid 1000 could not reach" in exc.value.what and "XDG_CACHE_HOME" in exc.value.fix
    assert "nothing was run" in exc.value.kept
    assert not (tmp_path / "cache" / "calibration-sessions").exists()
