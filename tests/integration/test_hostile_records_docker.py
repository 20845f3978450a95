"""Hostile inputs against the records in a real container (the hostile-input suite): a
process of the participant's killed by the kernel for memory is said in the record, from the
container's cgroup memory events (Docker's ``OOMKilled`` stays false: the killed process was not
the container's first). Failed on the code before this test: nothing in the record said it."""

from __future__ import annotations

import time

import pytest

from rebench_tui.session import Session
from rebench_tui.trajectory.audit import read_entries
from rebench_tui.trajectory.verify import verify

pytestmark = pytest.mark.docker


def oom_rows(s: Session) -> list[tuple[str, dict]]:
    return [(r["content"]["content"][0], r["content"]["content"][1]) for r in read_entries(s.folder / "audit.jsonl")
            if r["content"].get("attributes", {}).get("title") == "memory"]


def test_an_oom_kill_inside_the_container_is_recorded(fixture_catalog, docker_runtime, settings):
    s = Session.create(fixture_catalog.get("toy_score"), "smoke", docker_runtime, settings.sessions)  # 256 MB
    try:
        s.start_capture(interval=3600)  # collected explicitly below
        hog = s.sandbox.exec(["python3", "-c", "x = bytearray(2 * 1024**3)"], user="agent", timeout=120)
        assert hog.exit_code != 0  # killed (137 from the shell's view), not a MemoryError at 2 GB
        rows: list[tuple[str, dict]] = []
        deadline = time.monotonic() + 20
        while not rows and time.monotonic() < deadline:
            s.collect_commands()
            rows = oom_rows(s)
            time.sleep(0.3)
        assert rows, "no row says the kernel killed a process for memory"
        text, facts = rows[0]
        assert facts["event"] == "oom_kill" and facts["killed"] >= 1 and facts["oom_kill_total"] >= 1
        assert "out of memory" in text and "memory" in facts["source"]
        attrs = s.sandbox.container.attrs["State"]
        assert attrs.get("OOMKilled") is False  # what Docker says: why the record must say it
        s.close()
        assert verify(s.folder).ok
    finally:
        if s.lock.held:
            s.close()
        s.sandbox.stop(remove=True)
