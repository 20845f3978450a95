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
        return [text for _when, text in self.feed_items()]

    def feed_items(self) -> list[tuple[float | None, str]]:
        """(when it started, in seconds since the epoch, or None where the rows do not say; the line)
        for each typed command and process killed for memory: a command is shown at the time it
        ran, not at the time its shell closed and the rows were read."""
        started = {r["observation"].get("id"): r["observation"].get("started_at")
                   for r in self.rows if r.get("type") == "observation" and isinstance(r.get("observation"), dict)}
        out: list[tuple[float | None, str]] = []
        for r in self.rows:
            if r.get("type") != "log" or r.get("attributes", {}).get("title") not in ("command", "memory"):
                continue
            lines = r.get("content") or [""]
            facts = lines[1] if len(lines) > 1 and isinstance(lines[1], dict) else {}
            ms = started.get(facts.get("id"))
            text = command_words(facts) if facts.get("event") == "command" else str(lines[0])
            out.append((ms / 1000 if isinstance(ms, (int, float)) else None, text))
        return out


def command_words(facts: dict[str, Any]) -> str:
    """A typed command as the feed says it: its exit status, or why there is none, in words."""
    status = facts.get("exit_status")
    if status is None:
        notes = facts.get("notes") or []
        ended = "the shell exited" if "the shell exited" in notes else "no exit status: the shell exited before it ended"
    else:
        ended = f"exit {status}"
    took = facts.get("duration_s")
    took = f", {took:.1f} s" if isinstance(took, (int, float)) else ""
    where = f", in {facts['cwd']}" if facts.get("cwd") else ""
    return f"$ {facts.get('command', '')}  ({ended}{took}{where})"


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
