"""The file recorder's child process: a :class:`~.watcher.FileWatcher` whose batches go to the app
over the pipe (stdout), and the app's commands (acks, flushes, fingerprints, stop) read from stdin.

Started by :class:`~.recorder.FileRecorder` with ``python -I -c CHILD``, which imports
``_child`` from :mod:`.recorder` (it is re-exported there). The protocol is described there.
"""

from __future__ import annotations

import itertools
import json
import os
import queue
import sys
import threading
from dataclasses import asdict
from pathlib import Path
from typing import IO, Any

from .watcher import FileChange, FileWatcher


def _line(obj: dict[str, Any]) -> bytes:
    """One line of the pipe protocol (JSON, ASCII-escaped, so non-UTF-8 file names cross unchanged)."""
    return (json.dumps(obj, ensure_ascii=True, separators=(",", ":")) + "\n").encode("ascii")


class _Refused(Exception):
    """The parent could not record a batch (it has reported why)."""


class _Child:
    """The child's side of the pipe: a :class:`FileWatcher` whose batches go to the parent, and
    the parent's commands (acks, flushes, fingerprints, stop) read on a thread of their own."""

    def __init__(self, stdin: IO[bytes], stdout: IO[bytes], cfg: dict[str, Any]) -> None:
        from ...secrets import Redactor

        self.stdin, self.stdout = stdin, stdout
        self.out_lock = threading.Lock()
        self.acks: "queue.Queue[dict[str, Any] | None]" = queue.Queue()
        self.batches = itertools.count(1)
        redactor = Redactor.from_pairs(cfg.get("redact") or [])
        self.watcher = FileWatcher(Path(cfg["root"]), self.sink, Path(cfg["state"]), ignore=tuple(cfg["ignore"]),
                                   interval=float(cfg["interval"]), redact=redactor.text if redactor else None,
                                   on_error=self.on_error, on_rescan=lambda info: self.send({"rescanned": info}))
        self.stop = threading.Event()

    def send(self, obj: dict[str, Any]) -> None:
        with self.out_lock:
            self.stdout.write(_line(obj))
            self.stdout.flush()

    def sink(self, changes: list[FileChange], raw: int) -> None:
        self.send({"batch": next(self.batches), "changes": [asdict(c) for c in changes], "raw": raw})
        reply = self.acks.get()
        if reply is None:  # the app is gone: leave the state unsaved, so the next catch-up records these
            os._exit(0)
        if not reply.get("ok"):
            raise _Refused(reply.get("error") or "not recorded")

    def on_error(self, exc: Exception) -> None:
        if not isinstance(exc, _Refused):
            self.send({"error": f"{type(exc).__name__}: {exc}"})

    def flush(self, fid: int, timeout: float, rescan: bool) -> None:
        complete = self.watcher.flush(timeout=timeout, rescan=rescan)
        self.send({"flushed": fid, "complete": complete})

    def state_fingerprint(self, fid: int) -> None:
        got = self.watcher.state_fingerprint()
        self.send({"fingerprinted": fid, "fingerprint": None if got is None else got[0],
                   "n_files": None if got is None else got[1]})

    def read_commands(self) -> None:
        for raw in self.stdin:
            msg = json.loads(raw)
            if "ack" in msg:
                self.acks.put(msg)
            elif "flush" in msg:
                threading.Thread(target=self.flush, args=(msg["flush"], float(msg.get("timeout", 5.0)),
                                                          bool(msg.get("rescan"))), daemon=True).start()
            elif "fingerprint" in msg:
                threading.Thread(target=self.state_fingerprint, args=(msg["fingerprint"],), daemon=True).start()
            elif "stop" in msg:
                self.stop.set()
        # the pipe closed: the app quit or died
        if not self.stop.is_set():
            self.acks.put(None)
            os._exit(0)

    def run(self) -> None:
        commands = threading.Thread(target=self.read_commands, name="commands", daemon=True)
        commands.start()
        self.watcher.start()
        self.send({"ready": True})
        self.stop.wait()
        self.watcher.stop()  # the last drain (acknowledged) and the state saved
        self.send({"stopped": True})
        # The app closes the pipe once it has read "stopped": the command thread then leaves its read
        # of stdin. Exiting while it still sat in that read made the interpreter's shutdown abort
        # ("Fatal Python error: _enter_buffered_busy", at every quit): wait for it, then leave without
        # a shutdown that could meet another thread in the middle of a read.
        commands.join(timeout=10)
        self.stdout.flush()
        os._exit(0)


def _child() -> None:
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # it ends when the app says so, or when the app's pipe closes
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    first = stdin.readline()
    if not first:
        return
    _Child(stdin, stdout, json.loads(first)["config"]).run()
