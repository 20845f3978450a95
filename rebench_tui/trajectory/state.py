"""A session's state as its audit log says it: finished, active or interrupted.

The audit log is the record of truth; ``session.json`` states the same things for readers in a
hurry and must agree with it (``verify`` checks, ``rebench-tui repair`` rewrites it from the log).

- **finished**: the log holds the finish row (event ``session_finished``). Nothing may follow it:
  the session's core refuses every write once it is there, and ``verify`` fails on any row after.
- **active**: no finish row, and the app (or command) that last opened the session closed it
  (a closing row: the pause or ``app_closed`` row the screen writes on quitting, or the
  ``session_closed`` row of a command without a screen), or an app holds it open now.
- **interrupted**: no finish row, and whatever last opened it ended without closing it (killed,
  the machine went down): the last opening row has no closing row after it and no live process
  holds the lock, or a scoring was running then (``.state/scoring.json``, ``audit.jsonl.pending``).
  Reopening settles it (the scoring is collected or recorded as interrupted); ``session.json``
  says ``active`` for it, as it cannot know.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from .entries import FINISH_EVENT, log_event
from .records import AUDIT, LOCK, STATE

OPENING_EVENTS = ("session_started", "session_resumed")
CLOSING_EVENTS = ("app_closed", "session_closed")
SCORING_MARKER = "scoring.json"  # session.scoring_marker.SCORING_STATE: a scoring's note of itself

State = Literal["finished", "active", "interrupted"]


@dataclass(frozen=True)
class ChainState:
    state: State
    detail: str
    finish_line: int | None = None  # the first finish row's line (1-based)
    after_finish: int = 0  # rows after it (a finished session has none)
    finish: dict[str, Any] | None = None  # the finish row's facts (reason, final score, files)

    @property
    def finished(self) -> bool:
        return self.state == "finished"

    @property
    def status(self) -> str:
        """What session.json's ``status`` must say for this state."""
        return "finished" if self.finished else "active"


def _closes(facts: dict[str, Any]) -> bool:
    event = facts.get("event")
    return event in CLOSING_EVENTS or (event == "pause" and facts.get("reason") == "app closed")


def held_open(folder: Path) -> str | None:
    """Who holds the session open now (the lock file names a live process on this host), or None."""
    try:
        holder = json.loads((folder / LOCK).read_text(encoding="utf-8"))
        pid = int(holder["pid"])
    except (OSError, ValueError, TypeError, KeyError):
        return None
    if holder.get("host") != socket.gethostname():
        return f"PID {pid} on {holder.get('host')}"  # another machine's app: taken as alive
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return f"PID {pid}"


def chain_state(rows: list[dict[str, Any]], folder: Path | None = None) -> ChainState:
    """The state the rows say (``folder``: where to look for a live lock and a running scoring)."""
    finish_line, finish, opened, closed = None, None, None, True
    for n, row in enumerate(rows, start=1):
        facts = log_event(row.get("content"))
        if facts is None:
            continue
        if facts.get("event") == FINISH_EVENT and finish_line is None:
            finish_line, finish = n, facts
        elif facts.get("event") in OPENING_EVENTS:
            opened, closed = n, False
        elif _closes(facts):
            closed = True
    if finish_line is not None:
        after = len(rows) - finish_line
        return ChainState("finished", f"finished at line {finish_line} ({finish.get('reason')})"
                          + (f"; {after} row(s) follow the finish row" if after else ""), finish_line, after, finish)
    scoring = folder is not None and ((folder / STATE / SCORING_MARKER).exists()
                                      or (folder / (AUDIT + ".pending")).exists())
    holder = held_open(folder) if folder is not None else None
    if holder is not None:
        return ChainState("active", f"active: open now ({holder})")
    if scoring:
        return ChainState("interrupted", "interrupted: a scoring was running when the app ended (resuming settles it)")
    if opened is not None and not closed:
        return ChainState("interrupted", f"interrupted: opened at line {opened} and never closed (the app was "
                                         "killed or the machine went down); resuming continues it")
    return ChainState("active", "active: not finished" + (f"; last opened at line {opened} and closed" if opened else ""))


def read_chain_state(folder: Path) -> ChainState:
    """:func:`chain_state` of a session folder's audit log (unreadable lines are left out: ``verify``
    names them)."""
    rows: list[dict[str, Any]] = []
    try:
        with open(folder / AUDIT, "rb") as fh:
            for raw in fh:
                try:
                    row = json.loads(raw)
                except (ValueError, RecursionError):
                    continue
                if isinstance(row, dict):
                    rows.append(row)
    except OSError:
        pass
    return chain_state(rows, folder)
