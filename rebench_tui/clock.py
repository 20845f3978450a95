"""Time sources and the working clock.

Working time is what every score is plotted against: wall time since the session started minus
the participant's pauses. Inside one process it is computed from ``time.monotonic()`` against
an anchor on every read (never by counting ticks, which stall while a terminal app is
suspended). Across processes only wall time exists, so the persisted state holds the banked
seconds and the wall time at which the current running stretch began; reopening a session adds
the wall time that passed in between. The rule, documented in the README: working time keeps
running while the app is closed unless the participant paused first.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass
from typing import Protocol

WARNING_THRESHOLDS_S: tuple[int, ...] = (2 * 3600, 3600, 15 * 60, 5 * 60)
DEFAULT_TIME_LIMIT_S = 8 * 3600.0  # the paper's (RE-Bench, section 3): every environment's default
MAX_TIME_LIMIT_S = 7 * 24 * 3600.0  # the longest working time a session may be given: 7 days


class Clock(Protocol):
    def monotonic(self) -> float: ...

    def time(self) -> float: ...


class SystemClock:
    """The real clocks."""

    def monotonic(self) -> float:
        return time.monotonic()

    def time(self) -> float:
        return time.time()


class FakeClock:
    """A clock that moves only when told to; wall and monotonic time advance together."""

    def __init__(self, wall: float = 1_767_225_600.0, mono: float = 1000.0) -> None:
        self._wall = wall
        self._mono = mono

    def monotonic(self) -> float:
        return self._mono

    def time(self) -> float:
        return self._wall

    def advance(self, seconds: float) -> None:
        self._wall += seconds
        self._mono += seconds

    def jump_wall(self, seconds: float) -> None:
        """Move only the wall clock (an NTP step, a suspended laptop's clock)."""
        self._wall += seconds


@dataclass(frozen=True)
class ClockState:
    """What is persisted: enough to resume the clock to the second in another process."""

    limit_s: float
    banked_s: float = 0.0
    running_since_wall: float | None = None

    @property
    def running(self) -> bool:
        return self.running_since_wall is not None


class WorkingClock:
    """Counts working time up to a limit; pausing stops it."""

    def __init__(self, state: ClockState, clock: Clock) -> None:
        self._clock = clock
        self.limit_s = state.limit_s
        self._banked = state.banked_s
        self._run_mono: float | None = None
        self._run_wall: float | None = None
        if state.running_since_wall is not None:
            # Working time kept running while no process watched it.
            self._banked += max(0.0, clock.time() - state.running_since_wall)
            self._start_stretch()

    @classmethod
    def new(cls, limit_s: float, clock: Clock, *, running: bool = True) -> "WorkingClock":
        wc = cls(ClockState(limit_s=limit_s), clock)
        if running:
            wc.resume()
        return wc

    def _start_stretch(self) -> None:
        self._run_mono = self._clock.monotonic()
        self._run_wall = self._clock.time()

    @property
    def running(self) -> bool:
        return self._run_mono is not None

    def used(self) -> float:
        """Working seconds used so far (pauses excluded), never above the limit."""
        used = self._banked
        if self._run_mono is not None:
            used += max(0.0, self._clock.monotonic() - self._run_mono)
        return min(used, self.limit_s)

    def remaining(self) -> float:
        return max(0.0, self.limit_s - self.used())

    @property
    def expired(self) -> bool:
        return self.remaining() <= 0.0

    def pause(self) -> bool:
        """Stop the clock; False if it was already stopped."""
        if self._run_mono is None:
            return False
        self._banked = self.used()
        self._run_mono = None
        self._run_wall = None
        return True

    def resume(self) -> bool:
        """Start the clock again; False if it was already running."""
        if self._run_mono is not None:
            return False
        self._start_stretch()
        return True

    def state(self) -> ClockState:
        """A snapshot to persist. Banks the current stretch so the snapshot is self-contained."""
        if self._run_mono is not None:
            self._banked = self.used()
            self._start_stretch()
        return ClockState(limit_s=self.limit_s, banked_s=self._banked, running_since_wall=self._run_wall)


def crossed_warnings(before_s: float, after_s: float, thresholds: tuple[int, ...] = WARNING_THRESHOLDS_S) -> list[int]:
    """Thresholds (remaining seconds) passed while remaining time went from ``before_s`` to ``after_s``."""
    return [t for t in thresholds if before_s > t >= after_s]


def format_hms(seconds: float) -> str:
    """``H:MM:SS`` (the format Inspect's human agent uses for total_time); negative clamps to 0."""
    s = max(0, int(seconds))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"


_DURATION = re.compile(r"^\s*(?:(\d+(?:\.\d+)?)h)?\s*(?:(\d+(?:\.\d+)?)m)?\s*(?:(\d+(?:\.\d+)?)s)?\s*$")


def parse_duration(text: str | int | float) -> float:
    """Seconds from ``8h``, ``90m``, ``1h30m``, ``45s`` or a plain number of seconds."""
    if isinstance(text, bool) or not isinstance(text, (int, float, str)):
        raise ValueError(f"not a duration: {text!r} (use e.g. 8h, 90m, 1h30m, 45s)")
    if isinstance(text, (int, float)):
        value = float(text)
    else:
        stripped = text.strip()
        try:
            value = float(stripped)
        except ValueError:
            m = _DURATION.match(stripped)
            if not stripped or not m or not any(m.groups()):
                raise ValueError(f"not a duration: {text!r} (use e.g. 8h, 90m, 1h30m, 45s)") from None
            h, mi, s = (float(g) if g else 0.0 for g in m.groups())
            value = h * 3600 + mi * 60 + s
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"a duration must be a positive, finite number of seconds, got {text!r}")
    return value


def check_time_limit(seconds: float) -> float:
    """``seconds`` if it is a working time a session may have (positive, at most 7 days); else a
    ValueError that says the bound."""
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"a working time must be a positive, finite number of seconds, got {seconds!r}")
    if seconds > MAX_TIME_LIMIT_S:
        shown = f"{seconds / 3600:.6g}h" if seconds < 1e9 else f"{seconds:.3g} s"
        raise ValueError(f"{shown} is longer than the longest working time allowed, 7 days (168h)")
    return seconds
