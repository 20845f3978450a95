"""A running scoring's durable note of itself, so a crash while it runs is settled on resume.

A scoring reserves its row's time (``calledAt`` = when it started) in the audit log and writes
the row when the scorer ends. If the app dies in between (``kill -9``, a lost terminal, a power
cut), nothing in memory survives and the scorer runs on in the sandbox: its supervisor does not
stop when the exec's client goes away. So before the exec starts, the session writes this marker
(``.state/scoring.json``, fsynced): the exec's token, the reserved time and working time, and the
attempt the scoring scores. The supervisor, run with that token, keeps its status in the sandbox.

On resume (:meth:`Session.open`) the marker keeps the reservation open in the audit log (rows
written while the scorer ran stay in the side journal, behind it), the supervisor is asked what
became of the exec, and the reserved row is written: the scorer's result, collected through the
result channel as any scoring's is, if it finished; otherwise an ``interrupted`` scoring (score
NaN, with its start time) once its process group is ended. The marker goes once that row is
written. A marker whose row is already in the log (the crash came after the row) is just removed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ..safe_write import fsync_dir, write_json

SCORING_STATE = "scoring.json"


@dataclass(frozen=True)
class ScoringMarker:
    token: str  # the exec's name, known to its supervisor in the sandbox
    called_at: int  # the reserved row's calledAt (ms): when the scoring started
    usage: float | None  # working seconds then
    final: bool = False
    attempt: dict[str, Any] = field(default_factory=dict)  # the attempt fingerprint of the files it scores
    timeout_s: float | None = None

    def save(self, path: Path) -> None:
        """Write durably (fsynced file, renamed into place, folder fsynced): it must be on disk
        before the exec starts."""
        write_json(path, asdict(self), durable=True)

    @classmethod
    def load(cls, path: Path) -> "ScoringMarker | None":
        """The marker of a scoring that was running, or None (none, or one cut short while it was
        written: the exec had not started then)."""
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            return cls(token=str(data["token"]), called_at=int(data["called_at"]),
                       usage=None if data.get("usage") is None else float(data["usage"]), final=bool(data.get("final")),
                       attempt=dict(data.get("attempt") or {}),
                       timeout_s=None if data.get("timeout_s") is None else float(data["timeout_s"]))
        except (OSError, ValueError, KeyError, TypeError):
            return None

    @staticmethod
    def clear(path: Path) -> None:
        try:
            path.unlink()
        except FileNotFoundError:
            return
        fsync_dir(path.parent)
