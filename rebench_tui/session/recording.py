"""Recording what the participant does: file changes, shell commands, and the link to a remote
engine that both travel over. Every row is durable before a listener hears of it."""

from __future__ import annotations

import threading
from typing import Any

from ..trajectory.entries import log
from .commands import CommandCollector
from .core import SessionCore
from .events import CommandsRecorded, FilesRecorded, LinkLost, LinkRestored, RecordingTrouble
from .files import FileChange, FileRecorder, FileWatcher, RemoteFileWatcher
from .journal import StateCommit
from .layout import COMMANDS_STATE, FILES_STATE
from .link import LinkMonitor

Watcher = FileWatcher | FileRecorder | RemoteFileWatcher


class Recording:
    def __init__(self, core: SessionCore) -> None:
        self.core = core
        self.journal = StateCommit(core.audit)
        self.recovered = [note for name in (FILES_STATE, COMMANDS_STATE)
                          if (note := self.journal.recover(core.state / name)) is not None]
        self.watcher: Watcher | None = None
        self.collector: CommandCollector | None = None
        self.link: LinkMonitor | None = None
        self.link_interval = 2.0
        self._capture_stop = threading.Event()
        self._capture_thread: threading.Thread | None = None
        self._capture_lock = threading.Lock()

    @property
    def link_up(self) -> bool:
        return self.link is None or self.link.up

    # -- files ----------------------------------------------------------------------------
    def start_watching(self, interval: float = 0.2, separate_process: bool = True) -> Watcher:
        """Record file changes. Locally the watcher runs in a child process (``separate_process``)
        so a flood of file events never competes with the screen for the GIL; in-process is kept
        for callers that want no child (and is what the child itself runs)."""
        if self.watcher is None:
            self.watcher = self._new_watcher(interval, separate_process)
            self.watcher.start()
        return self.watcher

    def _new_watcher(self, interval: float, separate_process: bool) -> Watcher:
        c = self.core
        redact = c.redactor.text if c.redactor else None
        state = c.state / FILES_STATE
        if c.sandbox.remote:
            self.start_link()
            return RemoteFileWatcher(lambda: c.sandbox.watch_files(c.ignore), self._commit_files, state, ignore=c.ignore,
                                     redact=redact, wait_link=lambda t: self.link is None or self.link.wait_up(t),
                                     trouble=self._link_trouble)
        if separate_process:
            return FileRecorder(c.workspace, self._record_files, state, ignore=c.ignore, interval=interval,
                                redact_pairs=c.redactor.pairs, on_error=self._file_error, on_rescan=self._files_rescanned)
        return FileWatcher(c.workspace, self._record_files, state, ignore=c.ignore, interval=interval, redact=redact,
                           on_error=self._file_error, on_rescan=self._files_rescanned)

    def flush(self, timeout: float, rescan: bool = False) -> None:
        if self.watcher is not None:
            self.watcher.flush(timeout=timeout, rescan=rescan)

    def _file_error(self, exc: Exception) -> None:
        self.core.emit(RecordingTrouble(f"recording file changes failed: {exc}"))

    def _files_rescanned(self, info: dict[str, Any]) -> None:
        """A rescan of the workspace (``files.FileWatcher._rescan``) found what events did not say:
        the row says why it ran and how much it found (its changes are recorded just before it)."""
        found, files, took = info.get("found", 0), info.get("files", 0), info.get("seconds", 0.0)
        if info.get("lost"):
            text = (f"file events were lost ({str(info.get('reason'))[:200]}); a rescan of the {files} files found "
                    f"{found} change(s) they missed, recorded as 'found by a rescan', in {took:.2f} s")
        else:
            text = f"the rescan before a scoring found {found} change(s) not yet recorded, among {files} files, in {took:.2f} s"
        self.core.audit.append(log(text, {"event": "files_rescanned", **info}, title="recorder"))

    def _record_files(self, changes: list[FileChange], raw_events: int) -> None:
        # interleave: a key press that records a row waits for one chunk of a flood, not for all of it; each
        # row's calledAt is when the watcher saw its change (never later than its write)
        self.core.audit.append_many([log(ch.summary(), ch.record(), title="file") for ch in changes], interleave=True,
                                    seen_ms=[ch.seen_ms for ch in changes])
        self.core.emit(FilesRecorded(tuple(changes), raw_events))

    def _commit_files(self, changes: list[FileChange], raw_events: int, state: dict[str, Any]) -> None:
        """Rows and the files' state together (remote feed): a crash leaves neither gap nor duplicate."""
        self.journal.commit(self.core.state / FILES_STATE, state,
                            [log(ch.summary(), ch.record(), title="file") for ch in changes],
                            seen_ms=[ch.seen_ms for ch in changes])
        if changes:
            self.core.emit(FilesRecorded(tuple(changes), raw_events))

    # -- the link to a remote engine ------------------------------------------------------
    def start_link(self) -> LinkMonitor | None:
        """Watch the link to a remote engine (a heartbeat; loss and restore are recorded and announced)."""
        sandbox = self.core.sandbox
        if not sandbox.remote:
            return None
        if self.link is None:
            self.link = LinkMonitor(sandbox.ping, sandbox.reconnect, self._link_lost, self._link_restored,
                                    interval=self.link_interval)
            self.link.start()
        return self.link

    def _link_trouble(self, exc: Exception) -> None:
        if self.link is not None:
            self.link.suspect()

    def _link_lost(self, error: str) -> None:
        c = self.core
        host = c.sandbox.host
        c.audit.append(log(f"link to the engine at {host} lost: {error}; working time keeps running; reconnecting",
                           {"event": "link_lost", "host": host, "error": error,
                            "working_s": round(c.wclock.used(), 3)}, title="link"))
        c.emit(LinkLost(host, error.splitlines()[0][:160] if error else ""))

    def _link_restored(self, outage_s: float, attempts: int) -> None:
        c = self.core
        host = c.sandbox.host
        c.audit.append(log(f"link to the engine at {host} restored after {outage_s:.1f} s ({attempts} attempt(s)); "
                           "what happened there meanwhile is recorded next",
                           {"event": "link_restored", "host": host, "outage_s": round(outage_s, 3), "attempts": attempts},
                           title="link"))
        c.emit(LinkRestored(host, outage_s))
        if isinstance(self.watcher, RemoteFileWatcher):
            self.watcher.reopen()
        self.collect_commands()

    # -- commands -------------------------------------------------------------------------
    def start_capture(self, interval: float = 1.0) -> bool:
        """Record the commands typed in the sandbox's shells (polled every ``interval`` s)."""
        c = self.core
        if not c.sandbox.capture:
            c.audit.append(log(f"command capture is not available on the {c.sandbox.kind} runtime: shell commands "
                               "are not recorded", {"event": "capture_unavailable"}, title="command"))
            return False
        self.start_link()
        if self._capture_thread is None:
            self.collector = CommandCollector(c.sandbox.read_file, c.state / COMMANDS_STATE, c.state / "tty",
                                              redact=c.redactor.data if c.redactor else None)
            self._capture_stop.clear()

            def loop() -> None:
                while not self._capture_stop.wait(interval):
                    self.collect_commands()

            self._capture_thread = threading.Thread(target=loop, name="rebench-command-capture", daemon=True)
            self._capture_thread.start()
        return True

    def collect_commands(self) -> int:
        """Record what the shells did since the last call; returns the number of rows written."""
        if self.collector is None or not self.link_up:
            return 0  # while the link is down the records wait in the container; read from the same offset later
        with self._capture_lock:
            try:
                rows = self.collector.poll(commit=self.journal.commit)
            except Exception as exc:  # noqa: BLE001 - an engine hiccup is reported, the next poll retries
                if self.link is not None:
                    self.link.suspect()  # the link monitor tells the screen; nothing was consumed
                else:
                    self.core.emit(RecordingTrouble(f"reading the command log failed: {exc} (will retry)"))
                return 0
            if rows:
                self.core.emit(CommandsRecorded(tuple(rows)))
            return len(rows)

    def stop(self) -> None:
        """Stop watching files, capturing commands (after one last collection) and the link."""
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        if self._capture_thread is not None:
            self._capture_stop.set()
            self._capture_thread.join(timeout=10)
            self._capture_thread = None
            self.collect_commands()
        if self.link is not None:
            self.link.stop()
            self.link = None
