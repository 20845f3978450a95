"""What a session tells its listeners: one frozen type per event, each carrying its data.

Listeners are called from whatever thread produced the event, after the record it announces is
durable. A screen dispatches on the type (``match``) and reads only what the event carries:
``ScoreRecorded`` brings the history and the counting score as they were when it was written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Union

from ..trajectory.records import CountingScore, ScoreRecord
from .files import FileChange


@dataclass(frozen=True)
class FilesRecorded:
    changes: tuple[FileChange, ...]
    raw_events: int


@dataclass(frozen=True)
class CommandsRecorded:
    rows: tuple[dict[str, Any], ...]  # audit rows as written (``log`` rows titled "command", and their outputs)

    def lines(self) -> list[str]:
        """The typed commands (and processes killed for memory), one line each, as a feed shows them."""
        return [str(r["content"][0]) for r in self.rows
                if r.get("type") == "log" and r.get("attributes", {}).get("title") in ("command", "memory")]


@dataclass(frozen=True)
class ScoreRecorded:
    """A scoring's row is on disk: the record, whether it was the final one, and the session's
    scorings and counting score right after it."""

    record: ScoreRecord
    final: bool
    history: tuple[ScoreRecord, ...]
    counting: CountingScore | None


@dataclass(frozen=True)
class ScoringCancelled:
    duration_s: float


@dataclass(frozen=True)
class TimeWarning:
    remaining_s: int


@dataclass(frozen=True)
class ClockChanged:
    running: bool


@dataclass(frozen=True)
class NoteSaved:
    text: str


@dataclass(frozen=True)
class SessionFinished:
    reason: str
    counting: CountingScore | None


@dataclass(frozen=True)
class RecordingTrouble:
    """Something the session could not record or read (it retries); the text says what."""

    text: str


@dataclass(frozen=True)
class LinkLost:
    host: str
    error: str


@dataclass(frozen=True)
class LinkRestored:
    host: str
    outage_s: float


SessionEvent = Union[FilesRecorded, CommandsRecorded, ScoreRecorded, ScoringCancelled, TimeWarning, ClockChanged,
                     NoteSaved, SessionFinished, RecordingTrouble, LinkLost, LinkRestored]
Listener = Callable[[SessionEvent], None]
