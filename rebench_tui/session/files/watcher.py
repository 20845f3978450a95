"""The workspace file watcher: every change to the participant's files, recorded.

watchdog's observer feeds raw events into a queue; a coalescing thread drains it every
``interval`` seconds, keeps one change per path (the last), describes each (size, sha256, a
unified diff for small text files) and writes them to the audit log with one fsync per batch,
then tells listeners once per batch. A training run writing thousands of files costs a few
writes a second, not one per event, and no change is dropped from the record.

While no watcher runs (the app closed), files still change; :meth:`FileWatcher.catch_up`
compares the workspace with the last state recorded (``files.json``) and records the
differences as changes seen on reopening.

Events the kernel drops are found again by a rescan, and files still being written when they
were described are looked at again once quiet (:mod:`.rescan`). The pieces: what a workspace
holds (:mod:`.workspace`), watchdog's events (:mod:`.raw_events`), the saved state and
diff bases (:mod:`.state`).
"""

from __future__ import annotations

import difflib
import itertools
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any, Callable

from watchdog.observers import Observer

from .raw_events import _LOST_EVENTS, RawEvent, _Handler, _LostEvents, barrier, coalesce
from .rescan import Rescanning
from .state import FileState
from .workspace import (BEFORE_SCORING, DEFAULT_IGNORE, DEFERRED_LIMIT, DIFF_LIMIT, FINGERPRINT_DOMAIN,
                             HASH_LIMIT, LOST, MARKER, RECENT, RESCAN_CHUNK, SETTLE, SETTLED, TEXT_LIMIT, FileChange,
                             _Ignore, _read_text, describe, fingerprint, human_size, is_ignored, observed, scan,
                             stat_walk, with_diff)

__all__ = ["BEFORE_SCORING", "DEFAULT_IGNORE", "DEFERRED_LIMIT", "DIFF_LIMIT", "FINGERPRINT_DOMAIN", "HASH_LIMIT",
           "LOST", "MARKER", "RECENT", "RESCAN_CHUNK", "SETTLE", "SETTLED", "TEXT_LIMIT", "FileChange", "FileWatcher",
           "describe", "fingerprint", "human_size", "is_ignored", "scan", "stat_walk", "with_diff"]
_ = (_Ignore, _LostEvents)  # kept importable from here, as before the split


