"""The one thing the kiosk does for a participant's request: start an environment or resume a
session, both their own, or a one-line refusal saying what they can do instead."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ...errors import RebenchError
from .policy import Place
from .request import Request
from .sessions import Held


@dataclass(frozen=True)
class Plan:
    action: Literal["start", "resume"]
    target: str  # an environment id to start, or a session id to resume


def _no(what: str) -> RebenchError:
    return RebenchError(what)  # one line: the refusal says what to do instead


def decide(request: Request, place: Place, held: list[Held]) -> Plan:
    """Rules: one unfinished session at a time; each allowed environment started once (a second
    start would hand out a fresh clock); only the participant's own, isolated sessions resumed.
    Another participant's session is refused with the same words as one that does not exist."""
    open_ = [h for h in held if not h.finished]
    if request.action == "resume" or (request.action == "enter" and open_):
        return Plan("resume", _resumable(request.target, open_, held).id)
    if request.action == "enter":
        left = [e for e in place.environments if all(h.env_id != e for h in held)]
        if len(left) == 1:
            return _start(left[0], place, held, open_)
        if not left:
            raise _no("you have no unfinished session and no environment left to start in this study")
        raise _no(f"say which environment to start: `ssh HOST start ENV` with ENV one of {', '.join(left)}")
    return _start(request.target or "", place, held, open_)


def _start(env_id: str, place: Place, held: list[Held], open_: list[Held]) -> Plan:
    if env_id not in place.environments:
        raise _no(f"{env_id!r} is not an environment of yours in this study: you may start {', '.join(place.environments)}")
    if open_:
        raise _no(f"your session {open_[-1].id} is not finished: resume it with `ssh HOST resume` (one session at a time)")
    done = [h for h in held if h.env_id == env_id]
    if done:
        raise _no(f"you already worked on {env_id} in session {done[-1].id} (finished); each environment is started once")
    return Plan("start", env_id)


def _resumable(target: str | None, open_: list[Held], held: list[Held]) -> Held:
    if target is None:
        if not open_:
            raise _no("you have no unfinished session to resume: start one with `ssh HOST start ENV`")
        found = open_[-1]
    else:
        match = [h for h in held if h.id == target] or [h for h in held if h.id.startswith(target)]
        if len(match) != 1:
            raise _no(f"you have no session {target!r}" + ("" if len(match) == 0 else " (give more of its id)"))
        found = match[0]
        if found.finished:
            raise _no(f"your session {found.id} is finished: its record takes nothing more")
    if not found.isolated:
        raise _no(f"your session {found.id} does not run in a container, so it is not opened from this login; "
                  "ask the study's researcher")
    return found
