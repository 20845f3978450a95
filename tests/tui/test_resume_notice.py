"""The screen tells the participant about a scoring the app died during, when the session reopens.

The app is a real child process (local runtime) killed with SIGKILL while its scorer sleeps; the
screen is then opened through Pilot on the resumed session."""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from rebench_tui.catalog import load_catalog
from rebench_tui.runtime.local import LocalRuntime
from rebench_tui.session import Session
from rebench_tui.tui.app import RebenchApp
from rebench_tui.tui.widgets.file_feed import FileFeed
from rebench_tui.tui.widgets.score_history import ScoreTable
from tests.conftest import FIXTURE_ENVS, KNOWN_IMAGES, ROOT

SIZE = (140, 42)

CHILD = r'''
import sys
from pathlib import Path
from rebench_tui.catalog import load_catalog
from rebench_tui.runtime.images import Recipes
from rebench_tui.runtime.local import LocalRuntime
from rebench_tui.session import Session

folder, envs, images = map(Path, sys.argv[1:4])
env = load_catalog(envs, Recipes.load(images).names).get("toy_score")
s = Session.open(folder, env, LocalRuntime())
print("scoring", flush=True)
s.score()
'''


async def test_reopening_after_a_crash_during_scoring_tells_the_participant(env_copy, tmp_path):
    def edit(dest: Path) -> None:
        toml = dest / "environment.toml"
        toml.write_text(toml.read_text().replace('score_timeout = "5s"', 'score_timeout = "120s"'))

    root = env_copy(FIXTURE_ENVS / "toy_score", edit)
    env = load_catalog(root, KNOWN_IMAGES).get("toy_score")
    s = Session.create(env, "smoke", LocalRuntime(), tmp_path / "sessions")
    (s.workspace / "solution" / "answer.txt").write_text("sleep\n")
    s.close(pause_clock=None)
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(s.folder), str(root), str(ROOT / "images")],
                             stdout=subprocess.PIPE, text=True, cwd=ROOT)
    marker_path = s.folder / ".state" / "scoring.json"
    try:
        assert child.stdout.readline().strip() == "scoring"
        deadline = time.monotonic() + 30
        while not (marker_path.is_file() and
                   (s.folder / ".state" / "rooms" / (t := json.loads(marker_path.read_text())['token']) / "run"
                    / f"{t}.pid").is_file()):
            assert time.monotonic() < deadline, "the scorer never started"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    token = json.loads(marker_path.read_text())["token"]

    again = Session.open(s.folder, env, LocalRuntime())
    assert not (s.folder / ".state" / "rooms" / token).exists()  # its room (the attempt's copy, its status) is gone
    app = RebenchApp(again, watch_files=False)
    told_all: list[str] = []
    shown = app.notify
    app.notify = lambda message, **kw: (told_all.append(str(message)), shown(message, **kw))  # what the participant sees
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        told = [t for t in told_all if "interrupted" in t]
        assert len(told) == 1 and "score again" in told[0], told_all
        assert any("interrupted" in str(line.text) for line in app.query_one(FileFeed).lines), "the feed keeps it too"
        table = app.query_one(ScoreTable)
        assert table.row_count == 1
    (rec,) = again.history
    assert math.isnan(rec.score) and rec.details["interrupted"]["outcome"] == "ended"
