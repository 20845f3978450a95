"""A participant's new login takes their session over from an earlier login of theirs.

A connection that drops without the server noticing (a laptop that sleeps, a network that
changes) leaves its app running until sshd gives up on it, minutes later. The participant cannot
end it themselves (the kiosk gives them no shell on the host), so the new login ends it, as a
terminal multiplexer's attach would: the earlier app gets the hang-up a dropped connection sends,
then, if it still holds the session, a kill. Only an app of this host that holds this participant's
own session is ever signalled (the kiosk resumes nothing else).
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from ...session.layout import LOCK
from ...session.lock import SessionLock

HANG_UP_WAIT_S = 10.0  # what an app gets to close after the hang-up (it writes nothing more on one)
KILL_WAIT_S = 5.0


def _until_free(lock: SessionLock, seconds: float) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if lock.live_holder() is None:
            return True
        time.sleep(0.1)
    return lock.live_holder() is None


def end_earlier_login(folder: Path, host: str) -> str | None:
    """End the app of an earlier login that holds the session in ``folder``; returns what to tell
    the participant, or None where no app of this host holds it (then resuming says the rest)."""
    lock = SessionLock(folder / LOCK)
    holder = lock.live_holder()
    if not holder or holder.get("host") != host or not isinstance(holder.get("pid"), int) or holder["pid"] == os.getpid():
        return None
    pid = holder["pid"]
    for sig, wait in ((signal.SIGHUP, HANG_UP_WAIT_S), (signal.SIGKILL, KILL_WAIT_S)):
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            break
        except PermissionError:
            return None  # not ours to end: resuming says who holds it
        if _until_free(lock, wait):
            break
    else:
        return f"kiosk: your session is still open in an earlier login (PID {pid}), which could not be closed"
    return f"kiosk: your session was still open in an earlier login (PID {pid}): that login was closed"
