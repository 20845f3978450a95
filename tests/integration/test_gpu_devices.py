"""GPUs without the NVIDIA container toolkit, in real containers on the real engine.

No GPU exists here, so stand-ins take its place behind the same interface: character device nodes
named like the driver's (made with mknod, the numbers of /dev/null), in a folder the hosts file
names as the host's ``device_dir``, and a driver folder whose ``bin/nvidia-smi`` prints one row per
GPU node the container it runs in can see. Everything else is the real path: the hosts file, the
look at the host from a container, doctor, the GPU claims, the containers' devices, mounts and
environment, the linker cache set up inside, and the participant's view.
"""

from __future__ import annotations

import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

import pytest

from rebench_tui.catalog import load_catalog
from rebench_tui.doctor import Doctor
from rebench_tui.errors import RuntimeUnavailable
from rebench_tui.hosts import Host, load_hosts
from rebench_tui.runtime.base import LABEL_ENV, LABEL_PROFILE
from rebench_tui.runtime.gpus import query_fields_known
from rebench_tui.session import Session
from tests.conftest import FIXTURE_ENVS, KNOWN_IMAGES

pytestmark = pytest.mark.docker

GPU_PROFILE = '''
[profiles.gpu]
base_image = "base"
start_score = 10.0
reference_score = 2.0
measured = "test fixture"
score_timeout = "5s"
resources = { cpus = 1, memory = "256m", gpus = 1 }
'''

# Stands in for the driver's nvidia-smi: one GPU per /dev/nvidiaN the container has (the real one
# lists the GPUs whose nodes it can open). Like the real one it refuses a --query-gpu field that a
# real driver does not know (KNOWN: the fields an H200's driver listed), and prints `-q`'s blocks
# with each GPU's UUID and minor number.
KNOWN = sorted(query_fields_known((Path(__file__).resolve().parents[1] / "fixtures" / "nvidia" /
                                   "h200-help-query-gpu.txt").read_text()))
FAKE_SMI = r'''#!/bin/sh
known=" @KNOWN@ "
gpus() { for d in /dev/nvidia[0-9]*; do [ -c "$d" ] && echo "${d#/dev/nvidia}"; done; }
case "$1" in
  -q)
    for n in $(gpus); do
      echo "GPU 00000000:0$n:00.0"
      echo "    GPU UUID                              : GPU-00000000-0000-0000-0000-00000000000$n"
      echo "    Minor Number                          : $n"
    done
    exit 0 ;;
  --query-gpu=*)
    for f in $(echo "${1#--query-gpu=}" | tr , ' '); do
      case "$known" in *" $f "*) ;; *) echo "Field \"$f\" is not a valid field to query."; exit 2 ;; esac
    done ;;
esac
i=0
for n in $(gpus); do
  echo "$i, GPU-00000000-0000-0000-0000-00000000000$n, Stand-in GPU, 81559, 0"
  i=$((i + 1))
done
'''.replace("@KNOWN@", " ".join(KNOWN))


@dataclass
class FakeHost:
    root: Path
    dev: Path
    driver: Path
    hosts_file: Path

    @property
    def host(self) -> Host:
        return load_hosts(self.hosts_file)[0]


def _write_hosts(f: Path, dev: Path, driver: Path | None, mode: str = "auto") -> None:
    f.write_text(f'[[host]]\nlabel = "fake-gpus"\nurl = "unix:///var/run/docker.sock"\ngpu_mode = "{mode}"\n'
                 f'device_dir = "{dev}"\n' + (f'driver_dir = "{driver}"\n' if driver else ""))


