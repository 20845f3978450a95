"""A human session as a study's collector witnessed it: a run built from the witnessed audit rows
alone (no session folder), normalized by the anchors its start row recorded."""

from __future__ import annotations

import json
from typing import Any, Sequence

from ..catalog import Anchors, AnchorsError
from ..scoring import Aggregation, Direction
from ..trajectory.rules import chain_rules
from ..trajectory.sealing import open_rows, sealed_note
from .imports import trace_scorings
from .runs import HUMAN_LABEL, EnvInfo, EnvResolver, Run, SourceKind, make_run, setting_differs


def witnessed_rows(lines: Sequence[str | None]) -> list[dict[str, Any]]:
    """The witnessed rows that came whole (a row witnessed by its hash alone has no content)."""
    return [json.loads(line) for line in lines if line]


def _started(rows: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    return next((p for p in _events(rows) if p.get("event") == "session_started"), None)


def _events(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The data parts of every log row."""
    out = []
    for row in rows:
        c = row.get("content") or {}
        parts = c.get("content") if c.get("type") == "log" else None
        out += [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []
    return out


def read_witnessed(session_id: str, rows: Sequence[dict[str, Any]], source: str,
                   resolver: EnvResolver | None = None) -> Run | None:
    """The run of one witnessed session; None when its start row was not witnessed whole."""
    started = _started(rows)
    if started is None:
        return None
    rules = chain_rules(rows)  # a start row of the wrong types: a RulesError naming the field
    assert rules is not None
    env_id, profile = str(started.get("env")), str(started.get("profile"))
    try:
        anchors = Anchors.from_record(started["anchors"])
    except (AnchorsError, KeyError, TypeError):
        return None
    known = resolver.envs.get(env_id) if resolver is not None else None
    env = EnvInfo(env_id, known.family if known else env_id, Direction(rules.direction),
                  Aggregation(rules.aggregation), anchors, known.title if known else env_id, f"session:{profile}",
                  rules.timing)
    if resolver is not None:
        env = resolver.apply(env, profile=profile)
    finished = any(p.get("event") == "session_finished" for p in _events(rows))
    working = [r["workingMs"] / 1000 for r in rows if r.get("workingMs") is not None]
    notes = [] if profile == "gpu" else [f"profile {profile}: normalized by {env.anchors.tag} anchors "
                                         f"({env.start:g} -> {env.reference:g}), not the GPU setting's"]
    opened, sealed = open_rows(list(rows))  # hidden scores: opened with the researcher's key, else said sealed
    notes += [sealed_note(sealed)] if sealed else []
    return make_run(SourceKind.HUMAN_SESSION, session_id, env, HUMAN_LABEL, trace_scorings(opened), finished=finished,
                    source=source, working_s=working[-1] if working else None, human=True, notes=notes,
                    setting_differs=setting_differs({"setting": started.get("setting")}))
