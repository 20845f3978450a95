"""The workstation screen: instructions, countdown, score history, file feed, status line.

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

from textual import on, work
from textual.app import App, ComposeResult, SystemCommand
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.widgets import Footer, Markdown, Static
from textual.worker import Worker, WorkerFailed, WorkerState

from ..catalog.setting import recorded_differences, setting_words
from ..clock import format_hms
from ..errors import RebenchError
from ..scoring import Attempt
from ..session import Session
from ..session.ending import counting_words
from ..session.events import (ClockChanged, CommandsRecorded, FilesRecorded, LinkLost, LinkRestored, NoteSaved,
                              RecordingTrouble, ScoreRecorded, ScoringCancelled, SessionEvent, SessionFinished,
                              TimeWarning)
from ..trajectory.records import CountingScore, ScoreRecord
from .keymap import load_keymap
from .messages import SessionUpdate
from .screens.dialogs import HelpScreen, NoteScreen, QuitScreen, SubmitScreen
from .widgets.countdown import Countdown
from .widgets.file_feed import FileFeed
from .finish_words import RULE_WORDS, final_scored, recount_progress, rule_sentence, scoring_words
from .widgets.score_history import ScoreChart, ScoreTable, _fmt, fmt_normalized, message_text


class RebenchApp(App[None]):
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

    def _anchors_text(self) -> str:
        """Where the start and reference scores that normalize this session come from."""
        a = self.session.anchors
        return f"anchors ({a.kind}): start {a.start:g}, reference {a.reference:g} — {a.summary}"

    def _setting_text(self) -> str:
        """Whether this session runs in the paper's setting, and where it does not (list -v has the why)."""
        record = self.session.meta.setting
        differs = recorded_differences(record)
        if not differs:
            return setting_words(record)
        return (f"setting: differs from the paper's in {len(differs)} — "
                + "; ".join(f"{d['name']}: {d['here']}" for d in differs) + " (rebench-tui list -v says why)")

    def _anchors_stale(self) -> bool:
        return bool(self.session.anchors.provenance.get("stale")) or self.session.anchors.kind == "uncalibrated"

    def _status_text(self, link_up: bool = True) -> str:
        s = self.session
        # the warnings come first: a narrow terminal cuts the line's end, never them
        warn = "" if s.sandbox.isolated else "⚠ "
        why = "" if s.sandbox.isolated else " · commands and the scorer run as you"
        link = "" if link_up else f"⚠ LINK DOWN to {s.sandbox.host}: reconnecting; the clock keeps running, records are kept · "
        seen = "" if self.witness is None else f" · {self.witness.words()}"
        return f"{link}{warn}{s.status_line()}{seen} · {s.meta.title} · session {s.id}{why}"

    def _show_witness(self) -> None:
        status = self.query_one("#status", Static)
        status.update(self._status_text(self._link_up))
        status.set_class(not self.witness.state().current, "witness-behind")

    def _show_link(self, up: bool) -> None:
        self._link_up = up
        status = self.query_one("#status", Static)
        status.update(self._status_text(up))
        status.set_class(not up, "link-down")

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

    def _show_event(self, event: SessionEvent) -> None:
        """Each event updates the screen from what it carries, never from the session's state."""
        feed = self.query_one(FileFeed)
        match event:
            case FilesRecorded(changes=changes, raw_events=raw):
                feed.add_batch(list(changes), raw)
            case CommandsRecorded():
                for when, line in event.feed_items():
                    feed.add_line(line, stamp=when)
            case ScoreRecorded():
                self._score_recorded(event)
            case ScoringCancelled():
                self._scoring_ended()
                self.notify("Scoring cancelled; recorded as cancelled.")
            case TimeWarning(remaining_s=t):
                self.notify(f"{format_hms(t)} of working time left", severity="warning", timeout=15)
            case ClockChanged(running=running):
                self.notify("Clock running." if running else "Clock paused. Press p to resume.")
                self.refresh_clock()
            case NoteSaved(text=text):
                feed.add_line(f"note saved: {text}")
            case SessionFinished(reason=reason, counting=counting):
                self._scoring_ended()  # a finish with no final scoring (the container was gone) ends "scoring…" too
                self.refresh_clock()
                self._show_best(counting, len(self._history))
                if counting is None or self.session.hidden:
                    counted = ""
                else:
                    counted = (f" Counts: {_fmt(counting.score)} (normalized {fmt_normalized(counting.normalized)}), "
                               f"{counting_words(counting)}.")
                    self.query_one(FileFeed).add_line(f"the finish: counts {_fmt(counting.score)}, {counting_words(counting)}",
                                                      stamp=self.session.clock.time())
                self.notify(f"Session finished ({reason}).{counted} Records are complete; press q to quit.", timeout=30)
            case RecordingTrouble(text=text):
                self.notify(text, severity="error", timeout=20)
            case LinkLost(host=host, error=error):
                self._show_link(up=False)
                feed.add_line(f"⚠ link to {host} lost ({error}); reconnecting…")
                self.notify(f"Link to {host} lost ({error}); reconnecting… Working time keeps running (pause with p); "
                            "scoring waits for the link.", severity="error", timeout=20)
            case LinkRestored(host=host, outage_s=outage):
                self._show_link(up=True)
                feed.add_line(f"link restored after {outage:.0f} s")
                self.notify(f"Link to {host} restored after {outage:.0f} s; nothing was lost.", timeout=10)

    def _show_history(self, history: tuple[ScoreRecord, ...], counting: CountingScore | None) -> list[Attempt]:
        """The score table, the chart and the counting line, from a snapshot of the scorings;
        returns the scorings grouped into attempts."""
        self._history = history
        # the finish's recount scorings are a group of their own (they count alone: scoring.Rule)
        attempts = self.session.meta.rule().attempts(
            [r.score for r in history], [f"recount:{r.fingerprint}" if r.recount else r.fingerprint for r in history])
        self.query_one(ScoreTable).show(list(history), attempts, counting)
        self.query_one(ScoreChart).set_records(list(history))
        self._show_best(counting, len(history))
        return attempts

    def _show_best(self, best: CountingScore | None, n_scorings: int) -> None:
        meta = self.session.meta
        rule = RULE_WORDS[self.session.aggregation.value]
        anchors = f"start {meta.start_score:g}, reference {meta.reference_score:g}"
        if self.session.hidden:
            text = f"{n_scorings} scoring(s) · scores are hidden in this environment"
        elif best is None:
            text = f"no valid score yet · counts: {rule} · {anchors}"
        else:
            spread = f"{_fmt(best.low)}–{_fmt(best.high)}"
            if best.recount:  # the finish's fresh scorings of the leading attempt
                which = f"attempt {best.attempt} recounted at the finish: median of {best.n} fresh scorings, {spread}"
            elif best.n == 1:
                which = f"attempt {best.attempt}, scoring {best.representative}, one scoring: no spread yet"
            else:  # re-scores of unchanged files: their median counts, not the luckiest of them
                which = f"attempt {best.attempt}: median of {best.n} re-scores, {spread}"
            runs = meta.recount_runs
            later = f" · at the finish it is scored {runs} more times" if runs and not self.session.finished else ""
            text = (f"counts ({rule}): {_fmt(best.score)} (normalized {fmt_normalized(best.normalized)}, {which})"
                    f"{later} · {anchors}")
        self.query_one("#best", Static).update(text)

    # -- scoring --------------------------------------------------------------------------
    def _scoring_words(self) -> str:
        """The scoring line: what runs now (the finish says which of its steps) and for how long."""
        took = f"{time.monotonic() - self._score_started:.0f} s" if self._score_started is not None else ""
        if not self._finishing:
            return f"scoring… {took} (press c to cancel)"
        done = f"{self._finish_done} · " if self._finish_done else ""
        return f"{done}{self._finish_step}… {took}"

    def _begin_scoring(self) -> None:
        self._cancel.clear()
        self._score_started = time.monotonic()
        self.query_one("#scoring", Static).update(self._scoring_words())

    def _scoring_ended(self) -> None:
        self._score_started = None
        self.query_one("#scoring", Static).update("")

    def action_score(self) -> None:
        s = self.session
        if s.finished:
            self.notify("This session is finished; scoring is closed.", severity="warning")
            return
        if not self._link_up:
            self.notify(f"The link to {s.sandbox.host} is down: scoring waits for it (nothing is lost).", severity="warning")
            return
        if self._score_started is not None:
            self.notify("A scoring is already running (press c to cancel it).", severity="warning")
            return
        self._begin_scoring()
        self._command(s.score, cancel=self._cancel, group="score")

    def _take_final(self, submission: str | None = None) -> None:
        """The final scoring, then the finish (the session finishes even if that scoring fails)."""
        self._finishing = True
        self._finish_step = "the finish: final scoring of your files as they are"
        self._finish_done = ""
        self._begin_scoring()
        s = self.session
        if submission is None:
            self._command(s.finish_at_time_limit, group="score")
        else:
            self._command(s.submit, submission, group="score")

    def _score_recorded(self, event: ScoreRecorded) -> None:
        attempts = self._show_history(event.history, event.counting)
        rec = event.record
        if self._finishing and event.final:  # a step of the finish (SessionFinished, which comes after, ends it)
            self._finish_progress(rec, event.history, attempts)
            return
        self._scoring_ended()
        what = scoring_words(rec, attempts)
        if self.session.hidden:
            self.notify(f"{what[:1].upper()}{what[1:]} recorded (scores are hidden in this environment).")
        elif rec.valid:
            self.notify(f"{what[:1].upper()}{what[1:]}: {_fmt(rec.score)} (normalized {fmt_normalized(rec.normalized)})"
                        + _rescore_note(attempts, rec))
        else:
            self.notify(f"{what[:1].upper()}{what[1:]}: NaN — {message_text(rec.message)}", severity="error", timeout=15)

    def _finish_progress(self, rec: ScoreRecord, history: tuple[ScoreRecord, ...], attempts: list[Attempt]) -> None:
        """One step of the finish is recorded: the scoring line says what it gave and what runs now;
        the feed keeps each step."""
        runs = self.session.meta.recount_runs
        if self.session.hidden:
            done = f"{scoring_words(rec, attempts)} recorded"
        elif rec.recount:
            done = recount_progress(rec, history)
        else:
            done = final_scored(rec, attempts, runs)
        self.query_one(FileFeed).add_line(done, stamp=self.session.clock.time())  # the session's clock: tests fix it
        self._finish_done = done
        info = rec.details.get("recount") if rec.recount else None
        if rec.recount and isinstance(info, dict) and isinstance(info.get("run"), int) and info["run"] < info.get("runs", 0):
            self._finish_step = f"recount {info['run'] + 1} of {info['runs']} of attempt {info.get('of_attempt', '?')}"
        elif not rec.recount and runs > 0:
            self._finish_step = f"recount 1 of {runs} of the leading attempt"
        else:
            self._finish_step = "writing the finish"
        self._score_started = time.monotonic()
        self.query_one("#scoring", Static).update(self._scoring_words())

    def action_cancel_score(self) -> None:
        if self._score_started is None:
            self.notify("No scoring is running.")
            return
        self._cancel.set()
        self.query_one("#scoring", Static).update("cancelling…")

    # -- clock, notes, shell, submit, quit ------------------------------------------------
    def action_pause(self) -> None:
        s = self.session
        if s.finished:
            return
        self._command(s.pause if s.wclock.running else s.resume)

    def action_note(self) -> None:
        if self.session.finished:
            self.notify("This session is finished: its record ends with the finish row and takes nothing more.")
            return

        def done(text: str | None) -> None:
            if text and text.strip():
                self._command(self.session.note, text)

        self.push_screen(NoteScreen(), done)

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

    def action_submit(self) -> None:
        s = self.session
        if s.finished:
            self.notify("This session is already finished.")
            return
        if self._score_started is not None:
            self.notify("Wait for the running scoring to finish (or cancel it with c), then submit.", severity="warning")
            return

        def done(value: str | None) -> None:
            if value is not None:
                self._take_final(value)

        meta = self.session.meta
        self.push_screen(SubmitScreen(rule_sentence(meta.aggregation, meta.recount_runs, meta.timing)), done)

    def action_info(self) -> None:
        """Show or hide the info pane (instructions, anchors, setting): hidden by default below 140
        columns, shown by default above."""
        self.screen.toggle_class("-info-toggled")

    def action_compare(self) -> None:
        self.notify("Comparing with the other sessions of this environment…")
        self._compare_worker()

    @work(thread=True, exit_on_error=False, group="compare")
    def _compare_worker(self) -> None:
        """This environment's human sessions (this one included) and any agent runs in
        ``agent_runs`` ($REBENCH_AGENT_RUNS), computed off the screen's thread, then shown."""
        from ..compare.command import compare_beside_session
        from .screens.compare import CompareScreen

        s = self.session
        try:
            comparison = compare_beside_session(s.folder, s.env, s.meta.profile, self.agent_runs)
        except RebenchError as exc:
            self.call_from_thread(self.notify, f"Nothing to compare: {exc.what}", severity="warning")
            return
        self.call_from_thread(self.push_screen, CompareScreen(comparison))

    def action_help(self) -> None:
        keys = self.active_bindings
        lines = ["Keys", ""]
        for b in self.BINDINGS:
            if isinstance(b, Binding) and b.show or b.id == "cancel_score":
                shown = self.get_key_display(next((ab.binding for ab in keys.values() if ab.binding.id == b.id), b))
                lines.append(f"  {shown:<6} {PALETTE.get(b.id, 'Quit (asks first: pause the clock or keep it running)')}")
        lines += ["  ctrl+p the command palette, which lists these commands too",
                  "", "Remap keys in a keymap file (binding id = \"key\"); the ids are "
                  + ", ".join(b.id for b in self.BINDINGS if isinstance(b, Binding) and b.id) + ".",
                  "", f"Session folder: {self.session.folder}"]
        self.push_screen(HelpScreen("\n".join(lines)))

    def action_quit_confirm(self) -> None:
        def done(answer: str | None) -> None:
            if answer is None:
                return
            if self._score_started is not None:
                self._cancel.set()
            self.closed_with = answer
            self.exit()

        self.push_screen(QuitScreen(self.session.finished, self._score_started is not None), done)

    async def action_quit(self) -> None:  # the command palette's quit goes through the same dialog
        self.action_quit_confirm()

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


def _rescore_note(attempts: list[Attempt], rec: ScoreRecord) -> str:
    """For a re-score of unchanged files: which attempt it joined, and that attempt's median."""
    pos = rec.attempt - 1
    for a in attempts:
        if pos in a.indexes and len(a.indexes) > 1:
            return (f"; files unchanged: re-score of attempt {a.number}, which counts with the median of its "
                    f"{a.n} valid scorings, {_fmt(a.score)}")
    return ""


# The session's commands in the command palette, with what each does (quit is Textual's own entry,
# which goes through the same dialog).
PALETTE = {"score": "Run the protected scorer on the files as they are now", "cancel_score": "Cancel the running scoring",
           "pause": "Pause or resume the working clock", "note": "Write a note into the record",
           "shell": "Open a login shell in the container", "submit": "Submit: one last scoring, then the session finishes",
           "compare": "Compare with this environment's other sessions and agent runs",
           "info": "Show or hide the instructions, anchors and setting", "help": "The keys and where the records are"}

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
