"""Execs and the freezer, kept apart.

A scoring freezes the participant's container (``docker pause``: the cgroup freezer, which no
signal undoes) while it takes the snapshot and while it runs. The app's own background work also
runs processes in that container (reading the shells' logs and the ``task`` spool, the remote
file feed, a status question to a supervisor). The engine refuses an exec start on a paused
container; worse, a freeze that meets an exec's process being made, or being taken down after it
exits (the engine deletes it a moment after its output ends), can leave the container "pausing"
for good, with the engine waiting on it (seen here: "failed to delete process ... current process
state: pausing", then every call on that container timing out). So every exec this app runs in a
session container goes through its :class:`ExecGate` for its whole life: it waits while the
container is frozen, and a freeze waits until no exec is in flight and the last one ended at
least :data:`SETTLE_S` ago, then holds new ones back until the thaw.
"""

from __future__ import annotations

import threading
import time
from contextlib import contextmanager
from typing import Callable, Iterator

START_WAIT_S = 5.0  # the longest an exec's start waits to see its process
SETTLE_S = 0.3  # after an exec ends, the engine deletes its process: a freeze waits this long after the last end
DRAIN_S = 60.0  # the longest a freeze waits for the app's execs in flight to end


class ExecsInFlight(RuntimeError):
    """A freeze gave up waiting for the app's execs in the container to end; nothing was frozen."""


class ExecGate:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._frozen = False
        self._starting = 0  # execs in flight (started, not yet ended)
        self._last_end = 0.0

    @property
    def frozen(self) -> bool:
        return self._frozen

    @contextmanager
    def starting(self) -> Iterator[None]:
        """Around an exec's whole life (create, start, its output to the end): waits out a freeze,
        and holds the next freeze back until it has ended and settled."""
        with self._cond:
            while self._frozen:
                self._cond.wait()
            self._starting += 1
        try:
            yield
        finally:
            with self._cond:
                self._starting -= 1
                self._last_end = time.monotonic()
                self._cond.notify_all()

    @contextmanager
    def freeze(self, pause: Callable[[], None], unpause: Callable[[], None]) -> Iterator[None]:
        """Hold new execs back, wait until those in flight have ended and settled, then ``pause``;
        ``unpause`` and let them go at the end, whatever happened inside. Raises
        :class:`ExecsInFlight` (nothing frozen) if they do not end within :data:`DRAIN_S`."""
        with self._cond:
            while self._frozen:  # one freeze at a time
                self._cond.wait()
            self._frozen = True
            deadline = time.monotonic() + DRAIN_S
            while True:
                now = time.monotonic()
                quiet = not self._starting and now - self._last_end >= SETTLE_S
                if quiet:
                    break
                if now >= deadline:
                    self._frozen = False
                    self._cond.notify_all()
                    raise ExecsInFlight(f"{self._starting} of the app's own commands in the container did not end "
                                        f"within {DRAIN_S:.0f} s")
                self._cond.wait(0.05 if self._starting else max(0.01, SETTLE_S - (now - self._last_end)))
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
