"""Binding a session to a study (``start --study URL --participant ID``) and witnessing it
whenever it is open: the binding is kept in the session's state folder and written into its
record, so `resume`, `score` and `finish` stream to the same collector."""

from __future__ import annotations

import json
from pathlib import Path

from ..config import Settings
from ..errors import RebenchError
from ..trajectory.entries import log
from ..trajectory.records import STATE
from .client import Collector, CollectorRefused, CollectorUnreachable, load_token
from .witness import Witness

STUDY_FILE = "study.json"


def collector_for(url: str, settings: Settings) -> Collector:
    return Collector(url, load_token(settings), ca=settings.study_ca)


def check_participant(collector: Collector, participant: str) -> str | None:
    """Refuse a token that is not ``participant``'s; a note (None: all is well) when the
    collector cannot be asked now (the session starts anyway and catches up later)."""
    try:
        me = collector.whoami()
    except CollectorUnreachable:
        return (f"the collector at {collector.url} does not answer now; the session starts and its rows are sent "
                "once it does")
    except CollectorRefused as exc:
        raise RebenchError(f"the collector at {collector.url} does not take this token ({exc.status})",
                           kept="nothing was started", fix="check the token your researcher gave you") from None
    if me.get("participant") != participant:
        raise RebenchError(f"this token is {me.get('participant')!r}'s, not {participant!r}'s",
                           kept="nothing was started", fix="start with your own --participant id and token")
    return None


def bind(session, url: str, participant: str) -> None:
    """Record that ``session`` belongs to a study (state/study.json, and a row in its record)."""
    path = Path(session.folder) / STATE / STUDY_FILE
    path.write_text(json.dumps({"url": url, "participant": participant}) + "\n", encoding="utf-8")
    session.audit.append(log(f"witnessed by the study collector at {url} as participant {participant}",
                             {"event": "study_bound", "collector": url, "participant": participant},
                             title="study"))


def binding(folder: Path) -> dict[str, str] | None:
    path = folder / STATE / STUDY_FILE
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None


def witness_session(session, settings: Settings) -> Witness | None:
    """Start streaming an open session's rows, if it belongs to a study."""
    bound = binding(Path(session.folder))
    if bound is None:
        return None
    return Witness(Path(session.folder), collector_for(bound["url"], settings)).start(session.audit)
