"""A session: one participant's attempt at one environment, and everything it records.

The session owns the working clock, the sandbox handle, the audit log, the score log and the
file watcher. Every record is durable (fsynced) before a listener hears of it, so nothing the
screen shows as done can be lost. Blocking calls (``score``) are meant for worker threads; the
session never touches a screen. Listeners are called from whatever thread produced the event.
"""

from __future__ import annotations

import getpass
import json
import math
import platform
from secrets import randbelow, token_hex
import shutil
import socket
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .. import __version__
from ..assets import AssetStore
from ..catalog import Anchors, Environment, manifest_anchors
from ..catalog.setting import setting_record, setting_words
from ..clock import Clock, SystemClock, WorkingClock, crossed_warnings, format_hms
from ..errors import RebenchError, SessionError
from ..runtime import Runtime, Sandbox, SandboxSpec
from ..runtime.base import ASSETS_DIR, ExecResult, exec_result
from ..scoring import (ATTEMPT_KEY, Aggregation, Attempt, Direction, ScoreResult, attempt_fingerprint, counting_attempt,
                       group_attempts, json_score, normalize, parse_scorer_output)
from ..secrets import Redactor
from ..store import Store
from ..trajectory import score_log
from ..trajectory.audit import AuditLog, AuditWriteError, read_entries
from ..trajectory.entries import INT32_MAX, log
from .commands import CommandCollector
from ..hashing import sha256_file
from .file_recorder import FileRecorder
from .files import DEFAULT_IGNORE, FileChange, FileWatcher, fingerprint, human_size, scan
from .journal import StateCommit
from .link import LinkMonitor
from .lock import SessionLock
from .remote_files import RemoteFileWatcher
from .scoring_marker import SCORING_STATE, ScoringMarker
from ..trajectory.records import ClockModel, CountingScore, Pause, ScoreRecord, SessionMeta

META = "session.json"
AUDIT = "audit.jsonl"
SCORE_LOG = "score_log.csv"
WORKSPACE = "workspace"
STATE = ".state"
FILES_STATE = "files.json"
COMMANDS_STATE = "commands.json"
LOCK = "lock"
FLUSH_BEFORE_SCORING_S = 60.0  # the longest a scoring waits for the files it scores to be recorded


@dataclass(frozen=True)
class SessionEvent:
    """What listeners hear: ``kind`` is files, commands, score, warning, paused, resumed, note, finished,
    error, or (remote engines) link_lost and link_restored."""

    kind: str
    data: Any = None


Listener = Callable[[SessionEvent], None]


class ScoringBusy(SessionError):
    pass


def new_session_id(env_id: str, wall: float) -> str:
    return f"{env_id}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(wall))}-{token_hex(2)}"


