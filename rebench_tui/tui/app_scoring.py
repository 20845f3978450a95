"""The workstation screen's scoring: the score and cancel keys, the scoring line (what runs now
and for how long, the finish step by step), and what each recorded scoring says. A mixin of
:class:`~rebench_tui.tui.app.RebenchApp`."""

from __future__ import annotations

import time

from textual.widgets import Static

from ..scoring import Attempt
from ..session.events import ScoreRecorded
from ..trajectory.records import ScoreRecord
from .finish_words import final_scored, recount_progress, scoring_words
from .widgets.file_feed import FileFeed
from .widgets.score_history import _fmt, fmt_normalized, message_text


class ScoringControls:
    """Starting, following and cancelling scorings (mixed into the app: ``self`` is the app)."""

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


def _rescore_note(attempts: list[Attempt], rec: ScoreRecord) -> str:
    """For a re-score of unchanged files: which attempt it joined, and that attempt's median."""
    pos = rec.attempt - 1
    for a in attempts:
        if pos in a.indexes and len(a.indexes) > 1:
            return (f"; files unchanged: re-score of attempt {a.number}, which counts with the median of its "
                    f"{a.n} valid scorings, {_fmt(a.score)}")
    return ""
