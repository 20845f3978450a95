"""The link to a remote engine: a heartbeat, loss and restore, reconnecting with backoff.

A thread pings the engine every ``interval`` seconds with a short timeout. The first failed
ping marks the link lost (``on_lost``); from then on it reconnects with exponential backoff
(``backoff`` doubling up to ``cap`` seconds) until a new connection answers, then marks it
restored (``on_restored(outage_s, attempts)``). Other threads ask :attr:`up`, wait with
:meth:`wait_up`, or report trouble they saw with :meth:`suspect` (checked at once). The clock
is not the link's business: working time runs on this machine and goes on while the link is
down (see the README).
"""

from __future__ import annotations

import threading
import time
from typing import Callable


class LinkMonitor:
    def __init__(self, ping: Callable[[float], None], reconnect: Callable[[], None],
                 on_lost: Callable[[str], None], on_restored: Callable[[float, int], None], *,
                 interval: float = 2.0, timeout: float = 3.0, backoff: float = 0.5, cap: float = 10.0) -> None:
        self.ping = ping
        self.reconnect = reconnect
        self.on_lost = on_lost
        self.on_restored = on_restored
        self.interval = interval
        self.timeout = timeout
        self.backoff = backoff
        self.cap = cap
        self._up = threading.Event()
        self._up.set()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.losses = 0
        self.last_error: str | None = None

    @property
    def up(self) -> bool:
        return self._up.is_set()

    def wait_up(self, timeout: float | None = None) -> bool:
        return self._up.wait(timeout)

    def suspect(self) -> None:
        """Something failed on the link: check it now rather than at the next beat."""
        self._wake.set()

    def start(self) -> None:
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="rebench-link", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=self.timeout + 5)
            self._thread = None

    def _check(self) -> str | None:
        try:
            self.ping(self.timeout)
            return None
        except Exception as exc:  # noqa: BLE001 - every failure means the same: no answer
            return f"{type(exc).__name__}: {exc}".strip()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            if self._stop.is_set():
                return
            error = self._check()
            if error is None:
                continue
            lost_at = time.monotonic()
            self.losses += 1
            self.last_error = error
            self._up.clear()
            self.on_lost(error)
            delay, attempts = self.backoff, 0
            while not self._stop.is_set():
                attempts += 1
                try:
                    self.reconnect()
                except Exception as exc:  # noqa: BLE001 - not yet: wait longer and try again
                    self.last_error = f"{type(exc).__name__}: {exc}"
                    self._stop.wait(delay)
                    delay = min(delay * 2, self.cap)
                    continue
                if self._check() is None:
                    break
            if self._stop.is_set():
                return
            self._up.set()
            self.on_restored(time.monotonic() - lost_at, attempts)