class FileWatcher(Rescanning):
    def __init__(self, root: Path, sink: Callable[[list[FileChange], int], None], state_path: Path,
                 ignore: tuple[str, ...] = DEFAULT_IGNORE, interval: float = 0.2,
                 redact: Callable[[str], str] | None = None, on_error: Callable[[Exception], None] | None = None,
                 on_rescan: Callable[[dict[str, Any]], None] | None = None) -> None:
        """``sink(changes, raw_event_count)`` records a batch; it is called from the watcher's thread.
        ``on_error`` hears of a batch that could not be recorded (a full disk); the watcher keeps going.
        ``on_rescan`` hears what a rescan found (``reason``, ``found``, ``files``, ``seconds``), after
        its changes went to the sink, when events had been lost or the rescan found differences."""
        self.root = root.resolve()
        self.sink = sink
        self.state_path = state_path
        self.ignore = ignore
        self.interval = interval
        self.redact = redact or (lambda t: t)  # blob copies of the participant's files keep no secret value
        self._q: "queue.Queue[RawEvent]" = queue.Queue()
        self._known: dict[str, dict[str, Any]] = {}  # rel -> {size, mtime, sha256}
        self._state = FileState(state_path, self.redact)  # files.json and the text blobs (diff bases)
        self._observer: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by stop() and flush(): drain now rather than at the next interval
        self._flushed = threading.Event()
        self._markers: dict[str, threading.Event] = {}  # flush barriers waiting for their own event
        self._marker_ids = itertools.count(1)
        self._last_state_save = 0.0
        self._dirty = False  # changes recorded since the state was last saved
        self.total_events = 0
        self.total_changes = 0
        self.on_error = on_error
        self.errors = 0
        self._caught_up = False  # the state (``_known``) describes the workspace: set by the first catch-up
        self.on_rescan = on_rescan
        self._unsettled: dict[str, list[Any]] = {}  # rel -> [when to look again, (size, mtime) last seen]
        self._rescan_reason: str | None = None  # set when events were lost: the loop rescans
        self._rescan_cond = threading.Condition()
        self._rescans_asked = 0  # flushes that asked for a rescan, and rescans done (flush waits on these)
        self._rescans_done = 0
        self.rescans: list[dict[str, Any]] = []  # what each rescan found (reason, found, seconds)
        self.lost = 0  # times watchdog said events were lost

    # -- state (kept by FileState: files.json and the text blobs) ---------------------------
    def _rel(self, path: str) -> str | None:
        root = str(self.root)
        return path[len(root) + 1:] if path.startswith(root + os.sep) else None

    def _text(self, rel: str, desc: dict[str, Any]) -> str | None:
        """The file's text where it is small UTF-8 text, for diffs and blobs."""
        return _read_text(self.root / rel, desc["size"])

    def scan(self) -> dict[str, dict[str, Any]]:
        return scan(self.root, self.ignore)

    def _save_state(self, force: bool = False) -> None:
        """Save what has been recorded: at most once a second (a change recorded in the last second
        before a crash may be recorded again, marked "changed while no watcher ran"), and always
        within a second of the last recorded change, even if nothing changes after it."""
        now = time.monotonic()
        if not force and (not self._dirty or now - self._last_state_save < 1.0):
            return
        self._last_state_save = now
        self._dirty = False
        self._state.save(self._known)

    def _load_state(self) -> dict[str, dict[str, Any]] | None:
        return self._state.load()

    def _blob_put(self, sha: str | None, text: str | None) -> None:
        self._state.put(sha, text)

    def _blob_get(self, sha: str | None) -> str | None:
        return self._state.get(sha)

    @property
    def _deferred(self) -> dict[str, str]:
        """Texts of versions not yet written to blobs/ (sha256 -> redacted text)."""
        return self._state.deferred

    # -- changes --------------------------------------------------------------------------
    def _change(self, event: str, rel: str, dest: str | None = None, events: int = 1, note: str | None = None,
                seen: float | None = None) -> FileChange | None:
        """The change to record (None: nothing to record); ``seen``: when its event arrived (now if None)."""
        target = dest or rel
        prev = self._known.get(rel)
        old_text = self._blob_get(prev.get("sha256")) if prev else None
        desc = None if event == "deleted" else self._describe(target)
        if event != "deleted" and desc is None:
            event = "deleted"  # gone again before we looked
        if event == "deleted":
            self._unsettled.pop(rel, None)
            if prev is None:
                return None  # created and deleted inside one batch, or never seen: nothing to record
            self._known.pop(rel, None)
            diff = None
            if old_text is not None:
                diff = "".join(difflib.unified_diff(old_text.splitlines(True), [], f"a/{rel}", "/dev/null"))
            return observed(with_diff(FileChange("deleted", rel, events=events, note=note), diff), None, seen)
        if dest:
            self._known.pop(rel, None)
        if event == "modified" and prev is not None and desc.get("sha256") and prev.get("sha256") == desc.get("sha256"):
            return None  # touched, not changed
        if (event == "modified" and prev is not None and not desc.get("sha256") and not prev.get("sha256")
                and all(prev.get(k) == desc.get(k) for k in ("size", "mtime", "kind"))):
            return None  # unhashed (a link, or above the hash limit): the same size and mtime are the same file
        if event == "modified" and prev is None:
            event = "created"
        self._known[target] = desc
        new_text = self._text(target, desc) if desc.get("kind") is None else None
        self._blob_put(desc.get("sha256"), new_text)
        if event == "created":
            old_text = ""
        diff = None
        if new_text is not None and old_text is not None and (event != "moved" or old_text != new_text):
            diff = "".join(difflib.unified_diff(old_text.splitlines(True), new_text.splitlines(True),
                                                "/dev/null" if event == "created" else f"a/{rel}", f"b/{target}"))
        if note is None and not (desc.get("sha256") or desc.get("kind")):
            note = f"larger than {human_size(HASH_LIMIT)}: recorded by size and mtime only"
        return observed(with_diff(FileChange(event, rel, size=desc["size"], sha256=desc.get("sha256"), dest=dest,
                                             events=events, note=note), diff), desc, seen)

    def _drain(self) -> None:
        raw: list[RawEvent] = []
        try:
            while True:
                raw.append(self._q.get_nowait())
        except queue.Empty:
            pass
        if not raw:
            return
        order, merged = coalesce(raw, self._rel, self.ignore)  # one change per path, in first-seen order
        changes: list[FileChange] = []
        self._state.defer = True
        try:
            for rel in order:
                kind, drel, n, seen = merged[rel]
                ch = self._change("moved" if drel else kind, rel, drel, events=n, seen=seen)
                if ch is not None:
                    changes.append(ch)
        finally:
            self._state.defer = False
        if self._state.deferred_bytes > DEFERRED_LIMIT:  # this module's DEFERRED_LIMIT, read now (tests lower it)
            self._state.write_deferred(self._known)
        self.total_events += len(raw)
        if changes:
            self.total_changes += len(changes)
            self.sink(changes, len(raw))
            self._dirty = True  # saved by the loop right after this drain (or by stop)

    def _drain_reporting(self) -> None:
        try:
            self._drain()
        except Exception as exc:  # noqa: BLE001 - the watcher must outlive a full disk; the rows wait in the log's queue
            self.errors += 1
            if self.on_error is not None:
                self.on_error(exc)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            self._drain_reporting()
            self._settle_reporting()
            self._save_state()  # a change recorded just before a quiet spell is saved within a second
            self._flushed.set()
        self._drain_reporting()
        self._save_state(force=True)

    # -- lifecycle ------------------------------------------------------------------------
    def catch_up(self) -> list[FileChange]:
        """Record what changed since the last recorded state (for example while the app was closed).

        The first run has no recorded state: the workspace as found is the baseline.
        """
        saved = self._load_state()
        first, previous = saved is None, saved or {}
        current = self.scan()
        changes: list[FileChange] = []
        self._known = dict(previous)
        for rel in sorted(set(previous) | set(current)):
            before, after = previous.get(rel), current.get(rel)
            ch = None
            if before is not None and after is None:
                ch = self._change("deleted", rel, note="changed while no watcher ran")
            elif before is None and after is not None and not first:
                ch = self._change("created", rel, note="changed while no watcher ran")
            elif before and after and (before.get("sha256") != after.get("sha256") or before.get("size") != after.get("size")):
                ch = self._change("modified", rel, note="changed while no watcher ran")
            if ch is not None:
                changes.append(ch)
        self._known = current
        for desc_rel, desc in current.items():
            self._blob_put(desc.get("sha256"), self._text(desc_rel, desc))
        if changes:
            self.sink(changes, 0)
        self._save_state(force=True)
        self._caught_up = True
        return changes

    def state_fingerprint(self, timeout: float = 10.0) -> tuple[str, int] | None:
        """The attempt fingerprint (:func:`fingerprint`) of the files as this watcher knows them now
        (call :meth:`flush` first); None while it has no state yet (before its first catch-up)."""
        if not self._caught_up:
            return None
        return fingerprint(dict(self._known))  # a plain dict's copy is one step under the GIL

    def start(self) -> None:
        self.catch_up()
        with _LOST_EVENTS.watchers_lock:
            _LOST_EVENTS.watchers.add(self)
        self._observer = Observer()
        self._observer.schedule(_Handler(self._q, str(self.root), self._markers), str(self.root), recursive=True)
        self._observer.start()
        self._thread = threading.Thread(target=self._loop, name="rebench-file-watcher", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _barrier(self, wait: float) -> None:
        """Return once every file event the kernel queued before this call has reached the queue
        (:func:`~.raw_events.barrier`: a marker file's own event); at once while no observer runs."""
        if self._observer is None:
            return
        barrier(str(self.root), self._markers, next(self._marker_ids), wait)

    def flush(self, timeout: float = 5.0, rescan: bool = False) -> bool:
        """Wait until events seen so far are recorded (before a scoring, tests, and before closing);
        with ``rescan`` (before a scoring), also until a rescan that began after this call is
        (whatever events were lost, the files as they are now are in the record). Returns whether
        that happened within ``timeout``."""
        deadline = time.monotonic() + timeout
        self._barrier(min(1.0, timeout))
        if rescan and not self._await_rescan(deadline):
            return False
        while time.monotonic() < deadline:
            self._flushed.clear()
            self._wake.set()  # drain now: a scoring waits on this
            if self._flushed.wait(timeout=max(0.0, deadline - time.monotonic())) and self._q.empty():
                return True
        return False

    def stop(self) -> None:
        with _LOST_EVENTS.watchers_lock:
            _LOST_EVENTS.watchers.discard(self)
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