@pytest.fixture
def fake_gpu_host(tmp_path, monkeypatch, docker_client, settings):
    if "nvidia" in (docker_client.info().get("Runtimes") or {}):
        pytest.skip("this engine has the NVIDIA runtime: auto mode picks the toolkit there")
    root = tmp_path / "host"
    dev, driver = root / "dev", root / "nvidia"
    dev.mkdir(parents=True)
    try:
        for name in ("nvidia2", "nvidia5", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"):
            os.mknod(dev / name, 0o666 | stat.S_IFCHR, os.makedev(1, 3))
    except PermissionError:
        pytest.skip("making stand-in device nodes needs root (mknod)")
    (driver / "bin").mkdir(parents=True)
    (driver / "lib64").mkdir()
    (driver / "bin" / "nvidia-smi").write_text(FAKE_SMI)
    (driver / "bin" / "nvidia-smi").chmod(0o755)
    (driver / "lib64" / "libcuda.so.1").write_bytes(b"")
    for p in (tmp_path, root, driver, driver / "bin", driver / "lib64"):
        p.chmod(0o755)
    f = tmp_path / "hosts.toml"
    _write_hosts(f, dev, driver)
    settings.hosts_file = f                         # the tests' settings, and the CLI's (from the environment)
    monkeypatch.setenv("REBENCH_HOSTS_FILE", str(f))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    return FakeHost(root, dev, driver, f)


@pytest.fixture
def gpu_env(env_copy):
    def add_gpu_profile(d: Path) -> None:
        with (d / "environment.toml").open("a") as fh:
            fh.write(GPU_PROFILE)

    return load_catalog(env_copy(FIXTURE_ENVS / "toy_score", add_gpu_profile), KNOWN_IMAGES).get("toy_score")


def _gpu_containers(runtime) -> set[str]:
    """This file's sessions' containers: the rest of the suite starts and removes its own beside it."""
    return {c.id for c in runtime.find_containers()
            if c.labels.get(LABEL_ENV) == "toy_score" and c.labels.get(LABEL_PROFILE) == "gpu"}


@pytest.fixture
def open_sessions():
    made: list[Session] = []
    yield made
    for s in made:
        if s.lock.held:
            s.close()
        s.sandbox.stop(remove=True)


def test_doctor_says_devices_mode_and_why_and_lists_the_gpus(fake_gpu_host, settings, gpu_env):
    found = {f.check: f for f in Doctor(settings, gpu_env, "gpu").run()}
    mode, gpus = found["GPU mode"], found["GPUs"]
    d = fake_gpu_host.dev
    assert mode.status == "ok", mode
    assert mode.detail.startswith("devices: no nvidia runtime on the engine (no NVIDIA Container Toolkit)")
    assert f"device nodes passed in: {d}/nvidia2, {d}/nvidia5, {d}/nvidiactl, {d}/nvidia-uvm, {d}/nvidia-uvm-tools" in mode.detail
    assert f"driver from {fake_gpu_host.driver} (mounted read-only at /usr/local/nvidia)" in mode.detail
    assert gpus.status == "ok" and "2 of 2 free (0: Stand-in GPU 80 GiB (free), 1: Stand-in GPU 80 GiB (free))" in gpus.detail


def test_each_session_gets_its_own_gpu_node_the_driver_and_nothing_more(fake_gpu_host, docker_runtime, settings, gpu_env,
                                                                        open_sessions):
    docker_runtime.host_config = fake_gpu_host.host
    d = fake_gpu_host.dev

    def start() -> Session:
        s = Session.create(gpu_env, "gpu", docker_runtime, settings.sessions)
        open_sessions.append(s)
        return s

    a = start()
    attrs = a.sandbox.container.attrs
    devices = {(x["PathOnHost"], x["PathInContainer"], x["CgroupPermissions"]) for x in attrs["HostConfig"]["Devices"]}
    assert devices == {(f"{d}/{n}", f"/dev/{n}", "rwm") for n in ("nvidia2", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")}
    driver = [m for m in attrs["Mounts"] if m["Destination"] == "/usr/local/nvidia"]
    assert [(m["Source"], m["RW"]) for m in driver] == [(str(fake_gpu_host.driver), False)]
    env = dict(e.split("=", 1) for e in attrs["Config"]["Env"])
    assert env["LD_LIBRARY_PATH"] == "/usr/local/nvidia/lib64:/usr/local/nvidia/lib"
    assert env["PATH"].startswith("/usr/local/nvidia/bin:/usr/local/sbin:")  # the image's PATH after the driver's tools
    assert not attrs["HostConfig"].get("DeviceRequests")

    # the participant's view: exactly those nodes, the driver's nvidia-smi on PATH, the linker told
    seen = a.sandbox.exec(["sh", "-c", "ls /dev | grep nvidia; nvidia-smi; "
                                       "cat /etc/ld.so.conf.d/000-rebench-nvidia.conf; touch /usr/local/nvidia/x"])
    assert seen.stdout.splitlines() == ["nvidia-uvm", "nvidia-uvm-tools", "nvidia2", "nvidiactl",
                                        "0, GPU-00000000-0000-0000-0000-000000000002, Stand-in GPU, 81559, 0",
                                        "/usr/local/nvidia/lib64", "/usr/local/nvidia/lib"], seen
    assert "Read-only file system" in seen.stderr            # the driver folder cannot be changed from inside
    assert a.meta.metadata["sandbox"]["gpu_mode"] == "devices" and a.meta.metadata["sandbox"]["gpu_devices"] == ["/dev/nvidia2"]

    b = start()
    b_nodes = [x["PathInContainer"] for x in b.sandbox.container.attrs["HostConfig"]["Devices"]]
    assert "/dev/nvidia5" in b_nodes and "/dev/nvidia2" not in b_nodes
    held = {g.node: g.claimed_by for g in docker_runtime.gpu_inventory()}
    assert held == {2: f"rebench-{a.id}", 5: f"rebench-{b.id}"}

    with pytest.raises(RuntimeUnavailable) as exc:
        start()
    assert f"has 0 of 2 free: 0 (held by rebench-{a.id}), 1 (held by rebench-{b.id})" in exc.value.what
    assert len(open_sessions) == 2 and len(list(settings.sessions.iterdir())) == 2  # the refused one left no folder

    a.close()
    a.sandbox.stop(remove=True)
    open_sessions.remove(a)
    c = start()
    assert "/dev/nvidia2" in [x["PathInContainer"] for x in c.sandbox.container.attrs["HostConfig"]["Devices"]]


def test_a_rehearsal_on_fewer_gpus_holds_that_many_and_says_so_and_a_finished_session_frees_them(
        fake_gpu_host, docker_runtime, settings, gpu_env, open_sessions, tmp_path):
    """A two-GPU profile on a host with one GPU free: refused with the rehearsal offered; with
    ``--gpus 1`` it holds one node and its record, status line and resume say so. Finishing and
    closing stops the container, so its GPU is free for the next session at once."""
    from rebench_tui.catalog import Rehearsal

    import shutil

    root = tmp_path / "two-gpu-envs"
    shutil.copytree(FIXTURE_ENVS / "toy_score", root / "toy_score", ignore=shutil.ignore_patterns("__pycache__"))
    with (root / "toy_score" / "environment.toml").open("a") as fh:
        fh.write(GPU_PROFILE.replace("gpus = 1", "gpus = 2"))
    env = load_catalog(root, KNOWN_IMAGES).get("toy_score")
    docker_runtime.host_config = fake_gpu_host.host
    other = Session.create(gpu_env, "gpu", docker_runtime, settings.sessions)  # holds one of the two
    open_sessions.append(other)
    with pytest.raises(RuntimeUnavailable) as exc:
        Session.create(env, "gpu", docker_runtime, settings.sessions)
    assert "needs 2 free GPU(s)" in exc.value.what and "start ENV --gpus 1" in exc.value.fix

    s = Session.create(env, "gpu", docker_runtime, settings.sessions, rehearsal=Rehearsal(gpus=1))
    open_sessions.append(s)
    nodes = [x["PathInContainer"] for x in s.sandbox.container.attrs["HostConfig"]["Devices"] if x["PathInContainer"][-1].isdigit()]
    assert len(nodes) == 1 and s.meta.gpus == 1 and s.sandbox.describe()["gpus"] == 1
    assert s.status_line().endswith("GPUs 1 of 2 (rehearsal)")
    started = json.loads((s.folder / "audit.jsonl").read_text().splitlines()[0])
    assert "on 1 GPU(s) instead of 2 (a rehearsal)" in started["content"]["content"][0]
    s.close()
    again = Session.open(s.folder, env, docker_runtime)  # resumed: still the rehearsal, not the profile's 2
    assert again.sandbox.spec.profile.gpus == 1 and again.status_line().endswith("(rehearsal)")
    again.submit("")
    again.close()
    again.sandbox.container.reload()
    assert again.sandbox.container.status == "exited"   # finished and closed: the GPU is let go
    held = {g.node: g.claimed_by for g in docker_runtime.gpu_inventory()}
    assert list(held.values()).count(None) == 1 and f"rebench-{other.id}" in held.values()
    assert (again.folder / "workspace").is_dir() and again.meta.status == "finished"   # the records and home stay


def test_devices_mode_without_nodes_or_driver_is_refused_naming_what_is_missing(fake_gpu_host, tmp_path, docker_runtime,
                                                                                settings, gpu_env):
    empty = tmp_path / "no-dev"
    empty.mkdir()
    _write_hosts(fake_gpu_host.hosts_file, empty, None, mode="devices")
    found = {f.check: f for f in Doctor(settings, gpu_env, "gpu").run()}
    mode = found["GPU mode"]
    assert mode.status == "fail" and 'gpu_mode = "devices" (hosts.toml: fake-gpus)' in mode.detail
    assert f"no {empty}/nvidiaN device node" in mode.detail and f"no {empty}/nvidiactl" in mode.detail
    assert "the host's `ldconfig -p` lists no libcuda.so.1" in mode.detail   # this machine's real ldconfig cache
    docker_runtime.host_config = load_hosts(fake_gpu_host.hosts_file)[0]
    before = _gpu_containers(docker_runtime)
    with pytest.raises(RuntimeUnavailable) as exc:
        Session.create(gpu_env, "gpu", docker_runtime, settings.sessions)
    assert "is set to give them as device nodes" in exc.value.what and exc.value.kept.startswith("nothing was started")
    assert _gpu_containers(docker_runtime) == before


def test_toolkit_forced_on_an_engine_without_it_fails_at_start_and_leaves_nothing(fake_gpu_host, docker_runtime, settings,
                                                                                  gpu_env, tmp_path):
    _write_hosts(fake_gpu_host.hosts_file, fake_gpu_host.dev, None, mode="toolkit")
    docker_runtime.host_config = load_hosts(fake_gpu_host.hosts_file)[0]
    found = {f.check: f for f in Doctor(settings, gpu_env, "gpu").run()}
    assert found["GPU mode"].status == "fail" and "the engine lists no nvidia runtime" in found["GPU mode"].detail
    before = _gpu_containers(docker_runtime)
    sessions = tmp_path / "s"
    with pytest.raises(RuntimeUnavailable) as exc:
        Session.create(gpu_env, "gpu", docker_runtime, sessions)
    text = str(exc.value)
    # the engine's own refusal of the device request (what the H200 without the toolkit says), cleaned up
    assert "could not select device driver" in text and "toolkit mode" in text and "removed" in text
    assert 'gpu_mode = "devices"' in text
    assert _gpu_containers(docker_runtime) == before and list(sessions.iterdir()) == []


def test_hosts_lists_the_mode_and_the_free_gpus(fake_gpu_host, monkeypatch):
    from click.testing import CliRunner

    from rebench_tui.cli import main

    monkeypatch.setenv("COLUMNS", "200")
    result = CliRunner().invoke(main, ["hosts"])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.output.splitlines() if "fake-gpus" in line)
    assert "answers" in row and "devices" in row and "2 of 2" in row


def test_an_image_the_host_provides_is_used_as_it_is_and_a_missing_one_is_named(tmp_path, monkeypatch, docker_client,
                                                                                docker_runtime, settings, fixture_catalog):
    """Offline GPU hosts bring their own CUDA image (scripts/gpu-e2e builds one from the H200's own
    root): hosts.toml maps the recipe name to it, and nothing is built or downloaded for it."""
    from rebench_tui.errors import RebenchError

    base = docker_client.images.get(docker_runtime.image_tag("base"))
    base.tag("rebench-test/provided-base", "itest")
    try:
        f = tmp_path / "hosts.toml"
        f.write_text('[[host]]\nlabel = "offline"\nurl = "unix:///var/run/docker.sock"\n'
                     'images = { base = "rebench-test/provided-base:itest", torch-cpu = "rebench-test/absent:1" }\n')
        settings.hosts_file = f
        monkeypatch.delenv("DOCKER_HOST", raising=False)
        docker_runtime.host_config = load_hosts(f)[0]
        said: list[str] = []
        assert docker_runtime.builder(said.append).ensure("base") == "rebench-test/provided-base:itest"
        assert said == ["base: using rebench-test/provided-base:itest, provided by the host (hosts.toml)"]
        env = fixture_catalog.get("toy_score")
        tag = docker_runtime.ensure_image(env, env.profile("smoke"), said.append)
        parent = docker_client.images.get(tag).attrs["Parent"] or ""
        history = [h.get("Id") for h in docker_client.images.get(tag).history()]
        assert base.id in history or parent == base.id
        with pytest.raises(RebenchError) as exc:
            docker_runtime.builder(said.append).ensure("torch-cpu")
        assert "provides base image 'torch-cpu' as rebench-test/absent:1, but its engine has no such image" in exc.value.what
        found = {x.check: x for x in Doctor(settings, env, "smoke").run()}
        assert found["base image"].status == "ok" and "provided by the host" in found["base image"].detail
    finally:
        docker_client.images.remove("rebench-test/provided-base:itest")


def test_driver_libraries_found_with_ldconfig_are_mounted_one_by_one(fake_gpu_host, docker_runtime, settings, gpu_env,
                                                                    open_sessions):
    """Without driver_dir, what the host's `ldconfig -p` lists is mounted file by file. This
    machine's ldconfig cache has no NVIDIA driver, so the look's listing is replaced by one naming
    the stand-in files (the only stand-in here); the decision, the mounts and the container are real."""
    from rebench_tui.runtime.gpu_host import decide, parse_look

    d, drv = fake_gpu_host.dev, fake_gpu_host.driver
    listing = "".join(f"node {n}\n" for n in ("nvidia2", "nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"))
    listing += f"ld \tlibcuda.so.1 (libc6,x86-64) => {drv}/lib64/libcuda.so.1\ntool nvidia-smi {drv}/bin/nvidia-smi\n"
    support = decide("auto", False, parse_look(listing), device_dir=str(d))
    assert support.usable and "1 libraries found with the host's `ldconfig -p` (libcuda.so.1) and nvidia-smi" in support.why
    docker_runtime._gpu_support = support
    s = Session.create(gpu_env, "gpu", docker_runtime, settings.sessions)
    open_sessions.append(s)
    mounts = {m["Destination"]: (m["Source"], m["RW"]) for m in s.sandbox.container.attrs["Mounts"]}
    assert mounts["/usr/local/nvidia/lib64/libcuda.so.1"] == (f"{drv}/lib64/libcuda.so.1", False)
    assert mounts["/usr/local/nvidia/bin/nvidia-smi"] == (f"{drv}/bin/nvidia-smi", False)
    seen = s.sandbox.exec(["sh", "-c", "cd /usr/local/nvidia/lib64 && ls && readlink libcuda.so && nvidia-smi"])
    # libcuda.so (Triton links its launcher with -lcuda) is made beside the soname in the container
    assert seen.stdout.splitlines() == ["libcuda.so", "libcuda.so.1", "libcuda.so.1",
                                        "0, GPU-00000000-0000-0000-0000-000000000002, Stand-in GPU, 81559, 0"], seen
