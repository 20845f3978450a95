"""The workstation screen: instructions, countdown, score history, file feed, status line.

Every blocking call runs in a thread worker that posts messages back; handlers update widgets.
Time is read from the session's working clock (computed from an injected clock on each tick),
never counted in ticks.
"""

from __future__ import annotations

import gc
import math
import subprocess
import threading
import time
from pathlib import Path

from textual import on, work
from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.css.query import NoMatches
from textual.widgets import Footer, Markdown, Static

from ..catalog.setting import recorded_differences, setting_words
from ..clock import format_hms
from ..errors import RebenchError
from ..scoring import group_attempts
from ..session import Session
from .keymap import load_keymap
from .messages import ScoreFailed, ScoreFinished, SessionUpdate
from .screens.dialogs import HelpScreen, NoteScreen, QuitScreen, SubmitScreen
from .widgets.countdown import Countdown
from .widgets.file_feed import FileFeed
from .widgets.score_history import ScoreChart, ScoreTable, _fmt, fmt_normalized


class RebenchApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "rebench-tui"
    BINDINGS = [
        Binding("s", "score", "Score", id="score"),
        Binding("c", "cancel_score", "Cancel scoring", id="cancel_score", show=False),
        Binding("p", "pause", "Pause/resume", id="pause"),
        Binding("n", "note", "Note", id="note"),
        Binding("t", "shell", "Shell", id="shell"),
        Binding("x", "submit", "Submit", id="submit"),
        Binding("v", "compare", "Compare", id="compare"),
        Binding("question_mark", "help", "Help", id="help"),
        Binding("q", "quit_confirm", "Quit", id="quit"),
        Binding("ctrl+c", "quit_confirm", "Quit", id="quit_ctrl_c", show=False, priority=True),
    ]

    def __init__(self, session: Session, *, keymap_path: Path | None = None, tick_s: float = 0.25,
                 watch_files: bool = True, agent_runs: str | None = None) -> None:
        super().__init__()
        self.session = session
        self.tick_s = tick_s
        self.watch_files = watch_files
        self.keymap_path = keymap_path
        self.agent_runs = agent_runs  # Settings.agent_runs ($REBENCH_AGENT_RUNS): shown by the compare key
        self._cancel = threading.Event()
        self._score_started: float | None = None
        self._finishing = False
        self.closed_with: str | None = None  # "pause" | "keep" once quit

    # -- layout ---------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        s = self.session
        yield Static(self._status_text(), id="status", classes="" if s.sandbox.isolated else "unsafe")
        with Horizontal(id="main"):
            with VerticalScroll(id="left"):
                yield Markdown(s.env.instructions, id="instructions")
            with Vertical(id="right"):
                yield Countdown(id="countdown")
                yield Static("", id="best")
                yield Static(self._anchors_text(), id="anchors", classes="stale" if self._anchors_stale() else "")
                yield Static(self._setting_text(), id="setting",
                             classes="differs" if recorded_differences(s.meta.setting) else "")
                yield Static("", id="scoring")
                yield Static("Score history", classes="section")
                with Vertical(id="history"):
                    yield ScoreTable(s.hidden, id="score-table")
                    yield ScoreChart(s.hidden, s.aggregation, id="score-chart")
                yield Static("Files and commands", classes="section")
                yield FileFeed(id="files")
        yield Footer()

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

    def _status_text(self) -> str:
        s = self.session
        warn = "" if s.sandbox.isolated else "  ⚠ NOT ISOLATED (local runtime): commands and the scorer run as you"
        link = "" if s.link_up else f"  ⚠ LINK DOWN to {s.sandbox.host}: reconnecting; the clock keeps running, records are kept"
        return f"{s.meta.title} · {s.status_line()} · session {s.id}{warn}{link}"

    def _show_link(self) -> None:
        status = self.query_one("#status", Static)
        status.update(self._status_text())
        status.set_class(not self.session.link_up, "link-down")

    def on_mount(self) -> None:
        ids = {b.id for b in self.BINDINGS if isinstance(b, Binding) and b.id}
        keymap = load_keymap(self.keymap_path, ids)
        if keymap:
            self.set_keymap(keymap)
        self._show_history()
        self.session.subscribe(lambda ev: self.post_message(SessionUpdate(ev)))
        if self.watch_files:
            self._start_watcher()
        self.refresh_clock()
        self.set_interval(self.tick_s, self.refresh_clock)
        if self.session.finished:
            self.query_one(FileFeed).add_line("this session is finished: records are read-only, scoring is closed")
        for note in self.session.resume_notes:  # e.g. a scoring the app died during, settled on reopening
            self.query_one(FileFeed).add_line(note)
            self.notify(note, severity="warning", timeout=30)
        # The screen's long-lived objects (widgets, styles, the session) leave the cyclic collector's
        # view: during a file flood its full passes over them paused the screen for up to ~90 ms.
        gc.freeze()

    @work(thread=True, exit_on_error=False, group="watch")
    def _start_watcher(self) -> None:
        self.session.start_watching()
        self.session.start_capture()

    @work(thread=True, exit_on_error=False, group="watch")
    def _collect_commands(self) -> None:
        self.session.collect_commands()

    # -- clock ----------------------------------------------------------------------------
    def refresh_clock(self) -> None:
        s = self.session
        w = s.wclock
        try:
            self.query_one(Countdown).show(w.remaining(), w.used(), w.limit_s, w.running, s.finished)
            if self._score_started is not None:
                self.query_one("#scoring", Static).update(
                    f"scoring… {time.monotonic() - self._score_started:.0f} s (press c to cancel)")
        except NoMatches:  # a last tick while the app is being torn down: its widgets are going
            return
        s.tick()
        if s.time_is_up and not self._finishing:
            self._finishing = True
            self.notify("Working time is up: taking the final score now.", severity="warning", timeout=10)
            self._begin_scoring()
            self._finish_worker()

    # -- session events -------------------------------------------------------------------
    @on(SessionUpdate)
    def _on_session_update(self, msg: SessionUpdate) -> None:
        try:
            self._show_update(msg)
        except NoMatches:  # an event that arrives while the app is being torn down: it is recorded already
            pass

    def _show_update(self, msg: SessionUpdate) -> None:
        ev = msg.event
        if ev.kind == "files":
            changes, raw = ev.data
            self.query_one(FileFeed).add_batch(changes, raw)
        elif ev.kind == "score":
            self._show_history()
        elif ev.kind == "commands":
            feed = self.query_one(FileFeed)
            for row in ev.data:
                if row.get("type") == "log" and row.get("attributes", {}).get("title") == "command":
                    feed.add_line(str(row["content"][0]))
        elif ev.kind == "warning":
            self.notify(f"{format_hms(ev.data)} of working time left", severity="warning", timeout=15)
        elif ev.kind in ("paused", "resumed"):
            self.refresh_clock()
        elif ev.kind == "note":
            self.query_one(FileFeed).add_line(f"note saved: {ev.data}")
        elif ev.kind == "finished":
            self.refresh_clock()
            self._show_best()
            self.notify(f"Session finished ({ev.data}). Records are complete; press q to quit.", timeout=20)
        elif ev.kind == "error":
            self.notify(str(ev.data), severity="error", timeout=20)
        elif ev.kind == "link_lost":
            self._show_link()
            self.query_one(FileFeed).add_line(f"⚠ {ev.data}")
            self.notify(f"{ev.data} Working time keeps running (pause with p); scoring waits for the link.",
                        severity="error", timeout=20)
        elif ev.kind == "link_restored":
            self._show_link()
            self.query_one(FileFeed).add_line(f"link restored after {ev.data:.0f} s")
            self.notify(f"Link to {self.session.sandbox.host} restored after {ev.data:.0f} s; nothing was lost.", timeout=10)

    def _show_history(self) -> None:
        """The score table, the chart and the counting line, from the session's history."""
        s = self.session
        history = list(s.history)  # a scoring worker may append meanwhile: one snapshot for the table
        attempts = group_attempts([r.score for r in history], [r.fingerprint for r in history])
        self.query_one(ScoreTable).show(history, attempts, s.final())
        self.query_one(ScoreChart).set_records(history)
        self._show_best()

    def _show_best(self) -> None:
        s = self.session
        best = s.final()
        rule = {"min": "lowest", "max": "highest", "last": "last valid"}[s.aggregation.value]
        if s.hidden:
            text = f"{len(s.history)} scoring(s) · scores are hidden in this environment"
        elif best is None:
            text = f"no valid score yet · counts: {rule} · start {s.meta.start_score:g}, reference {s.meta.reference_score:g}"
        else:
            if best.n == 1:
                which = f"scoring {best.representative}"
            else:  # re-scores of unchanged files: their median counts, not the luckiest of them
                which = (f"attempt {best.attempt}: median of {best.n} re-scores, "
                         f"{_fmt(best.low)}–{_fmt(best.high)}")
            text = (f"counts ({rule}): {_fmt(best.score)} (normalized {fmt_normalized(best.normalized)}, {which})"
                    f" · start {s.meta.start_score:g}, reference {s.meta.reference_score:g}")
        self.query_one("#best", Static).update(text)

    # -- scoring --------------------------------------------------------------------------
    def _begin_scoring(self) -> None:
        self._cancel.clear()
        self._score_started = time.monotonic()
        self.query_one("#scoring", Static).update("scoring…")

    def action_score(self) -> None:
        s = self.session
        if s.finished:
            self.notify("This session is finished; scoring is closed.", severity="warning")
            return
        if not s.link_up:
            self.notify(f"The link to {s.sandbox.host} is down: scoring waits for it (nothing is lost).", severity="warning")
            return
        if s.scoring or self._score_started is not None:
            self.notify("A scoring is already running (press c to cancel it).", severity="warning")
            return
        self._begin_scoring()
        self._score_worker()

    @work(thread=True, exit_on_error=False, group="score")
    def _score_worker(self) -> None:
        try:
            record = self.session.score(cancel=self._cancel)
        except Exception as exc:  # noqa: BLE001 - any failure (a full disk too) must end "scoring…" on screen
            self.post_message(ScoreFailed(_failure_text(exc)))
        else:
            self.post_message(ScoreFinished(record, final=False))

    @work(thread=True, exit_on_error=False, group="score")
    def _finish_worker(self, submission: str | None = None) -> None:
        try:
            record = self.session.finish_at_time_limit() if submission is None else self.session.submit(submission)
        except Exception as exc:  # noqa: BLE001 - the session still finishes, and the screen says why
            try:
                if not self.session.finished:
                    self.session.finish("time_limit" if submission is None else "submitted")
            finally:
                self.post_message(ScoreFailed(_failure_text(exc)))
        else:
            self.post_message(ScoreFinished(record, final=True))

    @on(ScoreFinished)
    def _on_score_finished(self, msg: ScoreFinished) -> None:
        self._score_started = None
        self.query_one("#scoring", Static).update("")
        rec = msg.record
        if rec is None:
            self.notify("Scoring cancelled; recorded as cancelled.")
        elif self.session.hidden:
            self.notify(f"Scoring {rec.attempt} recorded (scores are hidden in this environment).")
        elif rec.valid:
            self.notify(f"Score {rec.attempt}: {_fmt(rec.score)} (normalized {fmt_normalized(rec.normalized)})"
                        + self._rescore_note(rec))
        else:
            self.notify(f"Score {rec.attempt}: NaN — {rec.message}", severity="error", timeout=15)

    def _rescore_note(self, rec) -> str:
        """For a re-score of unchanged files: which attempt it joined, and that attempt's median."""
        s = self.session
        pos = rec.attempt - 1
        for a in s.attempts():
            if pos in a.indexes and len(a.indexes) > 1:
                return (f"; files unchanged: re-score of attempt {a.number}, which counts with the median of its "
                        f"{a.n} valid scorings, {_fmt(a.median)}")
        return ""

    @on(ScoreFailed)
    def _on_score_failed(self, msg: ScoreFailed) -> None:
        self._score_started = None
        self.query_one("#scoring", Static).update("")
        self.notify(msg.error, severity="error", timeout=30)

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
        if s.wclock.running:
            s.pause()
            self.notify("Clock paused. Press p to resume.")
        else:
            s.resume()
            self.notify("Clock running.")

    def action_note(self) -> None:
        def done(text: str | None) -> None:
            if text and text.strip():
                self.session.note(text)

        self.push_screen(NoteScreen(), done)

    def action_shell(self) -> None:
        argv, env, cwd = self.session.sandbox.shell_command()
        s = self.session
        s.audit.append({"type": "log", "content": [f"shell opened: {' '.join(argv)}", {"event": "shell_open", "argv": argv}],
                        "attributes": {"title": "shell"}})
        try:
            with self.suspend():
                print(f"\n[rebench-tui] shell in {s.env.id} ({'container' if s.sandbox.isolated else 'NOT ISOLATED, this machine'}). "
                      "Exit the shell (Ctrl-D) to return; the clock keeps running.\n", flush=True)
                rc = subprocess.run(argv, env=env, cwd=cwd).returncode
        except Exception as exc:  # noqa: BLE001 - SuspendNotSupported, missing docker CLI, ...
            self.notify(f"Cannot open a shell here: {exc}. Run instead: {' '.join(argv)}", severity="error", timeout=20)
            rc = None
        if s.watcher is not None:
            s.watcher.flush(timeout=1.0)  # changes made in the shell are recorded before it is marked closed
        s.audit.append({"type": "log", "content": [f"shell closed (exit {rc})", {"event": "shell_close", "exit": rc}],
                        "attributes": {"title": "shell"}})
        self._collect_commands()  # what was typed in it, recorded now rather than at the next poll
        self.refresh()

    def action_submit(self) -> None:
        s = self.session
        if s.finished:
            self.notify("This session is already finished.")
            return
        if s.scoring or self._score_started is not None:
            self.notify("Wait for the running scoring to finish (or cancel it with c), then submit.", severity="warning")
            return

        def done(value: str | None) -> None:
            if value is None:
                return
            self._finishing = True
            self._begin_scoring()
            self._finish_worker(value)

        self.push_screen(SubmitScreen(), done)

    def action_compare(self) -> None:
        self.notify("Comparing with the other sessions of this environment…")
        self._compare_worker()

    @work(thread=True, exit_on_error=False, group="compare")
    def _compare_worker(self) -> None:
        """This environment's human sessions (this one included) and any agent runs in
        ``agent_runs`` ($REBENCH_AGENT_RUNS), computed off the screen's thread, then shown."""
        from ..catalog import Catalog
        from ..compare.analysis import compare
        from ..compare.command import gather
        from ..compare.runs import EnvResolver

        s = self.session
        agents = self.agent_runs
        resolver = EnvResolver(Catalog(root=s.env.path.parent, environments={s.env.id: s.env}), profile=s.meta.profile)
        try:
            got = gather([agents] if agents else [], resolver, sessions_dir=s.folder.parent,
                         humans_dirs=[s.folder.parent] if agents else [], envs=[s.env.id])
            comparison = compare(got.runs, n_boot=200)
        except RebenchError as exc:
            self.call_from_thread(self.notify, f"Nothing to compare: {exc.what}", severity="warning")
            return
        from .screens.compare import CompareScreen

        self.call_from_thread(self.push_screen, CompareScreen(comparison))

    def action_help(self) -> None:
        keys = self.active_bindings
        lines = ["# Keys", "", "| key | does |", "|---|---|"]
        for b in self.BINDINGS:
            if isinstance(b, Binding) and b.show or b.id == "cancel_score":
                shown = next((ab.binding.key for ab in keys.values() if ab.binding.id == b.id), b.key)
                lines.append(f"| `{shown}` | {b.description} |")
        lines += ["", "Remap keys in a keymap file (`binding id = \"key\"`): ids are "
                  + ", ".join(f"`{b.id}`" for b in self.BINDINGS if isinstance(b, Binding) and b.id) + ".",
                  "", f"Session folder: `{self.session.folder}`"]
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

    def on_unmount(self) -> None:
        # Wait for a cancelled scoring to record itself before the session closes.
        deadline = time.monotonic() + 30
        while self.session.scoring and time.monotonic() < deadline:
            time.sleep(0.05)
        self.session.close(pause_clock=self.closed_with != "keep")


def _failure_text(exc: BaseException) -> str:
    """A worker's failure as the participant reads it: our errors say what was kept and what to do."""
    if isinstance(exc, RebenchError):
        return str(exc)
    return (f"scoring failed: {type(exc).__name__}: {exc}\nKept: every record written before it"
            "\nNext: fix the cause (a full disk?), then score again")
