"""Rebuilding the session index from the session folders (the index is never the record).

``open_store`` opens ``sessions/index.db``; when the file was unreadable (a damaged or foreign
file) the store moves it aside and starts empty, and this refills it from every folder's
``session.json`` and ``audit.jsonl``. ``rebench-tui sessions --rebuild-index`` does the same on
demand.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any, Callable, Iterator

from ..clock import SystemClock, WorkingClock
from ..errors import RebenchError
from ..scoring import attempt_fingerprint, is_recount, normalize
from ..store import INDEX_NAME, Store
from ..trajectory.records import AUDIT, META, SessionMeta


def _scores(audit: Path) -> list[dict[str, Any]]:
    """The intermediateScore rows of an audit log; unreadable lines are skipped (verify reports them)."""
    out: list[dict[str, Any]] = []
    if not audit.is_file():
        return out
    with open(audit, "rb") as fh:
        for raw in fh:
            try:
                row = json.loads(raw)
            except (ValueError, RecursionError):
                continue
            c = row.get("content") if isinstance(row, dict) else None
            if not isinstance(c, dict) or c.get("type") != "intermediateScore":
                continue
            try:
                value = math.nan if c.get("score") is None else float(c["score"])
            except (TypeError, ValueError):
                value = math.nan
            working = row.get("workingMs", (row.get("usageTotalSeconds") or 0) * 1000) / 1000
            out.append({"called_at": int(row.get("calledAt", 0)), "working_s": working, "score": value,
                        "message": c.get("message") if isinstance(c.get("message"), dict) else {},
                        "fingerprint": attempt_fingerprint(c.get("details")), "recount": is_recount(c.get("details"))})
    return out


def index_row(folder: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """(session row, score rows) of one session folder; a SessionError where session.json does not read."""
    meta = SessionMeta.load(folder / META)
    scores = _scores(folder / AUDIT)
    rows = []
    for i, s in enumerate(scores, start=1):
        norm = normalize(s["score"], meta.start_score, meta.reference_score, clip=False)
        rows.append({"session_id": meta.id, "attempt": i, "called_at": s["called_at"], "working_s": s["working_s"],
                     "score": s["score"], "normalized": norm, "message": s["message"], "fingerprint": s["fingerprint"]})
    counting = meta.rule().attempt([r["score"] for r in rows], [r["fingerprint"] for r in rows],
                                   [s["recount"] for s in scores])
    best = None if counting is None else {"score": counting.score,
                                          "normalized": normalize(counting.score, meta.start_score, meta.reference_score, clip=False)}
    used = WorkingClock(meta.clock.to_state(), SystemClock()).used()
    return ({"id": meta.id, "env_id": meta.env_id, "task_id": meta.task_id, "profile": meta.profile,
             "runtime": meta.runtime, "host": meta.host, "status": meta.status, "created_at": meta.created_at,
             "completed_at": meta.completed_at, "time_limit_s": meta.clock.limit_s, "working_s": used,
             "n_scores": len(rows), "final_score": best["score"] if best else None,
             "final_normalized": best["normalized"] if best else None, "path": str(folder),
             "meta": meta.model_dump_json()}, rows)


def is_session_folder(folder: Path) -> bool:
    """A session's folder: its session.json, or (that file lost) its audit log."""
    return folder.is_dir() and ((folder / META).is_file() or (folder / AUDIT).is_file())


def index_rows(sessions_dir: Path, problems: list[str] | None = None) -> Iterator[tuple[dict[str, Any], list[dict[str, Any]]]]:
    """(session row, score rows) for every readable session folder; unreadable ones are named in ``problems``."""
    for folder in sorted(p for p in sessions_dir.iterdir() if is_session_folder(p)):
        try:
            yield index_row(folder)
        except Exception as exc:  # noqa: BLE001 - one broken folder must not stop the others
            if problems is not None:
                what = exc.what if isinstance(exc, RebenchError) else str(exc).splitlines()[0]
                problems.append(f"{folder.name}: {what}" + (f" ({exc.fix})" if isinstance(exc, RebenchError) and exc.fix else ""))


def reindex_session(store: Store, folder: Path) -> None:
    """One session's rows of the index, written again from its folder (after a repair)."""
    session_row, score_rows = index_row(folder)
    store.upsert_session(session_row)
    for s in score_rows:
        store.add_score(**s)


def rebuild_index(store: Store, sessions_dir: Path) -> tuple[int, list[str]]:
    """Refill ``store`` from the folders; returns (sessions indexed, folders that could not be read)."""
    problems: list[str] = []
    n = store.rebuild(index_rows(sessions_dir, problems))
    return n, problems


def open_store(sessions_dir: Path, say: Callable[[str], None] = lambda _m: None) -> Store:
    """The index, rebuilt from the session folders if the file was unreadable (the damaged file is kept
    aside) or missing while session folders exist."""
    missing = not (sessions_dir / INDEX_NAME).exists()
    store = Store(sessions_dir)
    if store.moved_aside is not None or (missing and any(is_session_folder(p) for p in sessions_dir.iterdir())):
        n, problems = rebuild_index(store, sessions_dir)
        how = ("was missing; it was" if store.moved_aside is None else
               f"was unreadable; it was moved to {store.moved_aside.name} and")
        say(f"the session index {store.path} {how} rebuilt from the session folders ({n} session(s)); "
            "no record was touched")
        for p in problems:
            say(f"  not indexed: {p}")
    return store
