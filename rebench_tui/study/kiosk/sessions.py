"""A participant's own sessions in the sessions folder (by the participant id each session.json
records). A folder that cannot be read is skipped: it is nobody's to resume from the kiosk."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ...trajectory.records import META, SessionMeta


@dataclass(frozen=True)
class Held:
    id: str
    env_id: str
    finished: bool
    isolated: bool  # in a container (the docker runtime); never resumed from the kiosk otherwise
    created_at: int


def own_sessions(sessions_dir: Path, participant: str) -> list[Held]:
    if not sessions_dir.is_dir():
        return []
    held = []
    for folder in sessions_dir.iterdir():
        try:
            meta = SessionMeta.load(folder / META)
        except Exception:  # noqa: BLE001 - damaged or not a session: not resumable here
            continue
        if meta.participant.id == participant:
            held.append(Held(meta.id, meta.env_id, meta.status == "finished",
                             meta.runtime == "docker" and meta.isolated, meta.created_at))
    return sorted(held, key=lambda h: h.created_at)
