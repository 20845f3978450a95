"""What every part of a session shares: its folder, records, clock, sandbox and listeners.

The services (``timekeeping``, ``recording``, ``scorer``, ``ending``) each hold this core and
nothing of each other's but what they are handed; ``Session`` is the facade over them.
"""

from __future__ import annotations

import math
import threading
from pathlib import Path

from ..catalog import Environment
from ..clock import Clock, WorkingClock
from ..runtime import Sandbox
from ..runtime.base import ASSETS_DIR
from ..scoring import ATTEMPT_KEY, Aggregation, Attempt, Direction, attempt_fingerprint, normalize
from ..secrets import Redactor
from ..store import Store
from ..trajectory.audit import AuditLog, read_entries
from ..trajectory.records import ClockModel, CountingScore, ScoreRecord, SessionMeta
from ..trajectory.sealing import CLEAR_WARNING
from .events import Listener, SessionEvent
from .files import DEFAULT_IGNORE
from .layout import AUDIT, META, STATE, WORKSPACE
from .scoring_marker import SCORING_STATE, ScoringMarker


class SessionCore:
    def __init__(self, folder: Path, meta: SessionMeta, env: Environment, sandbox: Sandbox, clock: Clock,
                 store: Store | None, secrets: dict[str, str] | None) -> None:
        self.folder = folder
        self.meta = meta
        self.env = env
        self.sandbox = sandbox
        self.clock = clock
        self.store = store
        self.profile = env.profile(meta.profile)
        self.direction = Direction(meta.direction)
        self.aggregation = Aggregation(meta.aggregation)
        self.wclock = WorkingClock(meta.clock.to_state(), clock)
        self.redactor = Redactor(secrets)
        # A scoring that was running when the app died: its row's time stays reserved until resume settles it.
        self.interrupted = ScoringMarker.load(self.marker_path)
        self.audit = AuditLog(folder / AUDIT, meta.run_id, clock, usage=self.wclock.used,
                              redact=self.redactor.text if self.redactor else None,
                              held=(self.interrupted.called_at,) if self.interrupted else ())
        self.meta_lock = threading.RLock()
        self.sealed = False  # set once the finish row and the final session.json are written: nothing more is
        self.listeners: list[Listener] = []
        self.history: list[ScoreRecord] = self._load_history()

    # -- places ---------------------------------------------------------------------------
    @property
    def workspace(self) -> Path:
        return self.folder / WORKSPACE

    @property
    def state(self) -> Path:
        return self.folder / STATE

    @property
    def marker_path(self) -> Path:
        return self.folder / STATE / SCORING_STATE

    @property
    def ignore(self) -> tuple[str, ...]:
        return DEFAULT_IGNORE + (f"{ASSETS_DIR}/",)  # the read-only assets mount is not the participant's work

    @property
    def finished(self) -> bool:
        """Finished as session.json says, or as the audit log does (its finish row: the record of truth)."""
        return self.meta.status == "finished" or self.audit.finished

    @property
    def hidden(self) -> bool:
        return self.meta.visibility == "hidden"

    @property
    def seal_to(self) -> str | None:
        """The public key this session's scores are sealed to (``trajectory.sealing``; the start
        row's rule), or None where they are written in clear."""
        return self.meta.seal_to if self.hidden else None

    @property
    def clear_note(self) -> str:
        """For the status line: a hidden environment's scores are in clear (no researcher key was set)."""
        return f" · ⚠ {CLEAR_WARNING}" if self.hidden and not self.seal_to else ""

    # -- listeners ------------------------------------------------------------------------
    def emit(self, event: SessionEvent) -> None:
        for fn in list(self.listeners):
            fn(event)

    # -- persistence ----------------------------------------------------------------------
    def save(self) -> None:
        """Rewrite session.json with the clock as it is now; nothing once the session is finished
        and its final session.json written (``sealed``)."""
        with self.meta_lock:
            if self.sealed:
                return
            self.meta.clock = ClockModel.from_state(self.wclock.state())
            self.meta.save(self.folder / META)

    def index(self) -> None:
        if self.store is None:
            return
        best = None if self.seal_to else self.final()  # a sealed score is in no index either
        m = self.meta
        self.store.upsert_session({
            "id": m.id, "env_id": m.env_id, "task_id": m.task_id, "profile": m.profile, "runtime": m.runtime,
            "host": m.host, "status": m.status, "created_at": m.created_at, "completed_at": m.completed_at,
            "time_limit_s": m.clock.limit_s, "working_s": self.wclock.used(), "n_scores": len(self.history),
            "final_score": best.score if best else None, "final_normalized": best.normalized if best else None,
            "path": str(self.folder), "meta": m.model_dump_json(),
        })

    # -- scores ---------------------------------------------------------------------------
    def normalize(self, score: float) -> float:
        return normalize(score, self.meta.start_score, self.meta.reference_score, clip=False)

    def _load_history(self) -> list[ScoreRecord]:
        out: list[ScoreRecord] = []
        for row in read_entries(self.folder / AUDIT):
            c = row.get("content", {})
            if c.get("type") != "intermediateScore":
                continue
            score = c["score"]
            value = math.nan if score is None else float(score)
            working = row.get("workingMs", (row.get("usageTotalSeconds") or 0) * 1000) / 1000
            details = c.get("details", {})
            info = details.get(ATTEMPT_KEY) if isinstance(details, dict) else None
            n_files = info.get("n_files") if isinstance(info, dict) else None
            out.append(ScoreRecord(len(out) + 1, row["calledAt"], working, value, self.normalize(value),
                                   c.get("message", {}), details, fingerprint=attempt_fingerprint(details),
                                   n_files=n_files if isinstance(n_files, int) else None))
        return out

    def attempts(self) -> list[Attempt]:
        """The scorings grouped into attempts (re-scores of the same files together), in the order
        of each attempt's first scoring; indexes are positions in ``history``."""
        return self.meta.rule().attempts([r.score for r in self.history], [r.fingerprint for r in self.history])

    def final(self) -> CountingScore | None:
        """The score that counts now (``SessionMeta.rule``, ``scoring.Rule.attempt``): each attempt
        scores the median of its valid re-scores (in timing environments, its worst valid one if a
        re-score failed); the best attempt counts (or, for ``last``, the attempt of the last valid
        scoring); once the finish recounted the leading attempt, the recount counts. None while
        no scoring is valid."""
        history = list(self.history)
        recounts = [r.recount for r in history]
        a = self.meta.rule().attempt([r.score for r in history], [r.fingerprint for r in history], recounts)
        return None if a is None else CountingScore.of(a, [r.attempt for r in history], self.normalize, recounts)
