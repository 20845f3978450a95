"""A session: one participant's attempt at one environment, and everything it records.

``Session`` is a facade over small services that share one ``SessionCore`` (folder, records,
clocks, sandbox, listeners): ``Timekeeping`` (pauses, warnings, the limit), ``Recording`` (files,
commands, the link to a remote engine), ``Scorer`` (the rules on scoring, then flush, exec, parse,
record) and ``Ending`` (notes, shell rows, submission, finish). Every rule lives in a service, so
the screen, the CLI and a script obey the same ones. Every record is durable (fsynced) before a
listener hears of it; listeners get typed events (``events``) from whatever thread produced them.
Blocking calls (``score``, ``submit``) are meant for worker threads; the session never touches a
screen.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Callable

from ..assets import AssetStore
from ..catalog import Anchors, Environment, Rehearsal
from ..clock import Clock
from ..runtime import Runtime, Sandbox
from ..scoring import Attempt
from ..store import Store
from ..trajectory.records import CountingScore, Participant, ScoreRecord, SessionMeta
from .core import SessionCore
from .desk import Desk
from .ending import Ending
from .events import Listener, SessionEvent
from .interrupted import settle_interrupted_scoring
from .layout import LOCK
from .link import LinkMonitor
from .lock import SessionLock
from .opening import create_session, open_session
from .recording import Recording, Watcher
from .scorer import Scorer, ScoringBusy
from .timekeeping import Timekeeping

__all__ = ["ScoringBusy", "Session", "SessionEvent"]


class Session:
    def __init__(self, folder: Path, meta: SessionMeta, env: Environment, sandbox: Sandbox, clock: Clock,
                 store: Store | None = None, secrets: dict[str, str] | None = None) -> None:
        self.core = core = SessionCore(folder, meta, env, sandbox, clock, store, secrets)
        self.folder, self.meta, self.env, self.sandbox, self.clock, self.store = folder, meta, env, sandbox, clock, store
        self.profile, self.direction, self.aggregation = core.profile, core.direction, core.aggregation
        self.wclock, self.redactor, self.audit, self.history = core.wclock, core.redactor, core.audit, core.history
        self.time = Timekeeping(core)
        self.recording = Recording(core)
        self.scorer = Scorer(core, self.recording)
        self.ending = Ending(core, self.scorer, self.time)
        self.desk = Desk(self)  # carries out the shell's `task` requests once started (the app does)
        self.lock = SessionLock(folder / LOCK)
        self.resume_notes: list[str] = []  # what the participant is told on reopening (the screen, the CLI)

    @classmethod
    def create(cls, env: Environment, profile_name: str, runtime: Runtime, sessions_dir: Path, *,
               time_limit_s: float | None = None, clock: Clock | None = None, store: Store | None = None,
               progress: Callable[[str], None] = lambda _m: None, extra_env: dict[str, str] | None = None,
               asset_store: AssetStore | None = None, secrets: dict[str, str] | None = None,
               anchors: Anchors | None = None, rehearsal: Rehearsal | None = None,
               participant: Participant | None = None) -> "Session":
        """A new session; ``opening.create_session`` says what each option does."""
        return create_session(cls, env, profile_name, runtime, sessions_dir, time_limit_s=time_limit_s, clock=clock,
                              store=store, progress=progress, extra_env=extra_env, asset_store=asset_store,
                              secrets=secrets, anchors=anchors, rehearsal=rehearsal, participant=participant)

    @classmethod
    def open(cls, folder: Path, env: Environment, runtime: Runtime, *, clock: Clock | None = None,
             store: Store | None = None, secrets: dict[str, str] | None = None) -> "Session":
        return open_session(cls, folder, env, runtime, clock=clock, store=store, secrets=secrets)

    def settle_interrupted_scoring(self) -> dict | None:
        return settle_interrupted_scoring(self.scorer, self.resume_notes)

    # -- what the session is --------------------------------------------------------------
    @property
    def id(self) -> str:
        return self.meta.id

    @property
    def workspace(self) -> Path:
        return self.core.workspace

    @property
    def ignore(self) -> tuple[str, ...]:
        return self.core.ignore

    @property
    def finished(self) -> bool:
        return self.core.finished

    @property
    def hidden(self) -> bool:
        return self.core.hidden

    @property
    def anchors(self) -> Anchors:
        """What this session's scores are normalized with, and where those figures come from."""
        return Anchors.from_record(self.meta.anchors, fallback=(self.meta.start_score, self.meta.reference_score))

    def subscribe(self, listener: Listener) -> None:
        self.core.listeners.append(listener)

    def status_line(self) -> str:
        d, iso = self.sandbox.describe(), "isolated" if self.sandbox.isolated else "NOT ISOLATED"
        of = (f" of {self.profile.gpus} (rehearsal)" if self.meta.gpus else "") + self.core.clear_note
        # the isolation first: a narrow terminal cuts a line's end, and this is what must not be lost
        return f"{d.get('runtime')} ({iso}) · {self.env.id} · {self.meta.profile} · host {d.get('host')} · GPUs {d.get('gpus', 0)}{of}"

    # -- recording (``recording``) --------------------------------------------------------
    @property
    def watcher(self) -> Watcher | None:
        return self.recording.watcher

    @property
    def link(self) -> LinkMonitor | None:
        return self.recording.link

    @property
    def link_interval(self) -> float:
        return self.recording.link_interval

    @link_interval.setter
    def link_interval(self, seconds: float) -> None:
        self.recording.link_interval = seconds

    @property
    def link_up(self) -> bool:
        return self.recording.link_up

    @property
    def recovered(self) -> list[str]:
        return self.recording.recovered

    def start_watching(self, interval: float = 0.2, separate_process: bool = True) -> Watcher:
        return self.recording.start_watching(interval, separate_process)

    def start_capture(self, interval: float = 1.0) -> bool:
        return self.recording.start_capture(interval)

    def collect_commands(self) -> int:
        return self.recording.collect_commands()

    # -- the clock (``timekeeping``) ------------------------------------------------------
    def pause(self, reason: str = "") -> bool:
        return self.time.pause(reason)

    def resume(self) -> bool:
        return self.time.resume()

    def tick(self) -> list[int]:
        return self.time.tick()

    @property
    def time_is_up(self) -> bool:
        return self.time.time_is_up

    # -- scoring (``scorer``) -------------------------------------------------------------
    @property
    def scoring(self) -> bool:
        return self.scorer.running

    def score(self, *, cancel: threading.Event | None = None, on_output: Callable[[str, bytes], None] | None = None,
              final: bool = False) -> ScoreRecord | None:
        """Run the protected scorer once; returns the record, or None if cancelled. Blocking."""
        return self.scorer.score(cancel=cancel, on_output=on_output, final=final)

    def final(self) -> CountingScore | None:
        return self.core.final()

    def attempts(self) -> list[Attempt]:
        return self.core.attempts()

    # -- notes, submission, end (``ending``) ----------------------------------------------
    def note(self, text: str) -> None:
        self.ending.note(text)

    def submit(self, value: str = "") -> ScoreRecord | None:
        return self.ending.submit(value)

    def finish(self, reason: str) -> None:
        self.ending.finish(reason)

    def finish_at_time_limit(self) -> ScoreRecord | None:
        return self.ending.finish_at_time_limit()

    def close(self, *, pause_clock: bool | None = True) -> None:
        """Leave the app. The container keeps running (a finished session's stops if it holds GPUs, to free
        them). The clock pauses (True), keeps running (False, the participant's choice), or is left (None)."""
        self.desk.stop()
        self.recording.stop()
        self.ending.release_gpus()
        self.ending.closing(pause_clock)  # the row that says it was closed, not interrupted
        self.scorer.flush_backlog()
        self.core.save()
        self.core.index()
        self.lock.release()
