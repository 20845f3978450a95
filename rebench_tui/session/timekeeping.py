"""The working clock's rules: pauses, the time warnings, and when the time is up.

Every caller (the screen, ``rebench-tui score``, a script) goes through these, so the limit and
the warnings hold the same for all; scoring asks ``expired`` before it runs (``scorer``).
"""

from __future__ import annotations

from ..clock import crossed_warnings, format_hms
from ..trajectory.entries import log
from ..trajectory.records import Pause
from .core import SessionCore
from .events import ClockChanged, TimeWarning


class Timekeeping:
    def __init__(self, core: SessionCore) -> None:
        self.core = core

    @property
    def expired(self) -> bool:
        return self.core.wclock.expired

    @property
    def time_is_up(self) -> bool:
        return self.core.wclock.expired and not self.core.finished

    def pause(self, reason: str = "") -> bool:
        c = self.core
        with c.meta_lock:
            if c.finished or not c.wclock.pause():
                return False
            c.meta.pauses.append(Pause(start=int(c.clock.time() * 1000), reason="pauseHook"))
            c.save()
            # The row goes in under the lock: a finish waits for it, so it never lands after the finish row.
            c.audit.append(log(f"clock paused at {format_hms(c.wclock.used())} working time" + (f": {reason}" if reason else ""),
                               {"event": "pause", "reason": reason}, title="clock"))
        c.emit(ClockChanged(running=False))
        return True

    def resume(self) -> bool:
        c = self.core
        with c.meta_lock:
            if c.finished or not c.wclock.resume():
                return False
            self._end_open_pause()
            c.save()
            c.audit.append(log(f"clock resumed at {format_hms(c.wclock.used())} working time", {"event": "resume"},
                               title="clock"))
        c.emit(ClockChanged(running=True))
        return True

    def stop(self) -> None:
        """At the finish: the clock stops for good (the caller holds the meta lock and saves)."""
        self.core.wclock.pause()
        self._end_open_pause()

    def _end_open_pause(self) -> None:
        c = self.core
        if c.meta.pauses and c.meta.pauses[-1].end is None:
            c.meta.pauses[-1].end = int(c.clock.time() * 1000)

    def due(self) -> list[int]:
        """The time warnings (remaining seconds) crossed and not yet given; reads, writes nothing."""
        c = self.core
        if c.finished:
            return []
        limit = c.meta.clock.limit_s
        return [t for t in crossed_warnings(limit + 1, c.wclock.remaining()) if t not in c.meta.warnings_given and t < limit]

    def tick(self) -> list[int]:
        """Record time warnings now due; returns the thresholds (remaining seconds) newly crossed."""
        c = self.core
        with c.meta_lock:  # two callers at once record each warning once
            due = self.due()
            if not due:
                return []
            c.meta.warnings_given.extend(due)
            c.save()
            # After a long gap (a resume) several may be due at once: record all, announce the most urgent.
            # The row is written under the lock: the finish (time up at the same moment) sets the session
            # finished under it too, so the warning is either in before the finish row or not due at all.
            t = min(due)
            c.audit.append(log(f"{format_hms(t)} of working time left", {"event": "time_warning", "remaining_s": t,
                                                                        "also_passed": sorted(set(due) - {t})},
                               title="clock"))
        c.emit(TimeWarning(t))
        return due
