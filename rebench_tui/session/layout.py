"""The session folder's names: one place for what ``create`` makes and every reader opens."""

from __future__ import annotations

import time
from secrets import token_hex

META = "session.json"
AUDIT = "audit.jsonl"
SCORE_LOG = "score_log.csv"
WORKSPACE = "workspace"
STATE = ".state"
FILES_STATE = "files.json"
COMMANDS_STATE = "commands.json"
LOCK = "lock"


def new_session_id(env_id: str, wall: float) -> str:
    return f"{env_id}-{time.strftime('%Y%m%d-%H%M%S', time.gmtime(wall))}-{token_hex(2)}"
