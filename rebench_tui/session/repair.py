"""``rebench-tui repair``: a session's ``session.json`` and score log written again from its audit
log, the record of truth (:mod:`rebench_tui.trajectory.rebuild` says how), while no app holds it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..catalog import Environment
from ..store import Store
from ..trajectory.rebuild import rebuild
from .layout import LOCK
from .lock import SessionLock
from .reindex import reindex_session


def manifest_facts(env: Environment | None, profile: str | None) -> dict[str, Any]:
    """What session.json takes from the environment's manifest where the audit log does not hold it."""
    if env is None:
        return {}
    m = env.manifest
    facts: dict[str, Any] = {"task_id": m.task_id, "task_version": m.version, "title": m.title}
    if profile in env.profile_names:
        facts["score_timeout_s"] = env.profile(profile).score_timeout
        facts["profile_gpus"] = env.profile(profile).gpus
    return facts


def repair_session(folder: Path, env: Environment | None = None, profile: str | None = None,
                   store: Store | None = None) -> list[str]:
    """Rebuild what disagrees with the audit log; returns what was done, one line a file. Takes
    the session's lock first (an app that has the session open must close it)."""
    lock = SessionLock(folder / LOCK)
    note = lock.acquire()
    try:
        done = rebuild(folder, manifest_facts(env, profile))
    finally:
        lock.release()
    if note:
        done.append(f"lock: {note}")
    if store is not None:
        reindex_session(store, folder)
        done.append(f"index: the session's row in {store.path.name} written again")
    return done
