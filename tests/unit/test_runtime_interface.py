"""What callers ask of a runtime is on the interface: container lookup, home volumes, the image
builder, remoteness, the link's ping. Checked on the local runtime and on the real Docker engine."""

import re
import time
import uuid
from pathlib import Path

import pytest

import rebench_tui
from rebench_tui.errors import RebenchError
from rebench_tui.runtime.base import LABEL_MANAGED, LABEL_SESSION, Runtime
from rebench_tui.runtime.images import ImageBuilder
from rebench_tui.runtime.local import LocalRuntime
from rebench_tui.runtime.remote import LABEL_VOLUME

PKG = Path(rebench_tui.__file__).parent


def test_local_runtime_answers_every_question_without_containers():
    rt: Runtime = LocalRuntime()
    assert rt.remote is False
    assert rt.find_containers("nope") == []
    assert rt.find_containers() == []
    assert rt.remove_session_volumes("nope") == 0
    with pytest.raises(RebenchError) as info:
        rt.builder(lambda _m: None)
    assert "local runtime builds no images" in str(info.value)
    assert "rebench-tui images build" in (info.value.fix or "")


def test_docker_find_containers_sees_a_session_s_stopped_container(docker_runtime, docker_client):
    sid = f"iface-{uuid.uuid4().hex[:8]}"
    assert docker_runtime.find_containers(sid) == []
    c = docker_client.containers.create("rebench-env/toy_score:smoke", ["true"],
                                        labels={LABEL_MANAGED: "1", LABEL_SESSION: sid})
    try:
        found = docker_runtime.find_containers(sid)
        assert [x.id for x in found] == [c.id]  # created, never started: found all the same
        assert c.id in {x.id for x in docker_runtime.find_containers()}
    finally:
        c.remove(force=True)
    assert docker_runtime.find_containers(sid) == []


def test_docker_remove_session_volumes_only_where_the_engine_is_remote(docker_runtime, docker_client):
    sid = f"iface-{uuid.uuid4().hex[:8]}"
    vol = docker_client.volumes.create(f"rebench-test-{sid}", labels={LABEL_SESSION: sid, LABEL_VOLUME: "home"})
    try:
        assert docker_runtime.remote is False
        assert docker_runtime.remove_session_volumes(sid) == 0  # a local engine's homes are bind mounts
        assert docker_client.volumes.list(filters={"name": vol.name})
        docker_runtime.remote = True  # as on an ssh:// engine, where the home lives in this volume
        assert docker_runtime.remove_session_volumes(sid) == 1
        assert not docker_client.volumes.list(filters={"name": vol.name})
    finally:
        for v in docker_client.volumes.list(filters={"name": vol.name}):
            v.remove(force=True)


def test_docker_builder_is_typed(docker_runtime):
    assert isinstance(docker_runtime.builder(lambda _m: None), ImageBuilder)


def test_docker_ping_answers_and_fails_fast_where_nothing_listens(docker_runtime, settings):
    import docker

    from rebench_tui.runtime.docker_runtime import DockerRuntime

    docker_runtime.ping(timeout=3)
    dead = DockerRuntime(docker.DockerClient(base_url="tcp://127.0.0.1:9", version="1.41"), "tcp://127.0.0.1:9",
                         settings.images, settings.cache_dir)
    t0 = time.monotonic()
    with pytest.raises(Exception):
        dead.ping(timeout=1)
    assert time.monotonic() - t0 < 5


def test_no_module_reaches_a_runtime_around_its_interface():
    """No getattr/hasattr on a runtime, no ``type: ignore[attr-defined]``, no private SDK calls."""
    pattern = re.compile(r"(getattr|hasattr)\((rt|runtime|self\.runtime|self\.rt)\b|type: ignore\[attr-defined\]"
                         r"|\bapi\._[a-z]")
    offenders = [f"{p.relative_to(PKG)}:{n}: {line.strip()}" for p in PKG.rglob("*.py")
                 for n, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not offenders, offenders


def test_forbidden_link_targets_are_on_the_sandbox_interface(tmp_path):
    """Whether a scoring guards links is a typed question of any sandbox: the local one (nothing
    hidden from the participant) answers none, the Docker one names the scorer's protected folder."""
    from rebench_tui.runtime.base import Sandbox
    from rebench_tui.runtime.docker_runtime import PROTECTED, DockerSandbox
    from rebench_tui.runtime.local import LocalSandbox

    assert Sandbox.forbidden_link_targets == ()
    assert LocalSandbox.forbidden_link_targets == () and not LocalSandbox.isolated
    assert DockerSandbox.isolated and PROTECTED in DockerSandbox.forbidden_link_targets
    assert "/proc" in DockerSandbox.forbidden_link_targets
