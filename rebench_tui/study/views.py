"""The researcher's views in a process of their own. A study's view is CPU work (the database's
pass over every row, then Python for each session's counting score); run on one of the
collector's threads it would compete with the writers for the interpreter's lock, and a
Python thread that keeps the lock makes every other thread wait up to the switch interval each
time it wants it back. So the collector hands views to one child process, started on the first
view and kept: it reads the database on its own read-only connection (WAL: it never blocks a
writer), runs at a lower CPU priority than the writers, and answers one view at a time over a
pipe; the HTTP thread that asked waits on the pipe without the lock.

    python -m rebench_tui.study.views DB    one request a line on stdin, one JSON answer a line
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

from ..errors import RebenchError

NICE = 10  # the view process yields the CPU to the writers when both want it


class ViewProcess:
    """The collector's view process for one database (started on first use, restarted if it died)."""

    def __init__(self, db: Path) -> None:
        self.db = db
        self._proc: subprocess.Popen | None = None
        self._lock = threading.Lock()

    def summary(self) -> list[dict[str, Any]]:
        """The study's view (``summary.summarize``), computed in the view process."""
        with self._lock:
            for attempt in (1, 2):
                try:
                    answer = self._ask()
                    break
                except (OSError, ValueError, EOFError):  # it died (or was killed): start another once
                    self._close_locked()
                    if attempt == 2:
                        raise RebenchError("the collector's view process does not answer") from None
        if "error" in answer:
            raise RebenchError(f"the study's view failed: {answer['error']}")
        return answer["sessions"]

    def _ask(self) -> dict[str, Any]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = _start(self.db)
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(b"summary\n")
        self._proc.stdin.flush()
        line = self._proc.stdout.readline()
        if not line:
            raise EOFError("the view process ended")
        return json.loads(line)

    def close(self) -> None:
        with self._lock:
            self._close_locked()

    def _close_locked(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()  # its stdin at EOF: it ends by itself
            except OSError:
                pass
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _start(db: Path) -> subprocess.Popen:
    """The child, importing this same checkout of the package."""
    root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return subprocess.Popen([sys.executable, "-m", "rebench_tui.study.views", str(db)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, env=env, close_fds=True)


def serve(db: Path) -> None:
    """The child's loop: a view for each line on stdin, until stdin ends (the collector stopped,
    or was killed)."""
    from .reader import LedgerReader
    from .summary import summarize

    try:
        os.nice(NICE)
    except OSError:
        pass
    reader = LedgerReader(db)
    try:
        for _request in sys.stdin.buffer:
            try:
                answer: dict[str, Any] = {"sessions": summarize(reader)}
            except Exception as exc:  # noqa: BLE001 - said to the collector, which answers the researcher
                answer = {"error": f"{type(exc).__name__}: {exc}"}
            sys.stdout.write(json.dumps(answer) + "\n")
            sys.stdout.flush()
    finally:
        reader.close()


if __name__ == "__main__":
    serve(Path(sys.argv[1]))
