"""Execs and the freezer, kept apart.

A scoring freezes the participant's container (``docker pause``: the cgroup freezer, which no
signal undoes) while it takes the snapshot and while it runs. The app's own background work also
starts processes in that container (reading the shells' logs, the remote file feed, a status
question to a supervisor). The engine refuses an exec start on a paused container, and an exec
whose process is being created at the moment the freezer takes the cgroup can leave it half-made,
with the engine waiting on it. So every exec this app starts in a session container goes through
its :class:`ExecGate`: it waits while the container is frozen, and a freeze waits until the execs
being started have their process running (or done), then holds new ones back until the thaw.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Any, Callable, Iterator

START_WAIT_S = 5.0  # the longest a freeze waits for one exec to get its process


class ExecGate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._frozen = False
        self._starting = 0

    @property
    def frozen(self) -> bool:
        return self._frozen

    @contextmanager
    def starting(self) -> Iterator[None]:
        """Around an exec's create and start (until its process runs): waits out a freeze."""
        with self._cond:
            while self._frozen:
                self._cond.wait()
            self._starting += 1
        try:
            yield
        finally:
            with self._cond:
                self._starting -= 1
                self._cond.notify_all()

    @contextmanager
    def freeze(self, pause: Callable[[], None], unpause: Callable[[], None]) -> Iterator[None]:
        """Hold new execs back, wait for those being started, then ``pause``; ``unpause`` and let
        them go at the end, whatever happened inside."""
        with self._cond:
            while self._frozen:  # one freeze at a time
                self._cond.wait()
            self._frozen = True
            deadline = time.monotonic() + START_WAIT_S * 4
            while self._starting and time.monotonic() < deadline:
                self._cond.wait(0.05)
        try:
            pause()
        except BaseException:
            self._release()
            raise
        try:
            yield
        finally:
            try:
                unpause()
            finally:
                self._release()

    def _release(self) -> None:
        with self._cond:
            self._frozen = False
            self._cond.notify_all()


def wait_running(api: Any, exec_id: str, limit_s: float = START_WAIT_S) -> None:
    """Return once the exec's process exists (or it ended), polling the engine; at most ``limit_s``."""
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        info = api.exec_inspect(exec_id)
        if info.get("Pid") or info.get("Running") or info.get("ExitCode") is not None:
            return
        time.sleep(0.01)
