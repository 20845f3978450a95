"""watchdog's side of the file watcher: the handler that queues its file events (and hears the
flush barriers' markers), the log handler that hears it say events were lost, and the coalescing
of a batch of raw events into one change per path; and the flush barrier, a marker file whose
own event says that every event before it has arrived.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from typing import Callable, Protocol

from watchdog.events import FileSystemEvent, FileSystemEventHandler

from .workspace import DEFAULT_IGNORE, MARKER, is_ignored

# (kind, absolute path, absolute destination of a move, when it arrived: time.time())
RawEvent = tuple[str, str, str | None, float]


class HearsLostEvents(Protocol):
    """What the lost-events handler needs of a watcher (a :class:`~.watcher.FileWatcher`): to be told."""

    def lost_events(self, why: str) -> None: ...


class _LostEvents(logging.Handler):
    """Hears watchdog's observer say that events were lost ("Inotify queue overflowed; filesystem
    events were lost", a watch it could not rebuild) and tells the watchers of this process."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.watchers: set[HearsLostEvents] = set()
        # not ``self.lock``: that is logging.Handler's own, held while emit runs (taking it again hangs
        # watchdog's inotify thread for good)
        self.watchers_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith("watchdog.observers"):
            return
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot be formatted still says something was wrong
            text = str(record.msg)
        with self.watchers_lock:
            watchers = list(self.watchers)
        for w in watchers:
            w.lost_events(text)


_LOST_EVENTS = _LostEvents()
logging.getLogger("watchdog").addHandler(_LOST_EVENTS)


class _Handler(FileSystemEventHandler):
    def __init__(self, q: "queue.Queue[RawEvent]", root: str,
                 markers: dict[str, threading.Event]) -> None:
        self.q = q
        self.marker_prefix = os.path.join(root, MARKER)
        self.markers = markers

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type in ("opened", "closed_no_write"):
            return
        src = os.fsdecode(event.src_path)
        if src.startswith(self.marker_prefix):
            seen = self.markers.get(src)
            if seen is not None:
                seen.set()  # every event queued before the marker's has been delivered
            return
        # closed-after-write and attribute changes may carry new content: the hash decides
        kind = event.event_type if event.event_type in ("created", "deleted", "moved") else "modified"
        dest = getattr(event, "dest_path", None) or None
        self.q.put((kind, src, os.fsdecode(dest) if dest else None, time.time()))  # when it was seen


def coalesce(raw: list[RawEvent], rel_of: Callable[[str], str | None], ignore: tuple[str, ...] = DEFAULT_IGNORE
             ) -> tuple[list[str], dict[str, tuple[str, str | None, int, float | None]]]:
    """One change per path, in first-seen order; moves kept as moves: the paths in order, and for
    each (kind, destination, raw events merged, when the last of them was seen). ``rel_of`` makes
    a path workspace-relative (None outside it); ignored paths are left out, and a move into or
    out of them is a create or delete."""
    order: list[str] = []
    merged: dict[str, tuple[str, str | None, int, float | None]] = {}
    for ev in raw:
        kind, src, dest = ev[:3]
        seen = ev[3] if len(ev) > 3 else None
        rel = rel_of(src)
        drel = rel_of(dest) if dest else None
        if rel is None:
            continue
        if kind == "moved" and drel is not None and is_ignored(rel, ignore) and not is_ignored(drel, ignore):
            kind, rel, drel = "created", drel, None  # e.g. an editor's swap file renamed into place
        if is_ignored(rel, ignore) and (drel is None or is_ignored(drel, ignore)):
            continue
        if kind == "moved" and drel is not None and is_ignored(drel, ignore):
            kind, drel = "deleted", None
        key = rel
        if key not in merged:
            order.append(key)
            merged[key] = (kind, drel, 1, seen)
        else:
            prev_kind, prev_dest, n, prev_seen = merged[key]
            if prev_kind == "created" and kind == "modified":
                kind = "created"
            merged[key] = (kind, drel or prev_dest, n + 1, seen if seen is not None else prev_seen)
    return order, merged


def barrier(root: str, markers: dict[str, threading.Event], marker_id: int, wait: float) -> None:
    """Return once every file event the kernel queued before this call has reached the queue.

    A marker file is made at the workspace's top and the call waits for the marker's own
    event: inotify delivers events in order, so everything before it has arrived (a few ms,
    where a fixed settle of 50 ms guessed before). Where no marker can be made (a read-only
    workspace) it falls back to that settle. The marker is removed at once and never recorded.
    The exception: watchdog holds a move-from event with no move-to (a file moved out of
    the workspace) up to 0.5 s while it looks for the pair. ``markers`` is the one the
    watcher's :class:`_Handler` reads; ``marker_id`` makes the marker's name unique."""
    path = os.path.join(root, f"{MARKER}{os.getpid()}-{marker_id}")
    seen = markers[path] = threading.Event()
    try:
        os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except OSError:
        markers.pop(path, None)
        time.sleep(0.05)
        return
    try:
        seen.wait(wait)
    finally:
        markers.pop(path, None)
        try:
            os.unlink(path)
        except OSError:
            pass
