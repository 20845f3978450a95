"""The app carries out the shell's `task` commands: the real script, the app's own desk thread, the
screen hearing of what it did through the session's events (as for the keys)."""

from __future__ import annotations

import asyncio
import subprocess

from rebench_tui.tui.app import RebenchApp
from rebench_tui.tui.widgets.file_feed import FileFeed

SIZE = (140, 42)


async def test_task_note_and_score_in_the_shell_reach_the_screen(toy_session):
    s = toy_session()
    app = RebenchApp(s)  # watch_files: the recorders and the desk start as in a real session
    async with app.run_test(size=SIZE) as pilot:
        await app.workers.wait_for_complete()
        assert s.desk._thread is not None
        _argv, env, cwd = s.sandbox.shell_command()

        def task(*args: str) -> subprocess.CompletedProcess:
            return subprocess.run(["task", *args], env=env, cwd=cwd, capture_output=True, text=True, timeout=120)

        p = await asyncio.to_thread(task, "note", "hello from the shell")
        assert p.returncode == 0 and p.stdout.strip() == "note saved: hello from the shell", p.stderr
        p = await asyncio.to_thread(task, "score")
        assert p.returncode == 0 and p.stdout.startswith("score 1: 10"), p.stderr
        await pilot.pause()
        feed = "\n".join(line.text for line in app.query_one(FileFeed).lines)
        assert "note saved: hello from the shell" in feed
        assert app.query_one("#score-table").row_count == 1  # the table, as after the s key
