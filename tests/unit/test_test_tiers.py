"""The test tiers themselves: the fast tier selects no test that needs the engine, and with
REBENCH_REQUIRE_DOCKER=1 (CI) a Docker test without an engine fails instead of skipping.

Each runs pytest in a subprocess against an engine address where nothing answers."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import ROOT

NO_ENGINE = "unix:///nonexistent/docker.sock"


def _pytest(tmp_path, *args: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "REBENCH_REQUIRE_DOCKER"}
    full.update(PYTHONPATH=str(ROOT), DOCKER_HOST=NO_ENGINE, **env)
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", f"--basetemp={tmp_path / 'inner'}",
                           *args], cwd=ROOT, env=full, capture_output=True, text=True, timeout=300)


def test_a_test_that_asks_for_the_engine_is_a_docker_test_even_unmarked(tmp_path):
    """tests/integration/test_doctor.py has no module marker; its engine tests are deselected all the same."""
    p = _pytest(tmp_path, "--collect-only", "-q", "-m", "not docker", "tests/integration/test_doctor.py")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    selected = {line.split("::")[1] for line in p.stdout.splitlines() if "::" in line}
    assert "test_an_engine_that_does_not_answer_is_one_failure_and_the_rest_skip" in selected, selected  # needs no engine
    assert not selected & {"test_smoke_profile_passes_without_a_gpu", "test_cli_exits_1_and_prints_each_fix"}, selected


def test_hostile_arenas_fail_rather_than_skip_without_an_engine_under_require_docker(tmp_path):
    """Every hostile module's arena (the shared one and the two with their own) goes through
    conftest's docker_client: no engine under REBENCH_REQUIRE_DOCKER=1 is an error, never a skip."""
    p = _pytest(tmp_path, "-q", "-rs", "tests/integration/test_hostile_rust_codecontests.py",
                "tests/integration/test_hostile_nanogpt_chat_rl.py", "tests/integration/test_hostile_triton_cumsum.py",
                REBENCH_REQUIRE_DOCKER="1")
    summary = p.stdout.strip().splitlines()[-1]
    assert p.returncode != 0 and "skipped" not in summary and "error" in summary, p.stdout[-3000:]
    assert "REBENCH_REQUIRE_DOCKER=1 but no Docker engine answers" in p.stdout


def test_the_readme_opens_with_the_two_commands_the_development_page_times_them_and_ci_runs_the_test_command():
    block = (ROOT / "README.md").read_text(encoding="utf-8").split("```bash", 1)[1].split("```", 1)[0]
    lines = [line for line in block.strip().splitlines()]
    assert [line.split("#")[0].strip() for line in lines] == ["./scripts/start triton_cumsum", "./scripts/test"], lines
    assert "embedded default" in lines[0]
    dev = (ROOT / "docs" / "development.md").read_text(encoding="utf-8")
    block = dev.split("## Testing", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    fast = next(line for line in block.splitlines() if line.startswith("./scripts/test --fast"))
    full = next(line for line in block.splitlines() if line.split("#")[0].strip() == "./scripts/test")
    assert "minutes here" in fast and "minutes here" in full, block
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    assert "./scripts/test" in ci and "export REBENCH_REQUIRE_DOCKER=1" in ci, ci
    script = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    assert "--durations=25" in script and '-m "not docker and not slow"' in script


def test_calibrations_of_environments_scored_by_a_time_are_timed_and_no_other(tmp_path):
    """The full suite's last phase runs the `timed` tests with nothing beside them: a smoke calibration
    is one exactly when its environment's manifest says the score is a time (score.timing)."""
    from rebench_tui.catalog import load_catalog
    from tests.conftest import KNOWN_IMAGES

    timing = {e.id for e in load_catalog(ROOT / "environments", KNOWN_IMAGES).environments.values()
              if e.manifest.score.timing}
    p = _pytest(tmp_path, "--collect-only", "-q", "-m", "timed", "tests/integration/test_calibrate_smoke.py")
    assert p.returncode == 0, p.stdout[-2000:] + p.stderr[-2000:]
    ids = {line.split("::")[1] for line in p.stdout.splitlines() if "::" in line}
    calibrations = {i.split("[")[1].rstrip("]") for i in ids if i.startswith("test_calibrate_smoke")}
    assert timing and calibrations == timing, (calibrations, timing)
    assert "test_compare_a_calibrated_triton_session_with_metr_agent_runs" in ids  # reads the triton case's session
