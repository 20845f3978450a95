"""The adversarial suite's common part: a real smoke-profile session of a real environment in a
real container, into which each test writes a hostile solution and scores it.

One session per test module (containers cost seconds to start), reset between cases: the
workspace's ``solution/`` goes back to the starting files, then the case writes its own. After
every scoring :func:`check_aftermath` looks for what a hostile solution may have left behind:
participant processes still running, files it wrote where it must not, a changed scorer.
"""

from __future__ import annotations

import functools
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from rebench_tui.catalog import load_catalog
from rebench_tui.config import Settings
from rebench_tui.scoring import Direction
from tests.conftest import KNOWN_IMAGES, ROOT

AGENT_UID = 1000


@dataclass
class Arena:
    """One environment's session, for hostile solutions."""

    session: object
    env: object

    @property
    def workspace(self) -> Path:
        return self.session.workspace

    def reset(self) -> None:
        """Starting solution back in place (owned by the participant)."""
        sol = self.workspace / "solution"
        shutil.rmtree(sol, ignore_errors=True)
        shutil.copytree(self.env.solution_dir, sol)
        chown_tree(sol)

    def write(self, files: dict[str, str | bytes]) -> None:
        """Files relative to the home (``solution/solution.py``), owned by the participant."""
        for rel, content in files.items():
            path = self.workspace / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content.encode() if isinstance(content, str) else content)
            chown_tree(path)

    def root(self, script: str, timeout: float = 30):
        return self.session.sandbox.exec(["sh", "-c", script], user="root", timeout=timeout)

    def agent(self, script: str, timeout: float = 30):
        return self.session.sandbox.exec(["sh", "-c", script], user="agent", timeout=timeout)

    def score(self):
        return self.session.score()


def chown_tree(path: Path) -> None:
    os.chown(path, AGENT_UID, AGENT_UID)
    if path.is_dir():
        for dirpath, dirnames, filenames in os.walk(path):
            for name in dirnames + filenames:
                os.chown(os.path.join(dirpath, name), AGENT_UID, AGENT_UID, follow_symlinks=False)


def arena_fixture(env_id: str):
    """A module-scoped pytest fixture: an :class:`Arena` for ``env_id`` on the smoke profile."""

    @pytest.fixture(scope="module")
    def arena(tmp_path_factory, docker_client):
        from rebench_tui.assets import AssetStore
        from rebench_tui.runtime.docker_runtime import DockerRuntime
        from rebench_tui.session import Session

        client = docker_client  # conftest: skips without an engine, fails under REBENCH_REQUIRE_DOCKER=1
        tmp = tmp_path_factory.mktemp(f"hostile-{env_id}")
        settings = Settings(root=ROOT, sessions_dir=tmp / "sessions")
        env = load_catalog(ROOT / "environments", KNOWN_IMAGES).get(env_id)
        store = AssetStore(Settings().cache_dir)
        if env.manifest.assets is not None:
            store.prepare(env, "smoke", "synthetic")  # a no-op where scripts/engine prepared them already
        rt = DockerRuntime(client, None, settings.images, settings.cache_dir, threads=settings.container_threads)
        s = Session.create(env, "smoke", rt, settings.sessions, asset_store=store)
        a = Arena(s, env)
        try:
            yield a
        finally:
            if s.lock.held:
                s.close()
            s.sandbox.stop(remove=True)

    return arena


def participant_processes(arena: Arena) -> list[str]:
    """Processes of uid 1000 still alive in the container (``pid command`` lines)."""
    r = arena.root("ps -e -o uid=,pid=,args= | awk '$1 == 1000 {print $2, substr($0, index($0,$3))}'")
    return [line for line in r.stdout.splitlines() if line.strip()]


def check_aftermath(arena: Arena, protected_listing_before: str) -> None:
    """Nothing the participant started outlives the scoring; /protected is as it was."""
    left = participant_processes(arena)
    assert not left, f"participant processes outlived the scoring: {left}"
    assert protected_listing(arena) == protected_listing_before, "/protected changed during the scoring"


def protected_listing(arena: Arena) -> str:
    return arena.root("find /protected -path /protected/assets -prune -o -printf '%p %s %m %u\\n' | sort").stdout


def assert_no_fake_best(record, honest: float, direction: Direction, slack: float = 0.0) -> None:
    """A hostile scoring ends as NaN with a reason, or no better than an honest one."""
    if not math.isfinite(record.score):
        assert record.message, "a NaN scoring must say why"
        return
    if direction is Direction.LOWER:
        assert record.score >= honest - slack, f"hostile score {record.score} beats honest {honest}"
    else:
        assert record.score <= honest + slack, f"hostile score {record.score} beats honest {honest}"


def scored_once(run):
    """A module's ``run_hostile(arena, name, ...)``, scoring each hostile file once: later tests that
    look at the same file get the first record (a CPU scoring takes seconds to minutes here)."""
    records: dict = {}

    @functools.wraps(run)
    def once(arena, name, *args, **kwargs):
        if name not in records:
            records[name] = run(arena, name, *args, **kwargs)
        return records[name]

    return once
