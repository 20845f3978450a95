"""One human attempt: the working clock, scoring, notes, submission, and the events that feed the record."""

from .records import Pause, ScoreRecord, SessionMeta
from .session import Session, SessionEvent

__all__ = ["Pause", "ScoreRecord", "Session", "SessionEvent", "SessionMeta"]
