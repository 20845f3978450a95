"""Anchors from end to end: a session records the ones it was normalized with, its exports carry
them, and `compare` normalizes every run by its own setting's anchors (a local session by its
recorded ones, METR's agent runs by METR's published ones), says which, and warns where one
group's runs on one environment were normalized by different anchors.

Hand-computed values (lower is better for both environments):
- METR's three triton_cumsum agent runs (tests/fixtures/runs/metr_agents), published anchors
  1.56 -> 0.47: best raw 0.5 -> (1.56 - 0.5) / (1.56 - 0.47) = 0.97248; 0.4 -> 1.06422;
  1.1 -> 0.42202. (With this project's H200 anchors 1.3304 -> -0.8408 they would read 0.3825,
  0.4285 and 0.1060: the issue's 2.5x error.)
- a local toy_score session calibrated on this host at start 10, reference 4, scoring 7:
  (10 - 7) / (10 - 4) = 0.5 (its manifest's 10 -> 2 would say 0.375).
"""

from __future__ import annotations

import csv
import json
import shutil

import pytest
from click.testing import CliRunner

from rebench_tui.calibrate import calibrate
from rebench_tui.catalog import anchors_in_effect, load_catalog
from rebench_tui.cli import main
from rebench_tui.compare import analysis as A
from rebench_tui.compare.imports import load_sources, read_human_session
from rebench_tui.compare.runs import EnvResolver
from rebench_tui.runtime.local import LocalRuntime
from rebench_tui.session import Session
from rebench_tui.store import Store
from tests.conftest import FIXTURE_ENVS, KNOWN_IMAGES, ROOT

AGENTS = ROOT / "tests" / "fixtures" / "runs" / "metr_agents"
PUBLISHED = {"1301": (1.56 - 0.5) / (1.56 - 0.47), "1302": (1.56 - 0.4) / (1.56 - 0.47), "1303": (1.56 - 1.1) / (1.56 - 0.47)}


@pytest.fixture
def calibrated_toy(tmp_path):
    """The toy environment whose reference answer is 4, calibrated on the local runtime into a
    scratch config folder: anchors 10 -> 4 here, against the manifest's 10 -> 2."""
    root = tmp_path / "envs"
    shutil.copytree(FIXTURE_ENVS / "toy_score", root / "toy_score")
    (root / "toy_score" / "reference" / "answer.txt").write_text("4")
    env = load_catalog(root, KNOWN_IMAGES).get("toy_score")
    calibrate(env, "smoke", LocalRuntime(), runs=2, config_dir=tmp_path / "config", cache_dir=tmp_path / "cache",
              project_root=ROOT)
    return env, tmp_path / "config"


def _session(env, tmp_path, fake_clock, answer: str, anchors=None) -> Session:
    s = Session.create(env, "smoke", LocalRuntime(), tmp_path / "sessions", clock=fake_clock, anchors=anchors,
                       store=Store(tmp_path / "sessions"))
    fake_clock.advance(600)
    (s.workspace / "solution" / "answer.txt").write_text(answer)
    s.score()
    s.submit("done")
    s.lock.release()
    return s


def test_sessions_record_their_anchors_and_exports_carry_them(calibrated_toy, tmp_path, fake_clock):
    from rebench_tui.trajectory.export_csv import export_csv
    from rebench_tui.trajectory.export_inspect import export_inspect
    from rebench_tui.trajectory.export_vivaria import export_vivaria

    env, config = calibrated_toy
    s = _session(env, tmp_path, fake_clock, "7", anchors_in_effect(env, "smoke", config))
    recorded = json.loads((s.folder / "session.json").read_text())["anchors"]
    assert (recorded["kind"], recorded["start"], recorded["reference"]) == ("calibrated", 10.0, 4.0)
    assert recorded["provenance"]["file"] == str(config / "calibration" / "toy_score" / "smoke.json")
    run = json.loads((export_vivaria(s.folder, tmp_path / "viv") / "run.json").read_text())
    assert run["metadata"]["anchors"] == recorded and run["metadata"]["normalized_score"] == pytest.approx(0.5)
    log = export_inspect(s.folder, tmp_path / "s.json", "json")
    data = json.loads(log.read_text())
    assert data["samples"][0]["metadata"]["anchors"] == recorded
    assert data["results"]["scores"][0]["metadata"]["anchors"] == recorded
    with open(export_csv(s.folder, tmp_path / "csv") / "scores.csv", newline="") as fh:
        row = list(csv.DictReader(fh))[0]
    assert (float(row["anchor_start"]), float(row["anchor_reference"]), float(row["normalized"])) == (10.0, 4.0, 0.5)
    assert row["anchors"].startswith("calibrated: calibrated on ")