class Session:
    def __init__(self, folder: Path, meta: SessionMeta, env: Environment, sandbox: Sandbox, clock: Clock,
                 store: Store | None = None, secrets: dict[str, str] | None = None) -> None:
        self.folder = folder
        self.meta = meta
        self.env = env
        self.sandbox = sandbox
        self.clock = clock
        self.store = store
        self.profile = env.profile(meta.profile)
        self.direction = Direction(meta.direction)
        self.aggregation = Aggregation(meta.aggregation)
        self.wclock = WorkingClock(meta.clock.to_state(), clock)
        self.redactor = Redactor(secrets)
        # A scoring that was running when the app died: its row's time stays reserved until resume settles it.
        self._interrupted = ScoringMarker.load(folder / STATE / SCORING_STATE)
        self.audit = AuditLog(folder / AUDIT, meta.run_id, clock, usage=self.wclock.used,
                              redact=self.redactor.text if self.redactor else None,
                              held=(self._interrupted.called_at,) if self._interrupted else ())
        self.resume_notes: list[str] = []  # what the participant is told on reopening (the screen, the CLI)
        self.history: list[ScoreRecord] = self._load_history()
        self.listeners: list[Listener] = []
        self.watcher: FileWatcher | FileRecorder | None = None
        self.collector: CommandCollector | None = None
        self._capture_stop = threading.Event()
        self._capture_thread: threading.Thread | None = None
        self._capture_lock = threading.Lock()
        self.lock = SessionLock(folder / LOCK)
        self._score_lock = threading.Lock()
        self._meta_lock = threading.RLock()
        self.journal = StateCommit(self.audit)
        self.recovered = [note for name in (FILES_STATE, COMMANDS_STATE)
                          if (note := self.journal.recover(folder / STATE / name)) is not None]
        self.link: LinkMonitor | None = None
        self.link_interval = 2.0
        self._score_log_backlog: list[tuple[float, float, dict[str, Any], dict[str, Any]]] = []

    @property
    def link_up(self) -> bool:
        return self.link is None or self.link.up

    # -- paths ----------------------------------------------------------------------------
    @property
    def id(self) -> str:
        return self.meta.id

    @property
    def workspace(self) -> Path:
        return self.folder / WORKSPACE

    @property
    def finished(self) -> bool:
        return self.meta.status == "finished"

    @property
    def ignore(self) -> tuple[str, ...]:
        return DEFAULT_IGNORE + (f"{ASSETS_DIR}/",)  # the read-only assets mount is not the participant's work

    @property
    def hidden(self) -> bool:
        return self.meta.visibility == "hidden"

    @property
    def anchors(self) -> Anchors:
        """What this session's scores are normalized with, and where those figures come from."""
        return Anchors.from_record(self.meta.anchors, fallback=(self.meta.start_score, self.meta.reference_score))

    # -- creation -------------------------------------------------------------------------
    @classmethod
    def create(cls, env: Environment, profile_name: str, runtime: Runtime, sessions_dir: Path, *,
               time_limit_s: float | None = None, clock: Clock | None = None, store: Store | None = None,
               progress: Callable[[str], None] = lambda _m: None, extra_env: dict[str, str] | None = None,
               asset_store: AssetStore | None = None, secrets: dict[str, str] | None = None,
               anchors: Anchors | None = None) -> "Session":
        """A new session. ``anchors``: what its scores are normalized with (the CLI passes the
        anchors in effect on this host, ``catalog.anchors_in_effect``); default: the manifest's."""
        clock = clock or SystemClock()
        profile = env.profile(profile_name)
        anchors = anchors or manifest_anchors(env, profile.name)
        assets = None
        if env.manifest.assets is not None:
            if asset_store is None:
                raise SessionError(f"{env.id} needs prepared assets and no asset store was given")
            assets = asset_store.require(env, profile.name)  # fails fast, naming the prepare command
        secrets = dict(secrets or {})
        missing = [n for n in profile.secrets if n not in secrets]
        if missing:
            raise SessionError(f"{env.id} ({profile.name}) needs secrets that were not given: {', '.join(missing)}",
                               kept="nothing was started", fix="pass them (the CLI reads them from the environment or the secrets file)")
        image = runtime.ensure_image(env, profile, progress)
        now = clock.time()
        sid = new_session_id(env.id, now)
        folder = sessions_dir / sid
        workspace = folder / WORKSPACE
        state = folder / STATE
        workspace.mkdir(parents=True)
        state.mkdir()
        shutil.copytree(env.solution_dir, workspace / "solution")
        (workspace / "instructions.txt").write_text(env.instructions, encoding="utf-8")
        spec = SandboxSpec(session_id=sid, env=env, profile=profile, workspace=workspace, state_dir=state,
                           extra_env=dict(extra_env or {}), assets=None if assets is None else assets.folder,
                           secrets={n: secrets[n] for n in profile.secrets})
        try:
            sandbox = runtime.create(spec, image, progress)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)  # nothing was recorded yet; leave no half session
            raise
        m = env.manifest
        desc = sandbox.describe()
        meta = SessionMeta(
            id=sid, run_id=randbelow(INT32_MAX) + 1, env_id=env.id, task_id=m.task_id, task_version=m.version,
            title=m.title, profile=profile.name, runtime=runtime.kind, host=runtime.host, isolated=sandbox.isolated,
            image=image, container=desc.get("container"), created_at=int(now * 1000), started_at=int(now * 1000),
            clock=ClockModel(limit_s=time_limit_s or m.time.limit), direction=m.score.direction.value,
            aggregation=m.score.aggregation.value, visibility=m.score.visibility, start_score=anchors.start,
            reference_score=anchors.reference, anchors=anchors.to_record(), score_timeout_s=profile.score_timeout,
            setting=setting_record(m.paper, profile.setting),
            metadata={"rebench_tui": __version__, "python": platform.python_version(), "hostname": socket.gethostname(),
                      "user": getpass.getuser(), "isInteractive": True, "environment_path": str(env.path),
                      "sandbox": desc,
                      "assets": None if assets is None else {"folder": str(assets.folder), "mode": assets.mode,
                                                             "manifest_sha256": assets.digest},
                      "secrets": list(profile.secrets), "services": [list(c) for c in profile.services]},
        )
        meta.save(folder / META)
        score_log.ensure(folder / SCORE_LOG)
        session = cls(folder, meta, env, sandbox, clock, store, secrets=spec.secrets)
        session.lock.acquire()
        session.wclock.resume()
        session._save()
        session.audit.append(log(
            f"session started: {m.title} ({m.task_id} {m.version}), profile {profile.name}, "
            f"time limit {format_hms(meta.clock.limit_s)}, runtime {runtime.kind} on {runtime.host}"
            + ("" if sandbox.isolated else " — NOT ISOLATED: commands and the scorer run as you on this machine")
            + f"; scores normalized between start {anchors.start:g} and reference {anchors.reference:g}, {anchors.summary}"
            + f"; {setting_words(meta.setting)}",
            {"event": "session_started", "session_id": sid, "env": env.id, "profile": profile.name,
             "sandbox": desc, "time_limit_s": meta.clock.limit_s, "score": m.score.model_dump(mode="json"),
             "anchors": anchors.to_record(), "setting": meta.setting},
            title="session",
        ))
        session._index()
        return session

    @classmethod
    def open(cls, folder: Path, env: Environment, runtime: Runtime, *, clock: Clock | None = None,
             store: Store | None = None, secrets: dict[str, str] | None = None) -> "Session":
        clock = clock or SystemClock()
        meta_path = folder / META
        if not meta_path.is_file():
            raise SessionError(f"no session at {folder} (missing {META})", fix="`rebench-tui sessions` lists the sessions")
        meta = SessionMeta.load(meta_path)
        assets = (meta.metadata.get("assets") or {}).get("folder")
        spec = SandboxSpec(session_id=meta.id, env=env, profile=env.profile(meta.profile), workspace=folder / WORKSPACE,
                           state_dir=folder / STATE, assets=None if assets is None else Path(assets),
                           secrets=dict(secrets or {}))
        lock = SessionLock(folder / LOCK)
        lock_note = lock.acquire()
        try:
            sandbox = runtime.attach(spec)
            if sandbox is None:
                raise SessionError(
                    f"the sandbox of session {meta.id} is gone (no container labelled with it on {runtime.host})",
                    kept=f"every record and the workspace files in {folder}",
                    fix="export or inspect the records; start a new session to keep working",
                )
            last_wall = None
            rows = read_entries(folder / AUDIT)
            if rows:
                last_wall = rows[-1]["calledAt"] / 1000
            session = cls(folder, meta, env, sandbox, clock, store, secrets=secrets)
        except BaseException:
            lock.release()
            raise
        session.lock = lock
        interrupted = session._settle_interrupted_scoring()
        gap = None if last_wall is None else clock.time() - last_wall
        session.audit.append(log(
            f"session resumed on {socket.gethostname()}; working time {format_hms(session.wclock.used())}, clock "
            f"{'running' if session.wclock.running else 'paused'}"
            + (f"; {format_hms(gap)} since the last record" if gap is not None else ""),
            {"event": "session_resumed", "gap_s": gap, "clock_running": session.wclock.running, "lock": lock_note,
             **({"recovered": session.recovered} if session.recovered else {}),
             **({"interrupted_scoring": interrupted} if interrupted else {})},
            title="session",
        ))
        session._save()
        session._index()
        return session

    # -- persistence ----------------------------------------------------------------------
    def _save(self) -> None:
        with self._meta_lock:
            self.meta.clock = ClockModel.from_state(self.wclock.state())
            self.meta.save(self.folder / META)

    def _index(self) -> None:
        if self.store is None:
            return
        best = self.final()
        self.store.upsert_session({
            "id": self.id, "env_id": self.meta.env_id, "task_id": self.meta.task_id, "profile": self.meta.profile,
            "runtime": self.meta.runtime, "host": self.meta.host, "status": self.meta.status,
            "created_at": self.meta.created_at, "completed_at": self.meta.completed_at,
            "time_limit_s": self.meta.clock.limit_s, "working_s": self.wclock.used(), "n_scores": len(self.history),
            "final_score": best.score if best else None, "final_normalized": best.normalized if best else None,
            "path": str(self.folder), "meta": self.meta.model_dump_json(),
        })

    def _load_history(self) -> list[ScoreRecord]:
        out: list[ScoreRecord] = []
        for row in read_entries(self.folder / AUDIT):
            c = row.get("content", {})
            if c.get("type") != "intermediateScore":
                continue
            score = c["score"]
            value = math.nan if score is None else float(score)
            working = row.get("workingMs", (row.get("usageTotalSeconds") or 0) * 1000) / 1000
            details = c.get("details", {})
            info = details.get(ATTEMPT_KEY) if isinstance(details, dict) else None
            n_files = info.get("n_files") if isinstance(info, dict) else None
            out.append(ScoreRecord(len(out) + 1, row["calledAt"], working, value, self._normalize(value),
                                   c.get("message", {}), details, fingerprint=attempt_fingerprint(details),
                                   n_files=n_files if isinstance(n_files, int) else None))
        return out

    def _normalize(self, score: float) -> float:
        return normalize(score, self.meta.start_score, self.meta.reference_score)

    # -- listeners ------------------------------------------------------------------------
    def subscribe(self, listener: Listener) -> None:
        self.listeners.append(listener)

    def _emit(self, kind: str, data: Any = None) -> None:
        for fn in list(self.listeners):
            fn(SessionEvent(kind, data))

    # -- files ----------------------------------------------------------------------------
    def start_watching(self, interval: float = 0.2, separate_process: bool = True) -> FileWatcher | FileRecorder:
        """Record file changes. Locally the watcher runs in a child process (``separate_process``)
        so a flood of file events never competes with the screen for the GIL; in-process is kept
        for callers that want no child (and is what the child itself runs)."""
        if self.watcher is None:
            redact = self.redactor.text if self.redactor else None
            if self.sandbox.remote:
                self.start_link()
                self.watcher = RemoteFileWatcher(lambda: self.sandbox.watch_files(self.ignore), self._commit_files,
                                                 self.folder / STATE / FILES_STATE, ignore=self.ignore, redact=redact,
                                                 wait_link=lambda t: self.link is None or self.link.wait_up(t),
                                                 trouble=self._link_trouble)
            elif separate_process:
                self.watcher = FileRecorder(self.workspace, self._record_files, self.folder / STATE / FILES_STATE,
                                            ignore=self.ignore, interval=interval, redact_pairs=self.redactor.pairs,
                                            on_error=self._file_error, on_rescan=self._files_rescanned)
            else:
                self.watcher = FileWatcher(self.workspace, self._record_files, self.folder / STATE / FILES_STATE,
                                           ignore=self.ignore, interval=interval, redact=redact, on_error=self._file_error,
                                           on_rescan=self._files_rescanned)
            self.watcher.start()
        return self.watcher

    def _file_error(self, exc: Exception) -> None:
        self._emit("error", f"recording file changes failed: {exc}")

    def _files_rescanned(self, info: dict[str, Any]) -> None:
        """A rescan of the workspace (``files.FileWatcher._rescan``) found what events did not say:
        the row says why it ran and how much it found (its changes are recorded just before it)."""
        found, files, took = info.get("found", 0), info.get("files", 0), info.get("seconds", 0.0)
        if info.get("lost"):
            text = (f"file events were lost ({str(info.get('reason'))[:200]}); a rescan of the {files} files found "
                    f"{found} change(s) they missed, recorded as 'found by a rescan', in {took:.2f} s")
        else:
            text = f"the rescan before a scoring found {found} change(s) not yet recorded, among {files} files, in {took:.2f} s"
        self.audit.append(log(text, {"event": "files_rescanned", **info}, title="recorder"))

    # -- the link to a remote engine ----------------------------------------------------------
    def start_link(self) -> LinkMonitor | None:
        """Watch the link to a remote engine (a heartbeat; loss and restore are recorded and announced)."""
        if not self.sandbox.remote:
            return None
        if self.link is None:
            self.link = LinkMonitor(self.sandbox.ping, self.sandbox.reconnect, self._link_lost, self._link_restored,
                                    interval=self.link_interval)
            self.link.start()
        return self.link

    def _link_trouble(self, exc: Exception) -> None:
        if self.link is not None:
            self.link.suspect()

    def _link_lost(self, error: str) -> None:
        host = self.sandbox.host
        self.audit.append(log(f"link to the engine at {host} lost: {error}; working time keeps running; reconnecting",
                              {"event": "link_lost", "host": host, "error": error,
                               "working_s": round(self.wclock.used(), 3)}, title="link"))
        self._emit("link_lost", f"link to {host} lost ({error.splitlines()[0][:160]}); reconnecting…")

    def _link_restored(self, outage_s: float, attempts: int) -> None:
        host = self.sandbox.host
        self.audit.append(log(f"link to the engine at {host} restored after {outage_s:.1f} s ({attempts} attempt(s)); "
                              "what happened there meanwhile is recorded next",
                              {"event": "link_restored", "host": host, "outage_s": round(outage_s, 3), "attempts": attempts},
                              title="link"))
        self._emit("link_restored", outage_s)
        if isinstance(self.watcher, RemoteFileWatcher):
            self.watcher.reopen()
        self.collect_commands()

    # -- commands ---------------------------------------------------------------------------
    def start_capture(self, interval: float = 1.0) -> bool:
        """Record the commands typed in the sandbox's shells (polled every ``interval`` s)."""
        if not self.sandbox.capture:
            self.audit.append(log(f"command capture is not available on the {self.sandbox.kind} runtime: shell commands "
                                  "are not recorded", {"event": "capture_unavailable"}, title="command"))
            return False
        self.start_link()
        if self._capture_thread is None:
            self.collector = CommandCollector(self.sandbox.read_file, self.folder / STATE / COMMANDS_STATE, self.folder / STATE / "tty",
                                              redact=self.redactor.data if self.redactor else None)
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
                    self._emit("error", f"reading the command log failed: {exc} (will retry)")
                return 0
            if rows:
                self._emit("commands", rows)
            return len(rows)

    def stop_capture(self) -> None:
        if self._capture_thread is not None:
            self._capture_stop.set()
            self._capture_thread.join(timeout=10)
            self._capture_thread = None
            self.collect_commands()

    def _record_files(self, changes: list[FileChange], raw_events: int) -> None:
        # interleave: a key press that records a row waits for one chunk of a flood, not for all of it
        self.audit.append_many([log(ch.summary(), ch.record(), title="file") for ch in changes], interleave=True)
        self._emit("files", (changes, raw_events))

    def _commit_files(self, changes: list[FileChange], raw_events: int, state: dict[str, Any]) -> None:
        """Rows and the files' state together (remote feed): a crash leaves neither gap nor duplicate."""
        self.journal.commit(self.folder / STATE / FILES_STATE, state,
                            [log(ch.summary(), ch.record(), title="file") for ch in changes])
        if changes:
            self._emit("files", (changes, raw_events))

    # -- clock ----------------------------------------------------------------------------
    def pause(self, reason: str = "") -> bool:
        with self._meta_lock:
            if self.finished or not self.wclock.pause():
                return False
            now = int(self.clock.time() * 1000)
            self.meta.pauses.append(Pause(start=now, reason="pauseHook"))
            self._save()
        self.audit.append(log(f"clock paused at {format_hms(self.wclock.used())} working time" + (f": {reason}" if reason else ""),
                              {"event": "pause", "reason": reason}, title="clock"))
        self._emit("paused")
        return True

    def resume(self) -> bool:
        with self._meta_lock:
            if self.finished or not self.wclock.resume():
                return False
            now = int(self.clock.time() * 1000)
            if self.meta.pauses and self.meta.pauses[-1].end is None:
                self.meta.pauses[-1].end = now
            self._save()
        self.audit.append(log(f"clock resumed at {format_hms(self.wclock.used())} working time", {"event": "resume"}, title="clock"))
        self._emit("resumed")
        return True

    def tick(self) -> list[int]:
        """Record time warnings now due; returns the thresholds (remaining seconds) newly crossed."""
        if self.finished:
            return []
        remaining = self.wclock.remaining()
        due = [t for t in crossed_warnings(self.meta.clock.limit_s + 1, remaining)
               if t not in self.meta.warnings_given and t < self.meta.clock.limit_s]
        if due:
            with self._meta_lock:
                self.meta.warnings_given.extend(due)
                self._save()
            # After a long gap (a resume) several may be due at once: record all, announce the most urgent.
            t = min(due)
            self.audit.append(log(f"{format_hms(t)} of working time left", {"event": "time_warning", "remaining_s": t,
                                                                           "also_passed": sorted(set(due) - {t})}, title="clock"))
            self._emit("warning", t)
        return due

    @property
    def time_is_up(self) -> bool:
        return self.wclock.expired and not self.finished

    # -- scoring --------------------------------------------------------------------------
    @property
    def scoring(self) -> bool:
        return self._score_lock.locked()

    def score(self, *, cancel: threading.Event | None = None, on_output: Callable[[str, bytes], None] | None = None,
              final: bool = False) -> ScoreRecord | None:
        """Run the protected scorer once; returns the record, or None if cancelled. Blocking."""
        if not self._score_lock.acquire(blocking=False):
            raise ScoringBusy("a scoring is already running", fix="wait for it to finish, or cancel it")
        try:
            if self.finished and not final:
                raise SessionError("this session is finished; scoring is closed", kept="all records")
            if self.wclock.expired and not final:
                # The limit holds for every caller (screen, `rebench-tui score`, a script): after zero only the
                # final scoring runs, on the files as they stand. The refused attempt is in the record.
                self.audit.append(log("scoring refused: the working time is up", {"event": "score_refused",
                                      "reason": "time_limit", "used_s": self.wclock.used()}, title="score"))
                raise SessionError(f"the working time of {format_hms(self.wclock.limit_s)} is up: only the final "
                                   "scoring runs now", kept="every record and your files as they are",
                                   fix=f"open the session (`rebench-tui resume {self.meta.id}`): it takes the final "
                                       "score and finishes")
            if not self.link_up:
                raise SessionError(f"the link to the engine at {self.sandbox.host} is down: scoring waits for it",
                                   kept="every record (nothing was lost; the container keeps running)",
                                   fix="score again once the status line says the link is back")
            if self.watcher is not None:
                # File changes made before the key press are recorded before it, by events and a rescan (some
                # events may have been lost): what is scored is in the record.
                self.watcher.flush(timeout=FLUSH_BEFORE_SCORING_S, rescan=True)
            if self._score_log_backlog:
                self.audit.flush()  # a full disk held rows back: they go first, or this scoring waits
                self._flush_score_log()
            attempt = self._attempt_info()  # which files this scoring scores: re-scores of them share it
            reservation = self.audit.reserve()
            argv = [self.sandbox.python, f"{self.sandbox.protected}/{self.env.manifest.score.scorer}"]
            marker = ScoringMarker(token_hex(16), reservation[0], reservation[1], final, attempt, self.profile.score_timeout)
            try:
                marker.save(self._marker_path)  # on disk before the scorer starts: a crash from here on is settled on resume
                # Links into the protected area are looked for in the scorer's own exec, before and after it.
                result = self.sandbox.exec(argv, user=self.env.manifest.score.user, timeout=self.profile.score_timeout,
                                           cancel=cancel, on_output=on_output, workdir=self.sandbox.home,
                                           guard_links=self._guard_links, token=marker.token)
            except Exception as exc:  # noqa: BLE001 - recorded, then raised as a readable error
                self.audit.fill(reservation, {"type": "error", "from": "server", "detail": f"scoring could not run: {exc}",
                                              "trace": None, "extra": None})
                ScoringMarker.clear(self._marker_path)
                self._emit("error", str(exc))
                raise RebenchError(f"scoring could not run: {exc}", kept="every earlier record",
                                   fix="check the container (`rebench-tui doctor`), then score again") from exc
            if result.refused_links:
                links = result.refused_links
                self._fill_refused(reservation, links)
                names = ", ".join(link for link, _target in links[:5])
                raise SessionError(f"scoring refused: {len(links)} symbolic link(s) in your files lead where the scorer's "
                                   f"held-out data is ({names}); the scorer runs as root and would follow them",
                                   kept="every record; the scorer did not run",
                                   fix="replace those links with ordinary files (copy what you need), then score again")
            if result.cancelled:
                self.audit.fill(reservation, log("scoring cancelled by the participant", {"event": "score_cancelled",
                                                                                          "duration_s": result.duration_s}, title="score"))
                ScoringMarker.clear(self._marker_path)
                return None
            parsed = self._parsed(result)
            details = {**parsed.details, "duration_s": round(result.duration_s, 3), "final": final, ATTEMPT_KEY: attempt}
            if result.timed_out:
                details["timeout_s"] = self.profile.score_timeout
            return self._record_score(reservation, parsed, details, result.duration_s, attempt)
        finally:
            self._score_lock.release()

    @property
    def _marker_path(self) -> Path:
        return self.folder / STATE / SCORING_STATE

    def _fill_refused(self, reservation: tuple[int, float | None], links: list[list[str]]) -> None:
        names = ", ".join(link for link, _target in links[:5])
        self.audit.fill(reservation, log(f"scoring refused: {len(links)} link(s) in the workspace lead into the protected "
                                         f"area: {names}", {"event": "score_refused", "links": links}, title="score"))
        ScoringMarker.clear(self._marker_path)

    def _parsed(self, result: ExecResult) -> ScoreResult:
        """The scorer's result as recorded: from its result channel (``parse_scorer_output``),
        secrets redacted, the scorer's identity added, withheld if links into the protected area
        appeared while it ran."""
        parsed = self._redacted(parse_scorer_output(result.result, result.stdout, result.stderr, result.exit_code,
                                                     timed_out=result.timed_out))
        parsed = self._with_scorer_identity(parsed)
        late = result.late_links
        if late:  # made while the scorer ran: what it printed may hold what they point at; none of it is kept
            parsed = ScoreResult(math.nan, {"error": "links into the protected area appeared during scoring; the result "
                                                     "is withheld: " + ", ".join(link for link, _t in late[:5])},
                                 {"withheld": True, "links": late, "exit_code": result.exit_code})
        return parsed

    def _record_score(self, reservation: tuple[int, float | None], parsed: ScoreResult, details: dict[str, Any],
                      duration_s: float, attempt: dict[str, Any]) -> ScoreRecord:
        """Write a scoring's row into its reservation, then the score log, the history and the index."""
        record = ScoreRecord(len(self.history) + 1, reservation[0], (reservation[1] or 0.0), parsed.score,
                             self._normalize(parsed.score), parsed.message, details, duration_s,
                             fingerprint=attempt.get("fingerprint"), n_files=attempt.get("n_files"))
        try:
            self.audit.fill(reservation, {"type": "intermediateScore", "score": json_score(parsed.score),
                                          "message": parsed.message, "details": details})
        except AuditWriteError:
            # The row waits in the log's queue and is written by the next successful write; its
            # score-log row waits here, so the two logs keep agreeing.
            self.history.append(record)
            self._score_log_backlog.append((reservation[0] / 1000, parsed.score, parsed.message, details))
            raise  # the marker stays: if the row never reaches the disk, the next resume settles the scoring
        ScoringMarker.clear(self._marker_path)
        self._score_log_backlog.append((reservation[0] / 1000, parsed.score, parsed.message, details))
        self._flush_score_log()
        self.history.append(record)
        if self.store is not None:
            self.store.add_score(self.id, record.attempt, record.called_at_ms, record.working_s, record.score,
                                 record.normalized, record.message, fingerprint=record.fingerprint)
            self._index()
        self._emit("score", record)
        return record

    def _settle_interrupted_scoring(self) -> dict[str, Any] | None:
        """On reopening: record a scoring the app died during (``scoring_marker``). Its supervisor
        in the sandbox is asked what became of it: finished, its result is collected and recorded
        as any scoring's; still running, its process group is ended and it is recorded as
        interrupted (score NaN) at its start time; no trace of it, interrupted all the same.
        Returns what was done (for the resume row), and says it in ``resume_notes``."""
        m = self._interrupted
        self._interrupted = None
        if m is None:
            return None
        if m.called_at not in self.audit._open:  # its row was written before the crash
            ScoringMarker.clear(self._marker_path)
            return None
        reservation = (m.called_at, m.usage)
        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(m.called_at / 1000))
        try:
            answer = self.sandbox.end_exec(m.token)
        except Exception as exc:  # noqa: BLE001 - the scoring is recorded all the same; the failure is said
            answer = {"state": "unreachable", "error": f"{type(exc).__name__}: {exc}"[:500]}
        state = answer.get("state")
        kept = answer.get("status") if state == "finished" and isinstance(answer.get("status"), dict) else None
        result = exec_result(kept, "", "") if kept is not None else None
        info: dict[str, Any] = {"started_at_ms": m.called_at, "started_at": started, "token": m.token,
                                "supervisor": {k: v for k, v in answer.items() if k != "status"}}
        if result is not None and not result.cancelled:
            # It ended by itself while no app ran: its result channel's content, read as any scoring's.
            if result.refused_links:
                self._fill_refused(reservation, result.refused_links)
                note = f"The scoring started at {started} was refused by the scorer's link check while the app was closed."
                self.resume_notes.append(note)
                return {**info, "outcome": "refused"}
            parsed = self._parsed(result)
            info["outcome"] = "collected"
            details = {**parsed.details, "duration_s": round(result.duration_s, 3), "final": m.final, ATTEMPT_KEY: m.attempt,
                       "recovered": {**info, "note": "the app ended while the scorer ran; the scorer finished and its "
                                                     "result was collected from the sandbox on resume"}}
            if result.timed_out:
                details["timeout_s"] = m.timeout_s
            record = self._record_score(reservation, parsed, details, result.duration_s, m.attempt)
            shown = "hidden" if self.hidden else f"{record.score:.6g}"
            self.resume_notes.append(f"The scoring started at {started} finished while the app was closed; its result was "
                                     f"collected and recorded as scoring {record.attempt} (score {shown}).")
            return info
        if result is not None:
            info["outcome"], info["ran_s"] = "ended", round(result.duration_s, 3)
            how = f"it had run {result.duration_s:.0f} s; its processes were ended on resume"
        elif state == "running":
            info["outcome"] = "still running"
            how = "its processes could NOT be ended (see `docker top`); they may still use the machine"
        elif state == "unreachable":
            info["outcome"] = "unknown"
            how = f"the sandbox could not be asked about it ({answer.get('error')})"
        else:
            info["outcome"] = "no trace"
            how = "the sandbox kept no trace of it (the container restarted, or it never started)"
        parsed = ScoreResult(math.nan, {"error": f"interrupted: the app ended while this scoring ran; {how}"}, {})
        details = {"interrupted": info, "final": m.final, ATTEMPT_KEY: m.attempt,
                   "duration_s": info.get("ran_s")}
        record = self._record_score(reservation, parsed, details, float(info.get("ran_s") or 0.0), m.attempt)
        self.resume_notes.append(f"The scoring started at {started} was interrupted when the app ended: {how}. "
                                 f"It is recorded as scoring {record.attempt}, interrupted (it does not count); score again.")
        return info

    def _attempt_info(self) -> dict[str, Any]:
        """The attempt fingerprint of the files about to be scored (``files.fingerprint``: every
        file of the home the recorder tracks), as ``{"fingerprint", "n_files", "source"}``.

        ``source`` says where the file state came from:

        - ``file recorder``: the session's recorder, as it knows the files after the flush that
          precedes every scoring (the watcher in this process, its child process, or the feed
          from a remote engine's poller): no file is read again;
        - ``workspace scan``: no recorder with a state (a headless ``rebench-tui score``, or a
          recorder that does not answer): the workspace folder, which is the home, hashed here;
        - ``remote scan``: no recorder on a remote engine: one scan of the home by the engine's
          file poller, there;
        - ``unavailable`` (with ``error``): none of these worked; ``fingerprint`` is null and the
          scoring is then an attempt of its own. A scoring is never refused for want of one.
        """
        got: tuple[str, int] | None = None
        source = "file recorder"
        try:
            if self.watcher is not None:
                got = self.watcher.state_fingerprint(timeout=10.0)
            if got is None:
                if not self.sandbox.remote:
                    source = "workspace scan"
                    got = fingerprint(scan(self.workspace, self.ignore))
                elif self.watcher is None:
                    source = "remote scan"
                    got = fingerprint(self._remote_scan())
                else:  # a second poller would end the feed's own (one per container): not opened
                    return {"fingerprint": None, "n_files": None, "source": "unavailable",
                            "error": "the remote file feed has not scanned the home yet"}
        except Exception as exc:  # noqa: BLE001 - the scoring goes ahead; this one is an attempt of its own
            return {"fingerprint": None, "n_files": None, "source": "unavailable", "error": f"{source}: {exc}"[:500]}
        return {"fingerprint": got[0], "n_files": got[1], "source": source}

    def _remote_scan(self) -> dict[str, dict[str, Any]]:
        """The remote home's files as the engine's poller describes them in its first (full) scan."""
        stream = self.sandbox.watch_files(self.ignore)
        try:
            for msg in stream:
                if msg.get("full"):
                    return {rel: {k: v for k, v in d.items() if k != "text"} for rel, d in msg.get("files", {}).items()}
            raise RebenchError("the file poller's stream ended before its first scan")
        finally:
            stream.close()

    def _with_scorer_identity(self, parsed: ScoreResult) -> ScoreResult:
        """Record which scorer produced the result: the digest it reported over its own files, and
        whether that is the digest of this environment's protected folder as catalogued here."""
        expected = self.env.scorer_sha256
        reported = parsed.details.get("scorer_sha256")
        details = {**parsed.details, "scorer_sha256": reported, "scorer_sha256_expected": expected,
                   "scorer_matches_catalog": reported == expected}
        return ScoreResult(parsed.score, parsed.message, details)

    def _flush_score_log(self) -> None:
        """Write score-log rows still waiting (a full disk held them back), oldest first."""
        while self._score_log_backlog:
            score_log.append(self.folder / SCORE_LOG, *self._score_log_backlog[0])
            self._score_log_backlog.pop(0)

    @property
    def _guard_links(self) -> bool:
        """Whether scoring looks for links into what only the scorer may read (isolated sandboxes)."""
        return bool(self.sandbox.isolated and self.sandbox.forbidden_link_targets)

    def _redacted(self, r: ScoreResult) -> ScoreResult:
        """A scorer that prints a secret (a service's key in a traceback) must not put it in the record."""
        if not self.redactor:
            return r
        return ScoreResult(r.score, json.loads(self.redactor.text(json.dumps(r.message))),
                           json.loads(self.redactor.text(json.dumps(r.details))))

    def attempts(self) -> list[Attempt]:
        """The scorings grouped into attempts (re-scores of the same files together), in the order
        of each attempt's first scoring; indexes are positions in ``history``."""
        return group_attempts([r.score for r in self.history], [r.fingerprint for r in self.history])

    def final(self) -> CountingScore | None:
        """The score that counts now (``scoring.counting_attempt``): each attempt scores the median
        of its valid re-scores; the best attempt counts (or, for ``last``, the attempt of the last
        valid scoring). None while no scoring is valid."""
        a = counting_attempt([r.score for r in self.history], self.aggregation, [r.fingerprint for r in self.history])
        return None if a is None else CountingScore.of(a, [r.attempt for r in self.history], self._normalize)

    # -- notes, submission, end ----------------------------------------------------------
    def note(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        self.audit.append(log(text, {"event": "note", "note": text}, title="note"))
        self._emit("note", text)

    def submit(self, value: str = "") -> ScoreRecord | None:
        """Final submission: one last scoring, the submission row, then the session is finished."""
        if self.finished:
            raise SessionError("this session is already finished", kept="all records")
        record = self.score(final=True)
        self.audit.append({"type": "submission", "value": value})
        with self._meta_lock:
            self.meta.submission = value
        self.finish("submitted")
        return record

    def finish(self, reason: str) -> None:
        if self.finished:
            return
        with self._meta_lock:
            self.wclock.pause()
            if self.meta.pauses and self.meta.pauses[-1].end is None:
                self.meta.pauses[-1].end = int(self.clock.time() * 1000)
            best = self.final()
            self.meta.status = "finished"
            self.meta.finish_reason = reason
            self.meta.completed_at = int(self.clock.time() * 1000)
            self.meta.final_score = None if best is None else best.score
            self.meta.final_attempt = None if best is None else best.representative
            self.meta.final_scorings = [] if best is None else list(best.scorings)
            self._save()
        # What the record ends with: the score log and the workspace, by hash (`verify` rechecks them).
        # A remote home is copied here first, so the session folder holds the work it records.
        sync_note = None
        if self.sandbox.remote:
            try:
                fresh = self.folder / STATE / "home-sync"
                shutil.rmtree(fresh, ignore_errors=True)
                skipped = self.sandbox.sync_home(fresh, self.ignore)
                shutil.rmtree(self.workspace, ignore_errors=True)
                fresh.rename(self.workspace)
                if skipped:
                    sync_note = f"{len(skipped)} entr(ies) of the remote home not copied as unsafe: " + "; ".join(skipped[:20])
            except Exception as exc:  # noqa: BLE001 - the finish is recorded all the same, with what is here
                sync_note = f"the home could not be copied from {self.sandbox.host} ({exc}); hashes are of the local copy"
        files = {SCORE_LOG: sha256_file(self.folder / SCORE_LOG)}
        files.update({f"{WORKSPACE}/{rel}": d["sha256"] for rel, d in scan(self.workspace, self.ignore).items() if d["sha256"]})
        self.audit.append(log(
            f"session finished ({reason}); final score "
            + (f"{best.score:.4g} ({_counting_words(best)}, rule {self.aggregation.value})" if best else "none (no valid scoring)"),
            {"event": "session_finished", "reason": reason, "final_score": json_score(best.score) if best else None,
             "final_attempt": best.representative if best else None,
             "final_scorings": list(best.scorings) if best else [], "working_s": self.wclock.used(), "files": files,
             **({"files_note": sync_note} if sync_note else {})},
            title="session",
        ))
        self._index()
        self._emit("finished", reason)

    def finish_at_time_limit(self) -> ScoreRecord | None:
        """At zero: take the final score on the work as it stands, then finish."""
        record = None
        if self.sandbox.is_running():
            while self.scoring:  # a scoring already under way counts; wait for it
                time.sleep(0.1)
            record = self.score(final=True)
        self.finish("time_limit")
        return record

    def close(self, *, pause_clock: bool | None = True) -> None:
        """Leave the app. The container keeps running. The clock pauses (True), keeps running
        (False, recorded as the participant's choice), or is left as it is (None: a headless command)."""
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
        self.stop_capture()
        if self.link is not None:
            self.link.stop()
            self.link = None
        if not self.finished and pause_clock is not None:
            if pause_clock:
                self.pause("app closed")
            else:
                self.audit.append(log("app closed; the clock keeps running (the participant chose so)",
                                      {"event": "app_closed", "clock_running": True}, title="session"))
        if self._score_log_backlog:
            self.audit.flush()
            self._flush_score_log()
        self._save()
        self._index()
        self.lock.release()

    def status_line(self) -> str:
        d = self.sandbox.describe()
        iso = "isolated" if self.sandbox.isolated else "NOT ISOLATED"
        return f"{self.env.id} · {self.meta.profile} · {d.get('runtime')} ({iso}) · host {d.get('host')} · GPUs {d.get('gpus', 0)}"


def _counting_words(c: CountingScore) -> str:
    if c.n == 1:
        return f"scoring {c.representative}"
    return f"median of {c.n} scorings of unchanged files ({', '.join(map(str, c.scorings))}), range {c.low:.4g} to {c.high:.4g}"


def describe_change(ch: FileChange) -> str:
    size = "" if ch.size is None else human_size(ch.size)
    return f"{ch.event:8} {ch.path}{' -> ' + ch.dest if ch.dest else ''} {size}".rstrip()
