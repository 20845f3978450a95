"""One human attempt: the working clock, scoring, notes, submission, and the events that feed the record.

The names below are imported on first use, so a module of this package that needs none of them
(the file recorder's child process imports only the ``files`` package, the file watcher and its
recorder) starts quickly.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..trajectory.records import Pause, ScoreRecord, SessionMeta
    from .events import SessionEvent
    from .session import Session

__all__ = ["Pause", "ScoreRecord", "Session", "SessionEvent", "SessionMeta"]
_WHERE = {"Pause": "..trajectory.records", "ScoreRecord": "..trajectory.records", "SessionMeta": "..trajectory.records",
          "Session": ".session", "SessionEvent": ".events"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
