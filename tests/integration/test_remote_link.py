"""Link loss over ssh://: the real sshd is stopped for 10 s mid-session, then started again.

The screen (through Pilot) says so within seconds, scoring is refused while the link is down,
what happened in the container meanwhile (a file written, a command typed in a shell opened
on the engine's host) is recorded once when the link returns, and working time keeps the
README's rule: it runs on this machine, link or no link.
"""

from __future__ import annotations

import asyncio
import subprocess
import time

import pytest
from textual.widgets import Static

from rebench_tui.errors import SessionError
from rebench_tui.session import Session
from rebench_tui.trajectory.audit import read_entries, validate_file
from rebench_tui.trajectory.verify import verify
from rebench_tui.tui.app import RebenchApp
from rebench_tui.tui.widgets.score_history import ScoreTable
from tests.integration.test_remote_session import commands, event_rows, file_rows
from tests.sshd import remote_runtime, sshd  # noqa: F401 - fixtures

pytestmark = pytest.mark.docker

SIZE = (160, 45)
OUTAGE_S = 10.0


async def wait_for(pilot, pred, limit: float = 60.0) -> bool:
    """Give the app time until ``pred()`` holds (a bound on waiting, not a timing assertion)."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        if pred():
            return True
        await pilot.pause(0.1)
    return pred()


def host_side_shell(s: Session, script: str) -> subprocess.CompletedProcess:
    """A shell opened on the engine's host itself (no ssh): the participant keeps working there."""
    argv, _env, _cwd = s.sandbox.shell_command()
    i = argv.index("-H")
    argv = argv[:i] + argv[i + 2:]
    argv = ["-i" if a == "-it" else a for a in argv]
    return subprocess.run(argv, input=script.encode(), capture_output=True, timeout=120)


async def test_link_cut_for_ten_seconds_and_restored(fixture_catalog, remote_runtime, sshd, settings, docker_client):
    env = fixture_catalog.get("toy_score")
    s = Session.create(env, "smoke", remote_runtime, settings.sessions)
    ref_start = time.monotonic()  # the reference clock
    s.link_interval = 0.5
    app = RebenchApp(s, tick_s=0.25)
    try:
        async with app.run_test(size=SIZE) as pilot:
            status = app.query_one("#status", Static)
            assert await wait_for(pilot, lambda: s.watcher is not None and s.watcher.scans >= 1 and s.link is not None)
            await pilot.press("s")
            assert await wait_for(pilot, lambda: app.query_one(ScoreTable).row_count == 1)

            sshd.stop()  # the link is cut: the server and every live connection end
            cut_at = time.monotonic()
            assert await wait_for(pilot, lambda: status.has_class("link-down"), limit=30)
            noticed_s = time.monotonic() - cut_at
            assert "LINK DOWN" in str(status.render())
            with pytest.raises(SessionError, match="link .* is down"):
                s.score()
            await pilot.press("s")  # the key says so too, and starts nothing
            await pilot.pause(0.2)
            assert not s.scoring and app.query_one(ScoreTable).row_count == 1

            # meanwhile, on the engine's host, the work goes on
            c = docker_client.containers.get(s.sandbox.container.id)
            rc, _ = c.exec_run(["sh", "-c", "echo during-outage > made_offline.txt && echo 2 > solution/answer.txt"], user="agent")
            assert rc == 0
            p = await asyncio.to_thread(host_side_shell, s, "echo typed-offline\nexit\n")
            assert p.returncode == 0, p.stderr
            await asyncio.sleep(max(0.0, OUTAGE_S - (time.monotonic() - cut_at)))
            assert status.has_class("link-down")

            sshd.start()
            assert await wait_for(pilot, lambda: not status.has_class("link-down"), limit=40)
            assert "LINK DOWN" not in str(status.render())
            assert await wait_for(pilot, lambda: file_rows(read_entries(s.folder / "audit.jsonl"), "made_offline.txt")), (
                f"streams {s.watcher.streams}, scans {s.watcher.scans}, losses {s.link.losses}, last error {s.link.last_error}")
            assert await wait_for(pilot, lambda: any(
                c == "echo typed-offline" for c, _ in commands(read_entries(s.folder / "audit.jsonl"))))
            await pilot.press("s")
            assert await wait_for(pilot, lambda: app.query_one(ScoreTable).row_count == 2)
            assert s.history[-1].score == 2
            working = s.wclock.used()
            reference = time.monotonic() - ref_start
            app.exit()
    finally:
        if s.lock.held:
            s.close()
        s.sandbox.stop(remove=True)

    assert noticed_s < 15, noticed_s  # "within seconds" (heartbeat 0.5 s + ping timeout 3 s)
    assert abs(working - reference) < 1.0, (working, reference)  # the clock kept running through the outage
    rows = read_entries(s.folder / "audit.jsonl")
    lost, restored = event_rows(rows, "link_lost"), event_rows(rows, "link_restored")
    assert len(lost) == 1 and len(restored) == 1 and restored[0]["outage_s"] >= OUTAGE_S - 1
    order = [r["content"]["content"][1].get("event") if r["content"]["type"] == "log" else r["content"]["type"] for r in rows]
    assert order.index("link_lost") < order.index("link_restored")
    offline = file_rows(rows, "made_offline.txt")
    assert len(offline) == 1 and offline[0]["event"] == "created" and "link" in offline[0]["note"]
    assert "+during-outage" in offline[0]["diff"]
    assert order.index("link_restored") < next(i for i, r in enumerate(rows)
                                               if r["content"].get("attributes", {}).get("title") == "file"
                                               and r["content"]["content"][1]["path"] == "made_offline.txt")
    assert len(file_rows(rows, "solution/answer.txt")) == 1
    typed = [c for c, _ in commands(rows)]
    assert typed.count("echo typed-offline") == 1 and typed.count("exit") == 1
    assert [r["content"]["score"] for r in rows if r["content"]["type"] == "intermediateScore"] == [10, 2]
    assert validate_file(s.folder / "audit.jsonl") == []
    assert verify(s.folder).ok
