"""The local file watcher in a process of its own, so a flood of file events never holds the
screen's GIL.

A training run that writes thousands of files a second made the in-process watcher (hashing,
diffing, serializing) compete with the screen for one GIL: key-to-screen p99 went from 41 to
259 ms (benchmarks/README.md). Here a child process runs the same :class:`FileWatcher` (watchdog
observer, coalescing, hashes, diffs, diff bases, ``files.json``) and sends each finished batch
of changes over a pipe; the app's process only appends the rows (one fsync per batch) and shows
them.

Nothing is lost or recorded twice across a crash of either side, as before: the child saves its
state (``files.json``, what has been recorded) only after the parent has acknowledged that the
batch's rows are durable. If the app dies, the child sees its pipe close and exits without
saving, so the next start's catch-up records whatever was sent but not acknowledged. If the
child dies, the parent starts a new one, whose catch-up records what changed meanwhile.

The pipe protocol is JSON lines (ASCII-escaped, so non-UTF-8 file names cross unchanged).
Parent to child: ``{"config": {...}}`` first, then ``{"ack": n, "ok": bool, "error": text}``,
``{"flush": id, "timeout": s, "rescan": bool}``, ``{"fingerprint": id}``, ``{"stop": true}``. Child
to parent: ``{"ready": true}`` after the catch-up, ``{"batch": n, "changes": [...], "raw": events}``,
``{"flushed": id, "complete": bool}``, ``{"rescanned": {reason, lost, found, files, seconds}}``
(after a rescan's batches, when events were lost or it found differences),
``{"fingerprinted": id, "fingerprint": hex, "n_files": n}`` (the attempt fingerprint of the
files as the child's watcher knows them; ``fingerprint`` null before its catch-up),
``{"error": text}``, ``{"stopped": true}``. Secret values (for the diff bases the child keeps) travel in the config
line, never in argv or the environment.
"""

from __future__ import annotations

import itertools
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable

from ...errors import RebenchError
from .watcher import DEFAULT_IGNORE, FileChange
from .recorder_child import _Child, _child, _line, _Refused  # the child's side; CHILD imports _child from here

__all__ = ["CHILD", "PACKAGE_PARENT", "RESTARTS", "RESTART_WINDOW", "FileRecorder", "Sink"]
_ = (_Child, _Refused)  # kept importable from here, as before the split

Sink = Callable[[list[FileChange], int], None]
RESTARTS = 5  # child deaths tolerated within RESTART_WINDOW before the recorder gives up (and says so)
RESTART_WINDOW = 60.0
PACKAGE_PARENT = str(Path(__file__).resolve().parents[3])
CHILD = "import sys; sys.path.insert(0, {path}); from rebench_tui.session.files.recorder import _child; _child()"


