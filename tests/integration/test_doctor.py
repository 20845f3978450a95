"""`rebench-tui doctor` against this machine's real engine: it names what is missing (here: any way
to give containers GPUs, and GPUs) and passes the rest."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from rebench_tui.cli import main
from rebench_tui.doctor import Doctor


@pytest.fixture
def no_gpu_engine(docker_runtime):
    if docker_runtime.has_nvidia_runtime():
        pytest.skip("this engine has the NVIDIA runtime; the test is about a machine without one")
    return docker_runtime


def test_gpu_profile_fails_exactly_on_the_gpu_mode_and_gpus(no_gpu_engine, settings, catalog):
    doc = Doctor(settings, catalog.get("triton_cumsum"), "gpu", connect=lambda _h: no_gpu_engine)
    findings = {f.check: f for f in doc.run()}
    failed = {c for c, f in findings.items() if f.status == "fail"}
    assert failed == {"GPU mode", "GPUs"}
    mode = findings["GPU mode"]
    # which mode, and why: no toolkit, and (looked at from a container) no device nodes either
    assert mode.detail == "none: containers get no GPUs: no nvidia runtime on the engine and no NVIDIA device nodes in /dev"
    assert "nvidia-ctk runtime configure" in mode.fix
    assert "--profile smoke" in findings["GPUs"].fix
    for check in ("engine", "API version", "disk", "clock skew", "assets"):
        assert findings[check].status == "ok", findings[check]


def test_smoke_profile_passes_without_a_gpu(no_gpu_engine, settings, catalog):
    doc = Doctor(settings, catalog.get("triton_cumsum"), "smoke", connect=lambda _h: no_gpu_engine)
    findings = doc.run()
    assert not doc.failed, [f for f in findings if f.status == "fail"]
    mode = {f.check: f for f in findings}["GPU mode"]
    assert mode.status == "warn" and mode.detail.endswith("(not needed for the smoke profile)")


def test_unprepared_assets_are_named_with_the_prepare_command(no_gpu_engine, tmp_path, catalog):
    from rebench_tui.config import Settings
    from tests.conftest import ROOT

    empty_cache = Settings(root=ROOT, cache_dir=tmp_path / "cache")
    doc = Doctor(empty_cache, catalog.get("fix_embedding"), "smoke", connect=lambda _h: no_gpu_engine)
    assets = {f.check: f for f in doc.run()}["assets"]
    assert assets.status == "fail" and assets.fix == "`rebench-tui prepare fix_embedding --synthetic`"


def test_cli_exits_1_and_prints_each_fix(no_gpu_engine):
    # the gpu profile named: without --profile, doctor checks the one start would pick here, smoke
    # (test_gpu_refused_early), which this engine runs
    result = CliRunner().invoke(main, ["doctor", "triton_cumsum", "--profile", "gpu"])
    assert result.exit_code == 1
    assert "FAIL  GPU mode" in result.output and "install the NVIDIA Container Toolkit" in result.output
    assert "2 check(s) failed: GPU mode, GPUs" in result.output


def test_an_engine_that_does_not_answer_is_one_failure_and_the_rest_skip(settings):
    doc = Doctor(settings, None, None, host="tcp://127.0.0.1:9")
    findings = doc.run()
    assert [f.status for f in findings] == ["fail"] + ["skip"] * 7
    assert "no Docker engine answers at tcp://127.0.0.1:9" in findings[0].detail


from tests.sshd import sshd  # noqa: E402,F401 - fixture


def test_doctor_over_ssh_checks_keys_and_reaches_the_engine_through_sshd(sshd, settings, catalog, docker_client):  # noqa: F811
    if "nvidia" in (docker_client.info().get("Runtimes") or {}):
        pytest.skip("this engine has the NVIDIA runtime")
    doc = Doctor(settings, catalog.get("triton_cumsum"), "smoke", host=sshd.url)
    found = {f.check: f for f in doc.run()}
    assert not doc.failed, [f for f in found.values() if f.status == "fail"]
    assert found["ssh known_hosts"].status == "ok" and found["ssh key"].status == "ok"
    assert found["engine"].detail == f"Docker engine answers at {sshd.url}"
    assert found["disk"].status == "ok"            # measured in a throwaway container over the link
    assert found["clock skew"].status == "ok"
    sshd.stop()                                    # the link is gone: one failure, named, the rest skipped
    found = {f.check: f for f in Doctor(settings, catalog.get("triton_cumsum"), "smoke", host=sshd.url).run()}
    assert found["engine"].status == "fail" and found["ssh known_hosts"].status == "ok"
    assert found["disk"].status == "skip"
