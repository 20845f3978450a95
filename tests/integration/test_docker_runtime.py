"""The Docker runtime against the real engine: build, start, exec as agent, copy, protection, limits."""

from __future__ import annotations

import threading
import time
from dataclasses import replace

import pytest

from rebench_tui.errors import RuntimeUnavailable
from rebench_tui.runtime.base import SandboxSpec

pytestmark = pytest.mark.docker


@pytest.fixture
def toy(fixture_catalog):
    return fixture_catalog.get("toy_score")


@pytest.fixture
def sandbox(docker_runtime, toy, tmp_path):
    ws = tmp_path / "ws"
    (ws / "solution").mkdir(parents=True)
    (ws / "solution" / "answer.txt").write_text("7\n")
    spec = SandboxSpec("itest-" + tmp_path.name[-12:].replace("_", "-"), toy, toy.profile("smoke"), ws, tmp_path / "state")
    image = docker_runtime.ensure_image(toy, spec.profile, lambda m: None)
    sb = docker_runtime.create(spec, image, lambda m: None)
    yield sb
    sb.stop(remove=True)


def test_image_is_built_once_and_labelled(docker_runtime, toy):
    msgs: list[str] = []
    tag = docker_runtime.ensure_image(toy, toy.profile("smoke"), msgs.append)
    again: list[str] = []
    assert docker_runtime.ensure_image(toy, toy.profile("smoke"), again.append) == tag
    assert any("up to date" in m for m in again)
    img = docker_runtime.client.images.get(tag)
    assert img.labels["rebench.env"] == "toy_score"


def test_container_is_labelled_and_limited(sandbox, docker_runtime):
    c = sandbox.container
    c.reload()
    assert c.labels["rebench.env"] == "toy_score" and c.labels["rebench.managed"] == "1"
    host = c.attrs["HostConfig"]
    assert host["NanoCpus"] == 1_000_000_000 and host["Memory"] == 256 * 2**20
    assert docker_runtime.find_containers(c.labels["rebench.session"])[0].id == c.id


def test_exec_runs_as_agent_in_the_workspace(sandbox):
    r = sandbox.exec(["sh", "-c", "id -u; id -gn; pwd; cat solution/answer.txt; echo $HOME"])
    assert r.exit_code == 0
    assert r.stdout.split() == ["1000", "agent", "/home/agent", "7", "/home/agent"]
    root = sandbox.exec(["id", "-u"], user="root")
    assert root.stdout.strip() == "0"


def test_protected_is_root_protected_0750_and_unreadable_by_agent(sandbox):
    st = sandbox.exec(["stat", "-c", "%U:%G %a", "/protected", "/protected/secret.txt"], user="root")
    assert st.stdout.split("\n")[0] == "root:protected 750"
    assert st.stdout.split("\n")[1].endswith("640")
    for cmd in (["cat", "/protected/secret.txt"], ["ls", "/protected"], ["sh", "-c", "ln -s /protected/secret.txt s && cat s"]):
        r = sandbox.exec(cmd)
        assert r.exit_code != 0 and "Permission denied" in r.stderr, (cmd, r)
    assert "held-out" in sandbox.exec(["cat", "/protected/secret.txt"], user="root").stdout


def test_workspace_is_the_bind_mounted_session_folder(sandbox):
    sandbox.exec(["sh", "-c", "echo from-container > made.txt"])
    made = sandbox.spec.workspace / "made.txt"
    assert made.read_text() == "from-container\n"
    assert made.stat().st_uid == 1000


def test_copy_in_and_out(sandbox, tmp_path):
    src = tmp_path / "payload"
    src.mkdir()
    (src / "data.txt").write_text("payload")
    sandbox.copy_in(src, "/tmp")
    assert sandbox.exec(["cat", "/tmp/payload/data.txt"]).stdout == "payload"
    out = tmp_path / "out"
    sandbox.copy_out("/tmp/payload", out)
    assert (out / "payload" / "data.txt").read_text() == "payload"


