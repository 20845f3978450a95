"""The session folder's names (their home is ``trajectory.records``, below both this package and the
readers) and how a new session is named."""

from __future__ import annotations

import time
from secrets import token_hex

from ..trajectory.records import AUDIT, COMMANDS_STATE, FILES_STATE, LOCK, META, SCORE_LOG, STATE, WORKSPACE

__all__ = ["AUDIT", "COMMANDS_STATE", "FILES_STATE", "LOCK", "META", "SCORE_LOG", "STATE", "WORKSPACE", "new_session_id"]


def new_session_id(env_id: str, wall: float) -> str:
    return f"{env_id}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(wall))}-{token_hex(2)}"
