"""What making or reopening a session needs of the facade: how it is built and the parts it
touches once built (the lock, the working clock, the core, the audit log, the scorer).

``opening`` builds the facade it is handed (``Session`` passes itself) through this shape, so it
needs nothing of ``session.py``, and ``session.py`` imports ``opening`` without a circle.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, TypeVar

from ..catalog import Environment
from ..clock import Clock, WorkingClock
from ..runtime import Sandbox
from ..store import Store
from ..trajectory.audit import AuditLog
from ..trajectory.records import SessionMeta
from .core import SessionCore
from .lock import SessionLock
from .scorer import Scorer


class OpenedSession(Protocol):
    """The facade as ``opening`` sees it (``Session`` has all of this)."""

    core: SessionCore
    meta: SessionMeta
    env: Environment
    sandbox: Sandbox
    wclock: WorkingClock
    audit: AuditLog
    scorer: Scorer
    lock: SessionLock

    def __init__(self, folder: Path, meta: SessionMeta, env: Environment, sandbox: Sandbox, clock: Clock,
                 store: Store | None = None, secrets: dict[str, str] | None = None) -> None: ...

    @property
    def recovered(self) -> list[str]: ...

    def settle_interrupted_scoring(self) -> dict | None: ...


S = TypeVar("S", bound=OpenedSession)