class FileRecorder:
    """A :class:`FileWatcher` run in a child process; the same interface (``start``, ``flush``,
    ``stop``, ``alive``, ``total_events``, ``total_changes``, ``errors``). ``sink`` and
    ``on_error`` are called in this process, from the recorder's reader thread."""

    def __init__(self, root: Path, sink: Sink, state_path: Path, ignore: tuple[str, ...] = DEFAULT_IGNORE,
                 interval: float = 0.2, redact_pairs: list[tuple[str, str]] | None = None,
                 on_error: Callable[[Exception], None] | None = None, python: str | None = None,
                 on_rescan: Callable[[dict[str, Any]], None] | None = None) -> None:
        self.root = Path(root).resolve()
        self.sink = sink
        self.state_path = state_path
        self.ignore = ignore
        self.interval = interval
        self._redact_pairs = list(redact_pairs or [])  # (secret form, mark): the child's diff bases keep no secret
        self.on_error = on_error
        self.on_rescan = on_rescan
        self.rescans: list[dict[str, Any]] = []  # what the child's rescans found, as it reported them
        self.python = python or sys.executable
        self.total_events = 0
        self.total_changes = 0
        self.errors = 0
        self.restarts = 0
        self._deaths: list[float] = []
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None
        self._write_lock = threading.Lock()
        self._ready = threading.Event()
        self._ready_seen = False
        self._stopped = threading.Event()
        self._stopping = False
        self._flush_ids = itertools.count(1)
        self._flushes: dict[int, threading.Event] = {}
        self._replies: dict[int, dict[str, Any]] = {}  # answers to fingerprint requests, by request id
        self._log = state_path.parent / "file-recorder.log"

    # -- the child ------------------------------------------------------------------------------
    def _spawn(self) -> None:
        self._ready.clear()
        self._stopped.clear()
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        err: IO[bytes] | int
        try:
            err = open(self._log, "ab")  # the child's own complaints, for diagnosis
        except OSError:
            err = subprocess.DEVNULL
        try:
            # -I: no current folder, user site or PYTHON* variables on the path (the workspace is the
            # participant's: nothing in it may be imported); the package's own folder is added by hand.
            self._proc = subprocess.Popen([self.python, "-I", "-c", CHILD.format(path=json.dumps(PACKAGE_PARENT))],
                                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, close_fds=True,
                                          cwd=str(self.state_path.parent),
                                          start_new_session=True)  # the terminal's Ctrl+C is the app's to handle
        finally:
            if not isinstance(err, int):
                err.close()
        config = {"root": str(self.root), "state": str(self.state_path), "ignore": list(self.ignore),
                  "interval": self.interval, "redact": self._redact_pairs}
        self._send({"config": config})
        self._reader = threading.Thread(target=self._read, args=(self._proc,), name="rebench-file-recorder", daemon=True)
        self._reader.start()

    def _send(self, obj: dict[str, Any]) -> bool:
        proc = self._proc
        if proc is None or proc.stdin is None:
            return False
        try:
            with self._write_lock:
                proc.stdin.write(_line(obj))
                proc.stdin.flush()
            return True
        except (BrokenPipeError, ValueError, OSError):
            return False  # the child is gone; the reader notices and restarts it

    def _read(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:
            try:
                msg = json.loads(raw)
            except ValueError:
                continue
            if "batch" in msg:
                self._batch(msg)
            elif "flushed" in msg:
                fid = int(msg["flushed"])
                ev = self._flushes.pop(fid, None)
                if ev is not None:
                    self._replies[fid] = msg
                    ev.set()
            elif "rescanned" in msg:
                info = dict(msg["rescanned"])
                self.rescans.append(info)
                if self.on_rescan is not None:
                    try:
                        self.on_rescan(info)
                    except Exception as exc:  # noqa: BLE001 - a full disk: reported; the changes themselves are recorded
                        self._report(exc)
            elif "fingerprinted" in msg:
                fid = int(msg["fingerprinted"])
                ev = self._flushes.pop(fid, None)
                if ev is not None:
                    self._replies[fid] = msg
                    ev.set()
            elif "ready" in msg:
                self._ready_seen = True
                self._ready.set()
            elif "error" in msg:
                self._report(RebenchError(f"recording file changes: {msg['error']}",
                                          kept="every change recorded so far; the recorder keeps going"))
            elif "stopped" in msg:
                self._stopped.set()
        proc.wait()
        self._ready.set()  # nobody waits forever on a child that died while starting
        for ev in list(self._flushes.values()):
            ev.set()
        if self._ready_seen and not self._stopping and not self._stopped.is_set():
            self._child_died(proc.returncode)  # a child that never got ready is start()'s error, not restarted

    def _batch(self, msg: dict[str, Any]) -> None:
        changes = [FileChange(**c) for c in msg.get("changes", [])]
        raw = int(msg.get("raw", 0))
        self.total_events += raw
        self.total_changes += len(changes)
        try:
            if changes:
                self.sink(changes, raw)
        except Exception as exc:  # noqa: BLE001 - reported; the session's log keeps such rows queued for its next write
            self._report(exc)
            self._send({"ack": msg["batch"], "ok": False, "error": str(exc)})
            return
        self._send({"ack": msg["batch"], "ok": True})

    def _report(self, exc: Exception) -> None:
        self.errors += 1
        if self.on_error is not None:
            self.on_error(exc)

    def _child_died(self, code: int | None) -> None:
        now = time.monotonic()
        self._deaths = [t for t in self._deaths if now - t < RESTART_WINDOW] + [now]
        if len(self._deaths) > RESTARTS:
            self._report(RebenchError(
                f"the file recorder stopped (exit {code}) {len(self._deaths)} times in a minute; file changes are not "
                "being recorded now", kept=f"every change recorded so far; the next start records what changed since",
                fix=f"see {self._log}; quit and reopen the session (its catch-up records what changed meanwhile)"))
            return
        self._report(RebenchError(f"the file recorder stopped (exit {code}); restarted",
                                  kept="every change recorded so far; the new recorder records what changed meanwhile"))
        self.restarts += 1
        self._spawn()

    # -- the watcher's interface ------------------------------------------------------------------
    def start(self) -> None:
        """Start the child and wait for its catch-up (changes made while no watcher ran) to be recorded."""
        self._spawn()
        self._ready.wait()
        if not self._ready_seen:
            raise RebenchError("the file recorder could not start", kept="the session and its records",
                               fix=f"see {self._log} for why; `rebench-tui doctor` checks the set-up")

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None and self._reader is not None and self._reader.is_alive()

    def flush(self, timeout: float = 5.0, rescan: bool = False) -> bool:
        """Wait until changes made before this call are recorded (before a scoring, and in tests);
        with ``rescan``, also until the child has rescanned the workspace (``FileWatcher.flush``).
        Returns whether that happened within ``timeout``."""
        fid = next(self._flush_ids)
        done = self._flushes[fid] = threading.Event()
        complete = False
        try:
            if self._send({"flush": fid, "timeout": timeout, "rescan": rescan}) and done.wait(timeout + 1.0):
                complete = bool((self._replies.get(fid) or {}).get("complete", True))
        finally:
            self._flushes.pop(fid, None)
            self._replies.pop(fid, None)
        return complete

    def state_fingerprint(self, timeout: float = 10.0) -> tuple[str, int] | None:
        """The attempt fingerprint of the files as the child's watcher knows them now (call
        :meth:`flush` first); None if the child does not answer within ``timeout`` or has no state."""
        fid = next(self._flush_ids)
        done = self._flushes[fid] = threading.Event()
        try:
            if not self._send({"fingerprint": fid}) or not done.wait(timeout):
                return None
            reply = self._replies.get(fid) or {}
        finally:
            self._flushes.pop(fid, None)
            self._replies.pop(fid, None)
        fp, n = reply.get("fingerprint"), reply.get("n_files")
        if not isinstance(fp, str) or not isinstance(n, int):
            return None
        return fp, n

    def stop(self) -> None:
        self._stopping = True
        proc = self._proc
        if proc is None:
            return
        if self._send({"stop": True}):
            self._stopped.wait(15)
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if self._reader is not None:
            self._reader.join(timeout=10)
        self._proc = None


if __name__ == "__main__":
    _child()
