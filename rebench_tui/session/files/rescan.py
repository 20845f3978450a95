"""The file watcher's second look, a mixin of :class:`~.watcher.FileWatcher`.

Events the kernel drops are found again. inotify's queue holds a fixed number of events
(``/proc/sys/fs/inotify/max_queued_events``, 16,384 here); a burst past it (20,000 files made in
a second) loses the rest, and watchdog only logs "Inotify queue overflowed". The watcher hears
that warning (and any other from watchdog's observer) and then rescans: it walks the workspace,
compares each file's size and mtime with its state, describes (hashes) only what differs, and
records every difference with the note "found by a rescan after file events were lost". The
flush before each scoring rescans too (noted "found by the rescan before a scoring"), so a
scoring's files are in the record whatever was lost. A file still being written when it was
described (its size or mtime moved while it was hashed, or its mtime was in the last moments)
is looked at again once it has been quiet for a second, and recorded again if it changed
("recorded again once it stopped changing"): a 2 GB file described at 1.7 GB ends at 2 GB.

The mixin reads and writes the watcher's own state (what is known, the files not yet settled,
the rescan requests) and records through its ``_change`` and ``sink``, so a subclass that
describes files its own way (the remote watcher) is served too.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any, Callable

from .state import FileState
from .workspace import (BEFORE_SCORING, LOST, RECENT, RESCAN_CHUNK, SETTLE, SETTLED, FileChange, describe,
                             stat_walk)


class Rescanning:
    # the watcher's, set by FileWatcher.__init__
    root: Path
    ignore: tuple[str, ...]
    sink: Callable[[list[FileChange], int], None]
    on_error: Callable[[Exception], None] | None
    on_rescan: Callable[[dict[str, Any]], None] | None
    errors: int
    lost: int
    total_changes: int
    rescans: list[dict[str, Any]]
    _known: dict[str, dict[str, Any]]
    _unsettled: dict[str, list[Any]]
    _rescan_reason: str | None
    _rescan_cond: threading.Condition
    _rescans_asked: int
    _rescans_done: int
    _wake: threading.Event
    _dirty: bool
    _state: FileState
    _drain: Callable[[], None]
    _change: Callable[..., FileChange | None]
    alive: bool

    def _describe(self, rel: str) -> dict[str, Any] | None:
        """:func:`describe`, noting a file that may still be changing (it moved while it was
        hashed, or its mtime is of this very moment): it is looked at again once it is quiet."""
        began = time.time()
        desc = describe(self.root / rel)
        if desc is None or desc.get("kind") is not None:
            self._unsettled.pop(rel, None)
            return desc
        try:
            st = os.lstat(self.root / rel)
            after = (st.st_size, st.st_mtime)
        except OSError:
            after = None
        moved = after != (desc["size"], desc["mtime"])
        if moved or began - RECENT < desc["mtime"] < began + SETTLE:
            self._unsettled[rel] = [time.monotonic() + SETTLE, after]
        else:
            self._unsettled.pop(rel, None)
        return desc

    def lost_events(self, why: str) -> None:
        """Events were lost (watchdog said so; called from its thread): rescan soon."""
        self.lost += 1
        with self._rescan_cond:
            self._rescan_reason = why
        self._wake.set()

    def _settle_reporting(self) -> None:
        try:
            self._settle()
        except Exception as exc:  # noqa: BLE001 - as a drain's: reported, the watcher keeps going
            self.errors += 1
            if self.on_error is not None:
                self.on_error(exc)

    def _settle(self) -> None:
        """Rescan where events were lost or a flush asked for it; look again at files that were
        still changing when described, once they have been quiet for ``SETTLE`` seconds."""
        with self._rescan_cond:
            reason, self._rescan_reason = self._rescan_reason, None
            asked = self._rescans_asked
        if reason is not None or asked > self._rescans_done:
            lost = reason is not None
            self._drain()  # events that did arrive first, so a rescan records only what was lost
            self._rescan(LOST if lost else BEFORE_SCORING, reason or "before a scoring", lost)
            with self._rescan_cond:
                self._rescans_done = max(self._rescans_done, asked)
                self._rescan_cond.notify_all()
        if not self._unsettled:
            return
        now = time.monotonic()
        changes: list[FileChange] = []
        for rel, entry in list(self._unsettled.items()):
            if entry[0] > now:
                continue
            try:
                st = os.lstat(self.root / rel)
                seen = (st.st_size, st.st_mtime)
            except OSError:
                seen = None
            if seen != entry[1]:  # still changing: wait until it has been quiet for SETTLE
                entry[0], entry[1] = now + SETTLE, seen
                continue
            del self._unsettled[rel]
            ch = self._change("modified" if seen is not None else "deleted", rel, note=SETTLED)
            if ch is not None:
                changes.append(ch)
        self._emit_changes(changes)

    def _await_rescan(self, deadline: float) -> bool:
        """Ask the loop for a rescan and wait until one that began after this call is done (a
        flush before a scoring); False if ``deadline`` (monotonic) passes or the watcher stops."""
        with self._rescan_cond:
            self._rescans_asked += 1
            target = self._rescans_asked
        self._wake.set()
        with self._rescan_cond:
            while self._rescans_done < target:
                left = deadline - time.monotonic()
                if left <= 0 or not self.alive:
                    return False
                self._rescan_cond.wait(min(left, 0.5))
        return True

    def _emit_changes(self, changes: list[FileChange]) -> None:
        for at in range(0, len(changes), RESCAN_CHUNK):
            chunk = changes[at:at + RESCAN_CHUNK]
            self.total_changes += len(chunk)
            self.sink(chunk, 0)
            self._dirty = True

    def _rescan(self, note: str, reason: str, lost: bool) -> dict[str, Any]:
        """Compare the workspace with the state: files whose size or mtime differ, or that were
        still changing when described, are described again; new and gone files are recorded.
        Every difference is recorded with ``note``."""
        began = time.monotonic()
        found = stat_walk(self.root, self.ignore)
        changes: list[FileChange] = []
        self._state.defer = True
        try:
            for rel in sorted(found.keys() | self._known.keys()):
                st, prev = found.get(rel), self._known.get(rel)
                if st is None:
                    ch = self._change("deleted", rel, note=note)
                elif prev is None:
                    ch = self._change("created", rel, note=note)
                elif prev.get("size") != st.st_size or prev.get("mtime") != st.st_mtime or rel in self._unsettled:
                    ch = self._change("modified", rel, note=note)
                else:
                    continue
                if ch is not None:
                    changes.append(ch)
        finally:
            self._state.defer = False
        self._emit_changes(changes)
        info = {"reason": reason, "lost": lost, "found": len(changes), "files": len(found),
                "seconds": round(time.monotonic() - began, 3)}
        self.rescans.append(info)
        if (lost or changes) and self.on_rescan is not None:
            self.on_rescan(info)
        return info