def test_a_session_without_a_calibration_records_the_manifests_anchors(tmp_path, fake_clock):
    env = load_catalog(FIXTURE_ENVS, KNOWN_IMAGES).get("toy_score")
    s = _session(env, tmp_path, fake_clock, "6")
    meta = json.loads((s.folder / "session.json").read_text())
    assert meta["anchors"]["kind"] == "measured" and "by construction" in meta["anchors"]["provenance"]["measured"]
    assert read_human_session(s.folder).env.anchors.kind == "measured"
    # session.json losing its anchors changes nothing: the start row recorded them
    meta.pop("anchors")
    (s.folder / "session.json").write_text(json.dumps(meta))
    again = read_human_session(s.folder)
    assert (again.env.anchors.kind, again.env.start, again.env.reference) == ("measured", 10.0, 2.0)
    assert A.normalized_final_at(again) == pytest.approx(0.5)


def test_compare_normalizes_each_run_by_its_own_setting(calibrated_toy, tmp_path, fake_clock):
    """The issue's check: imported METR runs and local sessions, both to hand-computed values, and
    every report says which anchors each group used."""
    env, config = calibrated_toy
    s = _session(env, tmp_path, fake_clock, "7", anchors_in_effect(env, "smoke", config))
    out = tmp_path / "report"
    r = CliRunner().invoke(main, ["compare", str(AGENTS), str(s.folder), "--bootstrap", "10", "--csv", "-o", str(out)],
                           env={"COLUMNS": "250", "REBENCH_CONFIG_DIR": str(config)})
    assert r.exit_code == 0, r.output
    with open(out / "runs.csv", newline="") as fh:
        runs = {row["run_id"]: row for row in csv.DictReader(fh)}
    for rid, want in PUBLISHED.items():
        assert float(runs[rid]["normalized"]) == pytest.approx(want, abs=1e-12), rid
        assert (runs[rid]["anchors"], runs[rid]["start"], runs[rid]["reference"]) == ("published", "1.56", "0.47")
    assert round(float(runs["1301"]["normalized"]), 2) == 0.97 and round(float(runs["1302"]["normalized"]), 2) == 1.06
    human = runs[s.id]
    assert float(human["normalized"]) == pytest.approx(0.5) and human["anchors"] == "calibrated"
    assert (float(human["start"]), float(human["reference"])) == (10.0, 4.0)
    with open(out / "anchors.csv", newline="") as fh:
        used = {(row["env_id"], row["group"]): row for row in csv.DictReader(fh)}
    assert used[("triton_cumsum", "modular-public+claude-3-5-sonnet")]["anchors"] == "published"
    assert used[("triton_cumsum", "modular-public+claude-3-5-sonnet")]["n_runs"] == "3"
    assert used[("toy_score", "human")]["anchors"] == "calibrated" and used[("toy_score", "human")]["mixed"] == "False"
    # on screen: a column and a table of anchors, no warning (nothing mixed)
    assert "1.56 → 0.47" in r.output and "published by METR" in r.output and "H100" in r.output
    assert "10 → 4" in r.output and "calibrated on" in r.output
    assert "anchors: what each group's runs were normalized between" in r.output
    assert "different anchors" not in r.output