def test_timeout_really_stops_the_command(sandbox):
    t0 = time.monotonic()
    r = sandbox.exec(["sh", "-c", "sleep 600 & sleep 600"], timeout=2)
    assert r.timed_out and r.exit_code == 137 and time.monotonic() - t0 < 15
    ps = sandbox.exec(["ps", "-eo", "args"], user="root")
    assert "sleep 600" not in ps.stdout  # the command and its background child are gone


def test_cancel_stops_the_command(sandbox):
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    t0 = time.monotonic()
    r = sandbox.exec(["sleep", "600"], cancel=cancel)
    assert r.cancelled and time.monotonic() - t0 < 15


def test_memory_limit_kill_is_137(sandbox):
    r = sandbox.exec(["python3", "-c", "b=[]\nwhile True: b.append(bytearray(64*2**20))"], timeout=60)
    assert r.exit_code == 137 and not r.timed_out


def test_a_gpu_profile_on_an_engine_without_gpus_is_refused_before_any_container(docker_runtime, toy, tmp_path, env_copy):
    from rebench_tui.catalog import load_catalog
    from tests.conftest import FIXTURE_ENVS, KNOWN_IMAGES

    if docker_runtime.has_nvidia_runtime():
        pytest.skip("this engine has the NVIDIA runtime")

    def gpu(d):
        t = (d / "environment.toml").read_text().replace('resources = { cpus = 1, memory = "256m" }',
                                                          'resources = { cpus = 1, memory = "256m", gpus = 1 }')
        (d / "environment.toml").write_text(t)

    env = load_catalog(env_copy(FIXTURE_ENVS / "toy_score", gpu), KNOWN_IMAGES).get("toy_score")
    ws = tmp_path / "ws"
    ws.mkdir()
    spec = SandboxSpec("itest-gpu", env, env.profile("smoke"), ws, tmp_path / "state")
    image = docker_runtime.ensure_image(env, spec.profile, lambda m: None)
    with pytest.raises(RuntimeUnavailable) as exc:
        docker_runtime.create(spec, image, lambda m: None)
    text = str(exc.value)
    assert "needs 1 GPU" in text and "gives containers none" in text and "nvidia-ctk" in text and "--profile smoke" in text
    assert "nothing was started" in text
    assert docker_runtime.find_containers("itest-gpu") == []
    # (a device request the engine refuses, with the toolkit set but absent: tests/integration/test_gpu_devices.py)


def test_attach_finds_the_container_again_and_restarts_a_stopped_one(sandbox, docker_runtime):
    sandbox.container.stop(timeout=1)
    again = docker_runtime.attach(sandbox.spec)
    assert again is not None and again.is_running()
    assert again.exec(["cat", "solution/answer.txt"]).stdout.strip() == "7"


def test_numeric_libraries_count_the_containers_cpus_not_the_hosts(sandbox, docker_runtime, docker_client, toy, settings):
    """PyTorch and the BLAS start one thread per host core unless told: in a container given fewer CPUs
    those threads spin against each other. The container says how many (the profile's CPUs, or the
    runtime's setting), the participant's commands see it, and the record keeps it."""
    from rebench_tui.runtime.docker_runtime import DockerRuntime

    expected = docker_runtime.threads or 1  # toy_score's smoke profile has 1 CPU
    seen = sandbox.exec(["sh", "-c", "echo $OMP_NUM_THREADS $MKL_NUM_THREADS $OPENBLAS_NUM_THREADS"]).stdout.split()
    assert seen == [str(expected)] * 3 and sandbox.describe()["cpu_threads"] == expected
    ncpu = int(docker_client.info()["NCPU"])
    smoke = toy.profile("smoke")
    own = DockerRuntime(docker_client, None, settings.images, settings.cache_dir)
    assert own._thread_env(replace(smoke, cpus=26))["OMP_NUM_THREADS"] == str(min(26, ncpu))
    assert own._thread_env(replace(smoke, cpus=0.5))["OMP_NUM_THREADS"] == "1"
    assert own._thread_env(replace(smoke, cpus=None)) == {}  # no limit: the libraries' own choice
    shared = DockerRuntime(docker_client, None, settings.images, settings.cache_dir, threads=3)
    assert shared._thread_env(replace(smoke, cpus=None))["MKL_NUM_THREADS"] == "3"
