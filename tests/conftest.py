"""Shared fixtures: real folders, real SQLite, a real Docker engine where the test asks for one.

Docker tests skip when no engine answers, unless REBENCH_REQUIRE_DOCKER=1 (CI sets it), in which
case they fail: CI must never go green by skipping its integration tests.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from rebench_tui.catalog import load_catalog
from rebench_tui.clock import FakeClock
from rebench_tui.config import Settings
from rebench_tui.runtime.images import Recipes

ROOT = Path(__file__).resolve().parent.parent
# Scorers run by hand (a test's subprocess on this machine) find their helpers here, as the local
# runtime's scorers do; containers have their own copy at /opt/rebench/lib.
os.environ.setdefault("REBENCH_SCORER_LIB", str(ROOT / "rebench_tui" / "runtime" / "lib"))
FIXTURE_ENVS = ROOT / "tests" / "fixtures" / "environments"
IMAGES = ROOT / "images"
KNOWN_IMAGES = Recipes.load(IMAGES).names


# Module fixtures that run an environment's own prepare.py (and its scorer on the result) at smoke
# size: tens of seconds each here, so every test that uses one is ``slow``.
SLOW_FIXTURES = {"test_env_fix_embedding.py": "assets", "test_env_nanogpt_chat_rl.py": "prepared",
                 "test_env_optimize_llm_foundry.py": "prepared", "test_env_restricted_mlm.py": "prepared",
                 "test_env_small_scaling_law.py": "smoke_assets"}


def pytest_configure(config):
    """Tests start with no terminal size in the environment, however pytest runs (pytest-xdist's
    workers start with COLUMNS=80): rich fixes a console's width from COLUMNS when the console is
    made, and the CLI makes its consoles on import, before any test can set a width of its own."""
    for name in ("COLUMNS", "LINES"):
        os.environ.pop(name, None)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups (it names each test by its group)
def pytest_collection_modifyitems(config, items):
    """A test that asks for the engine (``docker_client``, directly or through another fixture) is a
    ``docker`` test whether or not its module says so, and one that uses a fixture of SLOW_FIXTURES
    is ``slow``: the fast tier (``-m "not docker and not slow"``) selects neither, so it needs no
    engine, no images and no prepared assets, and takes minutes.

    Under pytest-xdist (``--dist loadgroup``, as scripts/test runs it) a module's tests stay in one
    worker, as its module fixtures (a container, a trained model) are made once per process; a
    test that names an ``xdist_group`` of its own goes where that group goes."""
    for item in items:
        if not item.get_closest_marker("xdist_group"):
            item.add_marker(pytest.mark.xdist_group(_default_group(item)))
        names = getattr(item, "fixturenames", ())
        if "docker_client" in names and not item.get_closest_marker("docker"):
            item.add_marker(pytest.mark.docker)
        if SLOW_FIXTURES.get(item.path.name) in names and not item.get_closest_marker("slow"):
            item.add_marker(pytest.mark.slow)
    if _xdist_worker(config):
        # Groups with a slow or Docker test go out first, so the quick ones fill the gaps at the end
        # instead of a long group finishing alone. (Every worker collects, and sorts, the same way.)
        heavy = {group_of(i) for i in items if i.get_closest_marker("docker") or i.get_closest_marker("slow")}
        items.sort(key=lambda i: group_of(i) not in heavy)


def pytest_collection_finish(session):
    """Under ``--dist loadgroup`` every test must carry its group in its name by now, or pytest-xdist
    hands a module's tests to different processes (each making the module's fixtures again)."""
    if _xdist_worker(session.config) and getattr(session.config.option, "dist", "no") == "loadgroup":
        loose = [i.nodeid for i in session.items if "@" not in i.nodeid]
        if loose:
            raise pytest.UsageError(f"{len(loose)} tests have no xdist group, e.g. {loose[0]}")


def _xdist_worker(config) -> bool:
    """This process is a pytest-xdist worker (not a pytest a test starts, which inherits its environment)."""
    return hasattr(config, "workerinput")


def _default_group(item) -> str:
    """The test's module; the modules that drive the engine over the loopback sshd share one group:
    side by side, their ssh logins queue on the login shell's start-up (a minute each at worst)."""
    if item.path.name.startswith("test_remote_"):
        return "ssh-loopback"
    return item.path.relative_to(ROOT).as_posix()


def group_of(item) -> str:
    mark = item.get_closest_marker("xdist_group")
    return mark.kwargs.get("name") or mark.args[0]


@pytest.fixture
def fake_clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def catalog():
    """The shipped environments (test_catalog checks that none has a problem)."""
    return load_catalog(ROOT / "environments", KNOWN_IMAGES)


@pytest.fixture
def fixture_catalog():
    cat = load_catalog(FIXTURE_ENVS, KNOWN_IMAGES)
    assert not cat.problems, cat.problems
    return cat


@pytest.fixture
def env_copy(tmp_path):
    """Copy an environment folder into a scratch catalog so a test can change it (environments are data)."""

    def make(src: Path, edit=None) -> Path:
        root = tmp_path / "envs"
        dest = root / src.name
        shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
        if edit:
            edit(dest)
        return root

    return make


@pytest.fixture
def settings(tmp_path) -> Settings:
    return Settings(root=ROOT, sessions_dir=tmp_path / "sessions")  # the cache (root fs, wheels) is shared


def _docker_client():
    try:
        import docker

        client = docker.from_env(timeout=30)
        client.ping()
        return client
    except Exception as exc:  # noqa: BLE001
        return exc


@pytest.fixture(scope="session")
def docker_client():
    client = _docker_client()
    if isinstance(client, Exception):
        if os.environ.get("REBENCH_REQUIRE_DOCKER") == "1":
            pytest.fail(f"REBENCH_REQUIRE_DOCKER=1 but no Docker engine answers: {client}")
        pytest.skip(f"no Docker engine: {client}")
    return client


@pytest.fixture
def docker_runtime(docker_client, settings):
    from rebench_tui.runtime.docker_runtime import DockerRuntime

    rt = DockerRuntime(docker_client, None, settings.images, settings.cache_dir, threads=settings.container_threads)
    made: list[str] = []
    create = rt.create

    def tracking_create(spec, image, progress):
        made.append(spec.session_id)
        return create(spec, image, progress)

    rt.create = tracking_create  # type: ignore[method-assign]
    yield rt
    # Every test cleans up after itself; anything left is a bug the test reports, then removed.
    # Only this test's own sessions are looked at: other work may share the engine meanwhile.
    left = [c for sid in made for c in rt.find_containers(sid)]
    for c in left:
        c.remove(force=True)
    assert not left, f"containers left behind: {[c.name for c in left]}"


@pytest.fixture
def toy_session(tmp_path, fake_clock):
    """Make sessions of the toy fixture environment on the local runtime with the fake clock."""
    from rebench_tui.runtime.local import LocalRuntime
    from rebench_tui.session import Session
    from rebench_tui.store import Store

    made = []

    def make(env_root: Path = FIXTURE_ENVS, **kw):
        env = load_catalog(env_root, KNOWN_IMAGES).get("toy_score")
        s = Session.create(env, "smoke", LocalRuntime(), tmp_path / "sessions", clock=fake_clock,
                           store=Store(tmp_path / "sessions"), **kw)
        made.append(s)
        return s

    yield make
    for s in made:
        s.lock.release()