def test_mixed_anchors_are_averaged_only_with_a_warning(calibrated_toy, tmp_path, fake_clock):
    env, config = calibrated_toy
    a = _session(env, tmp_path, fake_clock, "7", anchors_in_effect(env, "smoke", config))  # 10 -> 4: 0.5
    b = _session(env, tmp_path, fake_clock, "6")  # the manifest's 10 -> 2: 0.5
    runs = load_sources([a.folder, b.folder], EnvResolver()).runs
    c = A.compare(runs, n_boot=10)
    assert c.mixed == {("toy_score", "human")}
    assert "human on toy_score: runs normalized by 2 different anchors are averaged together" in c.warnings[0]
    assert c.stats[("toy_score", "human")].mean_normalized[c.budget] == pytest.approx(0.5)
    out = tmp_path / "report"
    r = CliRunner().invoke(main, ["compare", str(a.folder), str(b.folder), "--bootstrap", "10", "--csv", "-o", str(out)],
                           env={"COLUMNS": "250"})
    assert r.exit_code == 0 and "warning:" in r.output and "different anchors are averaged" in r.output
    with open(out / "summary.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert all("different anchors are averaged" in row["warning"] for row in rows)
    assert rows[0]["anchors"].startswith("MIXED")
    with open(out / "score_at_k.csv", newline="") as fh:
        assert all(row["warning"] for row in csv.DictReader(fh))
    # put on one scale: no warning
    r = CliRunner().invoke(main, ["compare", str(a.folder), str(b.folder), "--bootstrap", "10", "--anchors", "calibrated"],
                           env={"COLUMNS": "250", "REBENCH_CONFIG_DIR": str(config)})
    assert r.exit_code == 0 and "different anchors" not in r.output


def test_anchors_overrides(calibrated_toy, tmp_path, fake_clock):
    env, config = calibrated_toy
    s = _session(env, tmp_path, fake_clock, "7")  # recorded: the manifest's 10 -> 2
    # published: METR's for triton (already the default for agents); the toy has none: kept, with a warning
    res = EnvResolver(override="published")
    runs = load_sources([AGENTS, s.folder], res).runs
    assert {r.run_id: r.env.anchors.kind for r in runs} == {"1301": "published", "1302": "published", "1303": "published",
                                                            s.id: "measured"}
    assert res.warnings == ["--anchors published: toy_score has no published figures; its runs keep their own anchors"]
    # calibrated: this host's calibration of each run's profile
    res = EnvResolver(override="calibrated", config_dir=config)
    (human,) = load_sources([s.folder], res).runs
    assert (human.env.anchors.kind, human.env.reference) == ("calibrated", 4.0)
    assert A.normalized_final_at(human) == pytest.approx(0.5)
    # a file: the H200 figures for triton, to see what they did to METR's runs
    f = tmp_path / "h200.toml"
    f.write_text('[environments.triton_cumsum]\nstart = 1.3304\nreference = -0.8408\nnote = "H200, this project\'s kernel"\n')
    r = CliRunner().invoke(main, ["compare", str(AGENTS), "--no-humans", "--bootstrap", "10", "--anchors", str(f),
                                  "--csv", "-o", str(tmp_path / "h200")], env={"COLUMNS": "250"})
    assert r.exit_code == 0, r.output
    with open(tmp_path / "h200" / "runs.csv", newline="") as fh:
        norm = {row["run_id"]: (float(row["normalized"]), row["anchors"]) for row in csv.DictReader(fh)}
    assert norm["1301"] == (pytest.approx((1.3304 - 0.5) / (1.3304 + 0.8408)), "file")  # 0.38: what the issue saw
    assert norm["1302"][0] == pytest.approx(0.4285, abs=1e-4)
    # a calibration file as --anchors FILE
    cal_file = config / "calibration" / "toy_score" / "smoke.json"
    (run,) = load_sources([s.folder], EnvResolver(override=cal_file)).runs
    assert (run.env.anchors.kind, run.env.reference) == ("file", 4.0)
    bad = tmp_path / "bad.toml"
    bad.write_text("[environments.triton_cumsum]\nstart = 1\n")
    r = CliRunner().invoke(main, ["compare", str(AGENTS), "--no-humans", "--anchors", str(bad)])
    assert r.exit_code == 1 and "needs numeric start and reference" in r.output
