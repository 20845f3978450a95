"""The end-to-end driver that scripts/gpu-e2e runs on a GPU machine, run here: real Pilot sessions
in real containers on this machine's engine (the GPU-only steps skip themselves without a GPU).
If these pass, the device run can only fail on what needs the GPU."""

from __future__ import annotations

import json
import math

import pytest

from tests import e2e_driver
from tests.conftest import FIXTURE_ENVS

pytestmark = pytest.mark.docker


def _run(tmp_path, *args: str) -> tuple[int, dict, str]:
    out = tmp_path / "out"
    rc = e2e_driver.main([*args, "--out", str(out), "--sessions-dir", str(tmp_path / "sessions"),
                          "--bare-dir", str(tmp_path / "bare")])
    summary = json.loads(next(out.glob("*-e2e.json")).read_text())
    log = next(out.glob("*-e2e.log")).read_text()
    return rc, summary, log


def test_a_whole_session_of_the_toy_environment_with_every_comparison(docker_client, tmp_path):
    """Deterministic scores, so the side-by-side must agree exactly: through the app, over a raw
    docker exec and outside any container."""
    ref = tmp_path / "answer.txt"
    ref.write_text("2\n")
    rc, s, log = _run(tmp_path, "toy_score", "--environments", str(FIXTURE_ENVS), "--profile", "smoke",
                      "--expect-profile", "smoke", "--reference", f"solution/answer.txt={ref}", "--rescore-start", "1", "--bare", "1")
    assert rc == 0, log
    assert s["ok"] and s["failures"] == []
    assert [(x["label"], x["solution"], x["score"]) for x in s["scores"]] == [
        ("start 1", "start", 10.0), ("start 2", "start", 10.0), ("reference 1", "reference", 2.0), ("final (submit)", "reference", 2.0)]
    assert s["side_by_side"] == [
        {"solution": "start", "container_app": [10.0, 10.0], "container_raw_exec": [], "bare": [10.0]},
        {"solution": "reference", "container_app": [2.0, 2.0], "container_raw_exec": [2.0], "bare": [2.0]}]
    assert s["shell"]["commands"] == ["echo e2e-shell-$(id -un)", "ls solution", "exit"]
    assert "e2e-shell-agent" in s["shell"]["output_tail"]           # typed as the participant, in the container
    assert s["verify"]["exit"] == 0 and s["export"]["status"] == "success" and s["export"]["events"]["tool"] == 3
    assert s["export"]["scores"] == {"rebench_score": 2.0}
    assert s["counts"] == {"score": 2.0, "n": 2, "attempt": 2}         # reference and final: one attempt, two scorings
    assert s["gpu_mode"] == "none"
    assert 0 < s["container_ready_s"] <= s["screen_ready_s"]
    for step in ("screen up", "note", "pause and resume", "quit", "rebench-tui verify"):
        assert step in s["step_s"]
    assert "GPU inside the container" not in s["step_s"]               # no GPU here: those steps skip
    assert "PASSED" in log


@pytest.mark.slow
@pytest.mark.timed
def test_triton_cumsum_smoke_through_the_app_as_the_device_run_does(docker_client, tmp_path):
    """The same steps as scripts/gpu-e2e's first environment, on the smoke profile (CPU, Triton's
    interpreter): about a minute and a half of scorings on a 2-core machine."""
    rc, s, log = _run(tmp_path, "triton_cumsum", "--profile", "smoke",
                      "--reference", "solution/solution.py=reference/smoke_solution.py")
    assert rc == 0, log
    scores = {x["label"]: x for x in s["scores"]}
    assert set(scores) == {"start 1", "reference 1", "final (submit)"}
    assert all(math.isfinite(x["score"]) and x["message"]["results_match"] is True for x in scores.values())
    assert s["raw_exec"]["valid"] and s["raw_exec"]["solution"] == "reference"
    assert s["verify"]["exit"] == 0 and s["export"]["samples"] == 1
    assert s["sandbox"]["image"] == "torch-cpu" and "gpu_devices" not in s["sandbox"]


def test_a_participant_process_that_signals_everything_changes_no_scoring(docker_client, tmp_path):
    """The device run's hostile step, here: a process of the participant's that re-arms itself with
    SIGCONT and stops and restarts every process it can see runs through one more scoring; the
    container stays frozen through it (no tick inside the scoring) and the score is the honest one."""
    ref = tmp_path / "answer.txt"
    ref.write_text("2\n")
    rc, s, log = _run(tmp_path, "toy_score", "--environments", str(FIXTURE_ENVS), "--profile", "smoke",
                      "--reference", f"solution/answer.txt={ref}", "--hostile-ticker", "--no-raw-exec")
    assert rc == 0, log
    t = s["ticker"]
    assert t["ticks"] > 5 and t["during_scoring"] == 0, t
    assert t["longest_gap_s"] >= max(t["frozen_window_s"], 0.3), t  # it stood still through the scoring
    assert t["score"] == 2.0 and t["honest"] == [2.0]
    assert [x["label"] for x in s["scores"]] == ["start 1", "reference 1", "reference with a hostile ticker", "final (submit)"]
