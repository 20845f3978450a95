"""The workstation screen's view of the session's events: each typed event (files, commands,
scorings, clock, notes, the finish, link and recording trouble) updates the feed, the score
history and the counting line from what it carries. A mixin of
:class:`~rebench_tui.tui.app.RebenchApp`."""

from __future__ import annotations

from textual.widgets import Static

from ..clock import format_hms
from ..scoring import Attempt
from ..session.ending import counting_words
from ..session.events import (ClockChanged, CommandsRecorded, FilesRecorded, LinkLost, LinkRestored, NoteSaved,
                              RecordingTrouble, ScoreRecorded, ScoringCancelled, SessionEvent, SessionFinished,
                              TimeWarning)
from ..trajectory.records import CountingScore, ScoreRecord
from .finish_words import RULE_WORDS
from .widgets.file_feed import FileFeed
from .widgets.score_history import ScoreChart, ScoreTable, _fmt, fmt_normalized


class SessionEventView:
    """Shows the session's events (mixed into the app: ``self`` is the app)."""

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
