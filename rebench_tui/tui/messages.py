"""Messages posted to the app from workers and session listeners (any thread)."""

from __future__ import annotations

from textual.message import Message

from ..session import SessionEvent
from ..trajectory.records import ScoreRecord


class SessionUpdate(Message):
    def __init__(self, event: SessionEvent) -> None:
        super().__init__()
        self.event = event


class ScoreFinished(Message):
    def __init__(self, record: ScoreRecord | None, final: bool) -> None:
        super().__init__()
        self.record = record
        self.final = final


class ScoreFailed(Message):
    def __init__(self, error: str) -> None:
        super().__init__()
        self.error = error


class ScorerOutput(Message):
    def __init__(self, line: str) -> None:
        super().__init__()
        self.line = line
