"""On an engine that gives containers no GPUs: `start --profile gpu` is refused before anything
is built, fetched or made, saying so; `doctor ENV` checks the profile `start` would pick there."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from rebench_tui.cli import main


@pytest.fixture
def no_gpu_engine(docker_client, tmp_path, monkeypatch):
    if "nvidia" in (docker_client.info().get("Runtimes") or {}):
        pytest.skip("this engine has the NVIDIA runtime; these tests are about one without")
    monkeypatch.setenv("REBENCH_HOSTS_FILE", str(tmp_path / "no-hosts.toml"))  # no hosts file: the local engine
    monkeypatch.setenv("REBENCH_SESSIONS_DIR", str(tmp_path / "sessions"))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    return docker_client


def test_start_profile_gpu_is_refused_before_anything_is_made(no_gpu_engine, tmp_path):
    images = {i.id for i in no_gpu_engine.images.list(all=True)}
    r = CliRunner().invoke(main, ["start", "triton_cumsum", "--profile", "gpu"])
    assert r.exit_code == 1, r.output
    assert "error: the gpu profile of triton_cumsum needs 1 GPU(s), and the engine at" in r.output
    assert "kept: nothing was started: no image built, nothing downloaded, no session folder made" in r.output
    assert "…" not in r.output  # no build step was begun ("… building" lines)
    assert not (tmp_path / "sessions").exists() or not any((tmp_path / "sessions").iterdir())
    assert {i.id for i in no_gpu_engine.images.list(all=True)} == images


def test_doctor_checks_the_profile_start_would_pick(no_gpu_engine):
    r = CliRunner().invoke(main, ["doctor", "triton_cumsum"])
    assert "note: checking the smoke profile, the one `rebench-tui start triton_cumsum` picks here" in r.output, r.output
    assert "doctor: triton_cumsum (smoke profile)" in r.output
    assert "GPUs" in r.output and "the smoke profile needs 0" in r.output
