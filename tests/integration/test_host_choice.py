"""`start` without --host walks the hosts file and takes the first engine that answers and has
the GPUs the profile needs free (checked on the engine), or says why none fits."""

from __future__ import annotations

import pytest

from rebench_tui import workstation
from rebench_tui.errors import RuntimeUnavailable


@pytest.fixture
def hosts_file(tmp_path, monkeypatch, docker_client):
    if "nvidia" in (docker_client.info().get("Runtimes") or {}):
        pytest.skip("this engine has the NVIDIA runtime; these tests are about one without")
    f = tmp_path / "hosts.toml"
    f.write_text('[[host]]\nlabel = "gone"\nurl = "tcp://127.0.0.1:9"\n\n'
                 '[[host]]\nlabel = "here"\nurl = "unix:///var/run/docker.sock"\n')
    monkeypatch.setenv("REBENCH_HOSTS_FILE", str(f))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    return f


def test_smoke_takes_the_first_host_that_answers(hosts_file, settings, catalog):
    said = []
    choice = workstation.choose(catalog.get("triton_cumsum"), settings, profile="smoke", say=said.append)
    assert choice.runtime.host == "unix:///var/run/docker.sock" and choice.profile == "smoke"
    assert "checking host gone (tcp://127.0.0.1:9)" in said and "using host here" in said


def test_gpu_profile_with_no_fitting_host_is_refused_with_each_reason(hosts_file, settings, catalog):
    with pytest.raises(RuntimeUnavailable) as exc:
        workstation.choose(catalog.get("triton_cumsum"), settings, profile="gpu")
    assert "gone: engine does not answer" in exc.value.what
    assert "here: no GPUs (no nvidia runtime on the engine and no NVIDIA device nodes in /dev)" in exc.value.what


def test_auto_falls_back_to_the_local_engine_and_the_smoke_profile_saying_why(hosts_file, settings, catalog):
    said = []
    choice = workstation.choose(catalog.get("triton_cumsum"), settings, say=said.append)
    assert choice.profile == "smoke" and choice.runtime.kind == "docker"
    assert any("no listed host fits" in m and "here: no GPUs (no nvidia runtime" in m for m in said)
    assert any("gives containers no GPUs" in m and "using the smoke profile" in m for m in said)


def test_host_by_label(hosts_file, settings, catalog):
    choice = workstation.choose(catalog.get("triton_cumsum"), settings, profile="smoke", host="here")
    assert choice.runtime.host == "unix:///var/run/docker.sock"
