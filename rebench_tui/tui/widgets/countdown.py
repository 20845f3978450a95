"""The working-time countdown: large digits, state, and the limit."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import Digits, Static

from ...clock import format_hms


class Countdown(Vertical):
    DEFAULT_CSS = """
    Countdown { height: auto; padding: 0 1; }
    Countdown Digits { width: auto; }
    Countdown #clock-state { color: $text-muted; }
    Countdown.paused Digits { color: $warning; }
    Countdown.low Digits { color: $error; }
    Countdown.over Digits { color: $error; text-style: bold; }
    """

    def compose(self) -> ComposeResult:
        yield Digits("0:00:00", id="clock-digits")
        yield Static("", id="clock-state")

    def show(self, remaining_s: float, used_s: float, limit_s: float, running: bool, finished: bool) -> None:
        self.query_one(Digits).update(format_hms(remaining_s))
        state = "FINISHED" if finished else ("RUNNING" if running else "PAUSED — press p to resume")
        self.query_one("#clock-state", Static).update(
            f"{format_hms(remaining_s)} left · {state} · worked {format_hms(used_s)} of {format_hms(limit_s)}"
        )
        self.set_class(not running and not finished, "paused")
        self.set_class(remaining_s <= 15 * 60 and remaining_s > 0, "low")
        self.set_class(remaining_s <= 0 or finished, "over")
