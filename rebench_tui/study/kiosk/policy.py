"""The kiosk file: which participants may log in, which environments each may start, and the
settings every kiosk session gets (sessions folder, engine, profile, time limit, study).

It belongs to the service account, like the sessions folder: a participant can neither read
another's entry nor change their own. Example (TOML)::

    sessions_dir = "/srv/rebench/sessions"
    study = "https://collector.example:8765"   # every session sends its rows to this collector
    profile = "gpu"
    time_limit = "8h"

    [participants.ada]
    environments = ["triton_cumsum", "fix_embedding"]

    [participants.bob]
    environments = ["rust_codecontests"]

With ``study``, each participant's collector token is given by their key's forced command
(``REBENCH_STUDY_TOKEN_FILE``), as every setting is; the collector refuses a token that is not
theirs before anything starts.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from ...clock import parse_duration
from ...errors import RebenchError

_TOP = {"sessions_dir", "host", "profile", "time_limit", "study", "participants"}
_ENTRY = {"environments"}


@dataclass(frozen=True)
class Place:
    """One participant's entry."""

    participant: str
    environments: tuple[str, ...]


@dataclass(frozen=True)
class Policy:
    path: Path
    sessions_dir: Path | None = None
    host: str | None = None
    profile: str | None = None
    time_limit_s: float | None = None
    study: str | None = None
    places: dict[str, Place] = field(default_factory=dict)

    def place(self, participant: str) -> Place:
        """The participant's entry; the same refusal for an unknown id as for a wrong key."""
        found = self.places.get(participant)
        if found is None:
            raise RebenchError(f"participant {participant!r} has no place in this study's kiosk",
                               fix="ask the study's researcher to add you")
        return found


def _bad(path: Path, what: str) -> RebenchError:
    return RebenchError(f"the kiosk file {path} is not usable: {what}", kept="nothing was started",
                        fix="the study's researcher corrects that file (participants cannot)")


def load_policy(path: Path) -> Policy:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise _bad(path, "it does not exist") from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise _bad(path, str(exc)) from None
    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise _bad(path, f"unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(_TOP))})")
    for key in ("sessions_dir", "host", "profile", "time_limit", "study"):
        if key in data and not isinstance(data[key], str):
            raise _bad(path, f"{key} must be a string")
    try:
        limit = parse_duration(data["time_limit"]) if "time_limit" in data else None
    except ValueError as exc:
        raise _bad(path, f"time_limit: {exc}") from None
    people = data.get("participants", {})
    if not isinstance(people, dict) or not people:
        raise _bad(path, "no [participants.ID] table")
    places = {pid: _place(path, pid, entry) for pid, entry in people.items()}
    sessions = data.get("sessions_dir")
    return Policy(path, Path(sessions) if sessions else None, data.get("host"), data.get("profile"), limit,
                  data.get("study"), places)


def _place(path: Path, pid: str, entry) -> Place:
    if not isinstance(entry, dict):
        raise _bad(path, f"participants.{pid} must be a table")
    unknown = sorted(set(entry) - _ENTRY)
    if unknown:
        raise _bad(path, f"participants.{pid}: unknown key(s) {', '.join(unknown)}")
    envs = entry.get("environments")
    if not isinstance(envs, list) or not envs or not all(isinstance(e, str) and e for e in envs):
        raise _bad(path, f"participants.{pid}.environments must list at least one environment id")
    return Place(pid, tuple(envs))
