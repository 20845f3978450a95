"""The finish's recount in a real container: the leading attempt's files go back into the
bind-mounted home, the scorer scores them there, and the participant's final files come back,
still the participant's."""

from __future__ import annotations

import pytest

from rebench_tui.catalog import load_catalog
from rebench_tui.session import Session
from rebench_tui.store import Store
from rebench_tui.trajectory.verify import verify
from tests.conftest import KNOWN_IMAGES
from tests.unit.test_counting_rule import farm_env

pytestmark = pytest.mark.docker


def test_the_recount_scores_the_leading_attempt_in_the_container(docker_runtime, settings, env_copy):
    env = load_catalog(farm_env(env_copy), KNOWN_IMAGES).get("toy_score")
    s = Session.create(env, "smoke", docker_runtime, settings.sessions, store=Store(settings.sessions))
    try:
        s.start_watching()
        notes = s.workspace / "solution" / "notes.txt"
        (s.workspace / "solution" / "answer.txt").write_text("noisy")
        for i in range(4):  # draws 3, 1, 5, 2: the second edit leads with its single draw
            # the participant's edit, made in the container as the participant
            s.sandbox.exec(["sh", "-c", f"echo 'edit {i}' > solution/notes.txt"], user="agent", timeout=30,
                           workdir=s.sandbox.home)
            s.score()
        s.sandbox.exec(["sh", "-c", "echo late > solution/late.txt"], user="agent", timeout=30, workdir=s.sandbox.home)
        s.submit()  # the final scoring (a new attempt: late.txt) draws 4; attempt 2 (draw 1) leads
        recount = [r for r in s.core.history if r.recount]
        assert {r.message["notes"] for r in recount} == {"edit 1\n"}  # what the scorer read in the container
        assert [r.score for r in recount] == [0.5, 3.0, 1.0] and s.meta.final_score == 1.0
        assert notes.read_text() == "edit 3\n"
        assert (s.workspace / "solution" / "late.txt").read_text() == "late\n"  # removed for the recount, then back
        owners = s.sandbox.exec(["stat", "-c", "%U", "solution/notes.txt", "solution/late.txt"], user="root", timeout=30,
                                workdir=s.sandbox.home)
        assert owners.stdout.split() == ["agent", "agent"]  # still the participant's files
        s.close()
        report = verify(s.folder)
        assert report.ok, [str(f) for f in report.findings if not f.ok]
    finally:
        if s.lock.held:
            s.close()
        s.sandbox.stop(remove=True)
