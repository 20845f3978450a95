"""The file feed of a sandbox on a remote engine: the poller's scans, recorded like watchdog's events.

The home lives on the remote host, so it is scanned there (``runtime/poller.py``) and the scans
arrive over an exec stream. Each stream begins with a full scan, compared with the last state
this machine recorded: what changed while no stream ran (the app closed, the link down) is
recorded once, with a note saying so; later scans carry only changes. State and rows are
committed together (:mod:`..journal`), so neither a lost link nor a killed app leaves a gap or a
duplicate. When the stream fails, the watcher waits for the link to come back and starts again.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, Callable

from .watcher import DEFAULT_IGNORE, FileChange, FileWatcher

Record = Callable[[list[FileChange], int, dict[str, Any]], None]  # (changes, raw count, state to commit with them)


class RemoteFileWatcher(FileWatcher):
    def __init__(self, open_stream: Callable[[], Any], record: Record, state_path: Path, *,
                 ignore: tuple[str, ...] = DEFAULT_IGNORE, redact: Callable[[str], str] | None = None,
                 wait_link: Callable[[float], bool] = lambda _t: True, trouble: Callable[[Exception], None] = lambda _e: None,
                 interval: float = 0.5) -> None:
        super().__init__(state_path.parent, lambda _c, _n: None, state_path, ignore=ignore, interval=interval, redact=redact)
        self.open_stream = open_stream
        self.record = record
        self.wait_link = wait_link
        self.trouble = trouble
        self._current: dict[str, dict[str, Any]] = {}
        self._texts: dict[str, str] = {}
        self._stream: Any = None
        self._cond = threading.Condition()
        self.scans = 0
        self.streams = 0  # how many streams were opened (1 + reconnects)
        self._state_loaded = False

    # -- what the watcher's change logic reads ------------------------------------------------
    def _describe(self, rel: str) -> dict[str, Any] | None:
        desc = self._current.get(rel)
        return None if desc is None else {k: v for k, v in desc.items() if k != "text"}

    def _text(self, rel: str, desc: dict[str, Any]) -> str | None:
        return self._texts.get(rel)

    def scan(self) -> dict[str, dict[str, Any]]:
        return {rel: self._describe(rel) for rel in self._current}  # type: ignore[misc]

    # -- scans ------------------------------------------------------------------------------
    def _take(self, files: dict[str, dict[str, Any]]) -> None:
        for rel, desc in files.items():
            self._current[rel] = {k: v for k, v in desc.items() if k != "text"}
            if desc.get("text") is not None:
                self._texts[rel] = desc["text"]
            else:
                self._texts.pop(rel, None)

    def _full(self, msg: dict[str, Any]) -> None:
        if not self._state_loaded:
            saved = self._load_state()
            self._known = saved or {}
            self._state_loaded = True
            note = "changed while no watcher ran"
            baseline = saved is None  # a first start (an empty workspace that was recorded is no baseline)
        else:
            note = "changed while the link to the engine was down"
            baseline = False
        self._current, self._texts = {}, {}
        self._take(msg["files"])
        previous = dict(self._known)
        changes: list[FileChange] = []
        if not baseline:
            for rel in sorted(set(previous) | set(self._current)):
                before, after = previous.get(rel), self._current.get(rel)
                ch = None
                if before is not None and after is None:
                    ch = self._change("deleted", rel, note=note)
                elif before is None and after is not None:
                    ch = self._change("created", rel, note=note)
                elif before and after and (before.get("sha256") != after.get("sha256") or before.get("size") != after.get("size")):
                    ch = self._change("modified", rel, note=note)
                if ch is not None:
                    changes.append(ch)
        self._known = {rel: dict(d) for rel, d in self._current.items()}
        self._caught_up = True  # the state now describes the remote home (see state_fingerprint)
        for rel, desc in self._current.items():
            self._blob_put(desc.get("sha256"), self._texts.get(rel))
        self.record(changes, 0, dict(self._known))
        self.total_changes += len(changes)

    def _incremental(self, msg: dict[str, Any]) -> None:
        files, deleted = msg.get("files", {}), msg.get("deleted", [])
        if not files and not deleted:
            return
        self._take(files)
        for rel in deleted:
            self._current.pop(rel, None)
            self._texts.pop(rel, None)
        changes: list[FileChange] = []
        for rel in sorted(files):
            ch = self._change("modified" if rel in self._known else "created", rel)
            if ch is not None:
                changes.append(ch)
        for rel in deleted:
            ch = self._change("deleted", rel)
            if ch is not None:
                changes.append(ch)
        self.total_events += len(files) + len(deleted)
        self.total_changes += len(changes)
        self.record(changes, len(files) + len(deleted), dict(self._known))

    # -- the stream loop --------------------------------------------------------------------
    def _loop(self) -> None:
        failures = 0
        while not self._stop.is_set():
            if not self.wait_link(1.0):
                continue
            try:
                self._stream = self.open_stream()
                self.streams += 1
                for msg in self._stream:
                    if self._stop.is_set():
                        break
                    if msg.get("full"):
                        self._full(msg)
                    else:
                        self._incremental(msg)
                    failures = 0
                    with self._cond:
                        self.scans += 1
                        self._cond.notify_all()
            except Exception as exc:  # noqa: BLE001 - the link or the engine went: wait, then a fresh full scan
                if self._stop.is_set():
                    break
                failures += 1
                self.trouble(exc)
                self._stop.wait(min(0.5 * failures, 5.0))
            finally:
                stream, self._stream = self._stream, None
                if stream is not None:
                    stream.close()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="rebench-remote-files", daemon=True)
        self._thread.start()

    def flush(self, timeout: float = 5.0, rescan: bool = False) -> bool:
        """Wait until a scan that began after this call is recorded (two scans from now). Every
        scan of the poller is a whole one, so ``rescan`` asks for nothing more; returns whether
        that scan came within the time."""
        deadline = time.monotonic() + max(timeout, 4 * self.interval + 1.0)
        with self._cond:
            target = self.scans + 2
            while self.scans < target:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def reopen(self) -> None:
        """End the current stream so the loop opens a fresh one (a full scan) on the live link.

        Called when the link is restored: a stream opened before the loss may sit on a dead
        connection that never errors, and nothing would be recorded until it did."""
        stream = self._stream
        if stream is not None:
            stream.close()

    def stop(self) -> None:
        self._stop.set()
        self.reopen()  # ends the stream; with _stop set, the loop does not open another
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
