"""A headless app over ssh:// that a test can kill with SIGKILL: it runs a session's watchers and
scores now and then, and prints every record it was told is durable (``ack`` lines), so the test
can check that each is in the audit log exactly once after the kill and the resume.

    python -m tests.remote_worker create SESSIONS_DIR ENV_ROOT ENV_ID HOST
    python -m tests.remote_worker resume FOLDER ENV_ROOT ENV_ID HOST
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import sys
import time
from pathlib import Path

from rebench_tui.catalog import load_catalog
from rebench_tui.config import Settings
from rebench_tui.runtime.docker_runtime import DockerRuntime
from rebench_tui.runtime.images import Recipes
from rebench_tui.session import Session, SessionEvent
from rebench_tui.session.events import CommandsRecorded, FilesRecorded, LinkLost, LinkRestored, ScoreRecorded

ROOT = Path(__file__).resolve().parent.parent


def say(**kw) -> None:
    sys.stdout.write(json.dumps(kw) + "\n")
    sys.stdout.flush()


def ack(ev: SessionEvent) -> None:
    match ev:
        case FilesRecorded(changes=changes):
            for ch in changes:
                say(ack="file", path=ch.path, event=ch.event, sha256=ch.sha256)
        case CommandsRecorded(rows=rows):
            for row in rows:
                if row.get("type") == "action":
                    say(ack="command", id=row["action"]["id"], command=row["action"]["args"]["command"])
        case ScoreRecorded(record=record):
            say(ack="score", called_at=record.called_at_ms, score=record.score)
        case LinkLost():
            say(ack="link_lost")
        case LinkRestored():
            say(ack="link_restored")


def main(mode: str, where: str, env_root: str, env_id: str, host: str) -> None:
    settings = Settings(root=ROOT)
    env = load_catalog(Path(env_root), Recipes.load(settings.images).names).get(env_id)
    rt = DockerRuntime.connect(host, settings.images, settings.cache_dir)
    if mode == "create":
        s = Session.create(env, "smoke", rt, Path(where))
    else:
        s = Session.open(Path(where), env, rt)
    s.link_interval = 0.5
    s.subscribe(ack)
    s.start_watching()
    s.start_capture(interval=0.3)
    say(ready=str(s.folder), working_s=s.wclock.used())
    hold = os.environ.get("REBENCH_WORKER_LOCK")  # the test's stand-in participant execs only between scorings
    while True:
        time.sleep(1.5)
        if s.link_up and not s.scoring:
            with open(hold, "a") if hold else contextlib.nullcontext() as lock:
                if lock is not None:
                    fcntl.flock(lock, fcntl.LOCK_EX)
                try:
                    s.score()
                except Exception as exc:  # noqa: BLE001 - the link may drop mid-scoring; it is recorded
                    say(score_error=str(exc)[:200])


if __name__ == "__main__":
    main(*sys.argv[1:6])
