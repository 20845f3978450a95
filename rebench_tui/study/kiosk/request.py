"""What a participant asked for over ssh: nothing (enter), ``start ENV`` or ``resume [SESSION]``.

The words come from ``SSH_ORIGINAL_COMMAND`` (what the participant typed after the host name, an
sftp or scp request included); everything else is refused with one line.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from typing import Literal

from ...errors import UsageError

USAGE = "`ssh HOST` (your session), `ssh HOST start ENV` or `ssh HOST resume`"
_MAX_SHOWN = 60


@dataclass(frozen=True)
class Request:
    action: Literal["enter", "start", "resume"]
    target: str | None = None  # the environment to start, or the session to resume


def refused(asked: str) -> UsageError:
    shown = asked if len(asked) <= _MAX_SHOWN else asked[:_MAX_SHOWN] + "…"
    return UsageError(f"this login only starts or resumes your own session, so {shown!r} was refused: use {USAGE}")


def parse_request(original: str | None) -> Request:
    """The participant's request from ``SSH_ORIGINAL_COMMAND`` (None or blank: a plain login)."""
    text = (original or "").strip()
    if not text:
        return Request("enter")
    try:
        words = shlex.split(text)
    except ValueError:
        raise refused(text) from None
    if words[:1] == ["start"] and len(words) == 2 and _plain(words[1]):
        return Request("start", words[1])
    if words[:1] == ["resume"] and len(words) <= 2 and all(_plain(w) for w in words[1:]):
        return Request("resume", words[1] if len(words) == 2 else None)
    raise refused(text)


def _plain(word: str) -> bool:
    """An environment or session id: letters, digits, ``_`` and ``-`` (never a path or an option)."""
    return bool(word) and not word.startswith("-") and all(c.isalnum() or c in "_-" for c in word)
