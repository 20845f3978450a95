"""The workstation screen: instructions, countdown, score history, file feed, status line.

This module holds the app itself: its layout and bindings, the worker path every session command
takes, the clock's tick, the shell, and closing the session; the rest of its behaviour is mixed in
from the ``app_*`` modules beside it.

Every blocking call runs in a thread worker that posts messages back; handlers update widgets.
Time is read from the session's working clock (computed from an injected clock on each tick),
never counted in ticks.
"""

from __future__ import annotations

import asyncio
import gc
import subprocess
import threading
import time
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Callable, Iterable

from textual import on
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Markdown, Static
from textual.worker import Worker, WorkerFailed, WorkerState

from ..catalog.setting import recorded_differences
from ..errors import RebenchError
from ..session import Session
from .app_actions import PALETTE, SessionActions
from .app_events import SessionEventView
from .app_scoring import ScoringControls
from .app_status import StatusPanes
from .keymap import load_keymap
from .messages import SessionUpdate
from .widgets.countdown import Countdown
from .widgets.file_feed import FileFeed
from .widgets.score_history import ScoreChart, ScoreTable


class RebenchApp(StatusPanes, SessionEventView, ScoringControls, SessionActions, App[None]):
    """The screen of one session. Its pieces are mixins, each in its module: the status line and
    info pane (:mod:`.app_status`), the session's events (:mod:`.app_events`), scoring
    (:mod:`.app_scoring`) and the other keys (:mod:`.app_actions`); the layout, the one path of
    commands to the session, the clock's tick, the shell and closing are here."""

    CSS_PATH = "app.tcss"
    TITLE = "rebench-tui"
    # app.tcss lays the screen out by these classes: below 140 columns the instructions, anchors and
    # setting (the info pane) are hidden until the info key shows them, so the score history keeps
    # its room; below 36 rows the countdown is one line and the chart smaller.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (140, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (36, "-tall")]
    BINDINGS = [
        Binding("s", "score", "Score", id="score"),
        Binding("c", "cancel_score", "Cancel scoring", id="cancel_score", show=False),
        Binding("p", "pause", "Pause", id="pause"),
        Binding("n", "note", "Note", id="note"),
        Binding("t", "shell", "Shell", id="shell"),
        Binding("x", "submit", "Submit", id="submit"),
        Binding("v", "compare", "Compare", id="compare"),
        Binding("i", "info", "Info", id="info"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("q", "quit_confirm", "Quit", id="quit"),
        Binding("ctrl+c", "quit_confirm", "Quit", id="quit_ctrl_c", show=False, priority=True),
    ]

    def __init__(self, session: Session, *, keymap_path: Path | None = None, keymap: dict[str, str] | None = None,
                 tick_s: float = 0.25, watch_files: bool = True, agent_runs: str | None = None, witness=None) -> None:
        super().__init__()
        self.session = session
        self.witness = witness  # a study's witness (study.witness.Witness): its state is on the status line
        self.tick_s = tick_s
        self.watch_files = watch_files
        # Checked here, before the app runs: a bad file is a RebenchError for the caller, not a traceback.
        self.keymap = keymap if keymap is not None else load_keymap(keymap_path, self.binding_ids())
        self.agent_runs = agent_runs  # Settings.agent_runs ($REBENCH_AGENT_RUNS): shown by the compare key
        self._cancel = threading.Event()
        self._score_started: float | None = None
        self._finishing = False
        self._finish_step = ""  # the finish's step under way (final scoring, recount n of N)
        self._finish_done = ""  # and what its last step gave
        self._link_up = session.link_up
        self._history: tuple[ScoreRecord, ...] = ()
        self.closed_with: str | None = None  # "pause" | "keep" once quit

    # -- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        s = self.session
        yield Static(self._status_text(), id="status", classes="" if s.sandbox.isolated else "unsafe")
        with Horizontal(id="main"):
            with VerticalScroll(id="left"):
                yield Markdown(s.env.instructions, id="instructions")
                yield Static("This session", classes="section")
                yield Static(self._anchors_text(), id="anchors", classes="stale" if self._anchors_stale() else "")
                yield Static(self._setting_text(), id="setting",
                             classes="differs" if recorded_differences(s.meta.setting) else "")
            with Vertical(id="right"):
                yield Countdown(id="countdown")
                yield Static("", id="best")
                yield Static("", id="scoring")
                yield Static("Score history", classes="section")
                with Vertical(id="history"):
                    yield ScoreTable(s.hidden, id="score-table")
                    yield ScoreChart(s.hidden, s.aggregation, id="score-chart", rule=s.meta.rule())
                yield Static("Files and commands", classes="section")
                yield FileFeed(id="files")
        yield Footer(compact=True, show_command_palette=False)  # ctrl+p still opens it (help says so)

    @classmethod
    def binding_ids(cls) -> set[str]:
        """The ids a keymap file may remap."""
        return {b.id for b in cls.BINDINGS if isinstance(b, Binding) and b.id}

    def on_mount(self) -> None:
        if self.keymap:
            self.set_keymap(self.keymap)
        self._show_history(tuple(self.session.history), self.session.final())
        self.session.subscribe(lambda ev: self.post_message(SessionUpdate(ev)))
        if self.watch_files:
            self._command(self._start_recording, group="watch")
        self.refresh_clock()
        self.set_interval(self.tick_s, self.refresh_clock)
        if self.witness is not None:
            self.set_interval(1.0, self._show_witness)
        if self.session.finished:
            self.query_one(FileFeed).add_line("this session is finished: records are read-only, scoring is closed")
        for note in self.session.resume_notes:  # e.g. a scoring the app died during, settled on reopening
            self.query_one(FileFeed).add_line(note)
            self.notify(note, severity="warning", timeout=30)
        # The screen's long-lived objects (widgets, styles, the session) leave the cyclic collector's
        # view: during a file flood its full passes over them paused the screen for up to ~90 ms.
        gc.freeze()

    # -- the one path to the session: commands go out through workers, events come back --
    def _command(self, fn: Callable[..., object], *args: object, group: str = "record", **kwargs: object) -> Worker[object]:
        """Run a session command off the event loop (every disk write and every blocking call goes
        this way). Its result comes back as the session's events; a failure, of any kind, comes back
        to ``on_worker_state_changed``. Scorings run in their own group so a pause or a note never
        waits for one."""
        return self.run_worker(partial(fn, *args, **kwargs), thread=True, exit_on_error=False, group=group,
                               name=getattr(fn, "__name__", "command"))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """The one handler of a failed command: the screen says what went wrong and stays usable."""
        if event.state != WorkerState.ERROR or event.worker.error is None:
            return
        if event.worker.group == "score":
            self._scoring_ended()
        self.notify(_failure_text(event.worker.error, event.worker.name), severity="error", timeout=30)

    def _start_recording(self) -> None:
        self.session.start_watching()
        self.session.start_capture()
        self.session.desk.start()  # the shell's `task` commands, carried out by the session's own commands

    # -- clock ----------------------------------------------------------------------------
    def refresh_clock(self) -> None:
        s = self.session
        w = s.wclock
        try:
            self.query_one(Countdown).show(w.remaining(), w.used(), w.limit_s, w.running, s.finished)
            if self._score_started is not None:
                self.query_one("#scoring", Static).update(self._scoring_words())
        except NoMatches:  # a last tick while the app is being torn down: its widgets are going
            return
        if s.time.due():
            self._command(s.tick, group="clock")  # the warning's records are written off the event loop
        if s.time_is_up and not self._finishing:
            self.notify("Working time is up: taking the final score now.", severity="warning", timeout=10)
            self._take_final()

    # -- session events -------------------------------------------------------------------
    @on(SessionUpdate)
    def _on_session_update(self, msg: SessionUpdate) -> None:
        try:
            self._show_event(msg.event)
        except NoMatches:  # an event that arrives while the app is being torn down: it is recorded already
            pass

    # -- the shell, the palette, closing --------------------------------------------------
    async def action_shell(self) -> None:
        s = self.session
        if s.finished:
            self.notify("This session is finished: its record takes nothing more (start a new session to keep working).")
            return
        argv, env, cwd = s.sandbox.shell_command()
        try:
            await self._command(s.ending.shell_opened, argv).wait()
        except WorkerFailed:  # not recorded (a full disk?): on_worker_state_changed said so; no unrecorded shell
            return
        try:
            with self.suspend():
                print(f"\n[rebench-tui] shell in {s.env.id} ({'container' if s.sandbox.isolated else 'NOT ISOLATED, this machine'}). "
                      "Exit the shell (Ctrl-D) to return; the clock keeps running.\n", flush=True)
                rc = subprocess.run(argv, env=env, cwd=cwd).returncode
        except Exception as exc:  # noqa: BLE001 - SuspendNotSupported, missing docker CLI, ...
            self.notify(f"Cannot open a shell here: {exc}. Run instead: {' '.join(argv)}", severity="error", timeout=20)
            rc = None
        self._command(self._shell_closed, rc)
        self.refresh()

    def _shell_closed(self, rc: int | None) -> None:
        s = self.session
        s.recording.flush(timeout=1.0)  # changes made in the shell are recorded before it is marked closed
        s.ending.shell_closed(rc)
        s.collect_commands()  # what was typed in it, recorded now rather than at the next poll

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """The command palette (ctrl+p) offers the session's commands too, each with its key as
        the keymap file set it."""
        yield from super().get_system_commands(screen)
        for b in self.BINDINGS:
            if isinstance(b, Binding) and b.id in PALETTE:
                key = self.get_key_display(replace(b, key=self.keymap.get(b.id, b.key), key_display=None))
                yield SystemCommand(f"{b.description} ({key})", PALETTE[b.id], getattr(self, f"action_{b.action}"))

    async def on_unmount(self) -> None:
        """Close the session in a thread, off the screen's: waiting for a cancelled scoring to
        record itself and writing the closing rows never block the event loop."""
        await asyncio.to_thread(self._close_session)

    def _close_session(self) -> None:
        deadline = time.monotonic() + 30
        while self.session.scoring and time.monotonic() < deadline:
            time.sleep(0.05)
        if self.session.lock.held:  # else closed already (or never opened here)
            self.session.close(pause_clock=self.closed_with != "keep")


# What each command is called when it fails (by its worker's name).
COMMAND_WORDS = {"score": "scoring", "submit": "the submission", "finish_at_time_limit": "the final scoring",
                 "pause": "pausing the clock", "resume": "resuming the clock", "note": "saving the note",
                 "tick": "recording the time warning", "shell_opened": "recording the shell",
                 "_shell_closed": "recording the shell", "_start_recording": "starting the recorders"}


def _failure_text(exc: BaseException, command: str = "score") -> str:
    """A command's failure as the participant reads it: our errors say what was kept and what to do."""
    if isinstance(exc, RebenchError):
        return str(exc)
    what = COMMAND_WORDS.get(command, command)
    again = "score again" if command == "score" else "try again"
    return (f"{what} failed: {type(exc).__name__}: {exc}\nKept: every record written before it"
            f"\nNext: fix the cause (a full disk?), then {again}")
