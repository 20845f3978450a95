"""The file feed: what changed in the workspace, coalesced so a flood never floods the screen."""

from __future__ import annotations

import time

from textual.widgets import RichLog

from ...session.files import FileChange

SHOW_PER_BATCH = 6


class FileFeed(RichLog):
    DEFAULT_CSS = "FileFeed { height: 1fr; }"

    def __init__(self, **kw) -> None:
        super().__init__(max_lines=2000, markup=False, wrap=False, **kw)
        self.changes = 0
        self.raw_events = 0

    def add_batch(self, changes: list[FileChange], raw_events: int, stamp: float | None = None) -> None:
        self.changes += len(changes)
        self.raw_events += raw_events
        t = time.strftime("%H:%M:%S", time.localtime(stamp or time.time()))
        for ch in changes[:SHOW_PER_BATCH]:
            self.write(f"{t} {ch.summary()}" + (f" [{ch.note}]" if ch.note else ""))
        if len(changes) > SHOW_PER_BATCH:
            self.write(f"{t} … and {len(changes) - SHOW_PER_BATCH} more changes ({raw_events} raw events), all recorded")

    def add_line(self, text: str, stamp: float | None = None) -> None:
        """A line stamped with ``stamp`` (seconds since the epoch: when it happened), else now."""
        self.write(f"{time.strftime('%H:%M:%S', time.localtime(stamp if stamp is not None else time.time()))} {text}")
