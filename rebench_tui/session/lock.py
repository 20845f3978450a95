"""One app per session: a lock file naming the process and host that hold it."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

from ..errors import SessionError


def _proc_stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state first), or None where there is
    no /proc to read (then only a signal can tell)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def _started_at(fields: list[str]) -> float | None:
    """When the process started (epoch seconds), from its stat fields and the boot time."""
    try:
        ticks = int(fields[19])
        boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (IndexError, ValueError, OSError, StopIteration):
        return None


def _alive(pid: int, since: float | None = None) -> bool:
    """Whether the app that wrote a lock at ``since`` still runs as ``pid``.

    A zombie is not alive: a killed app whose parent went first (a login whose connection dropped)
    is re-parented, and where the new parent never reaps it (a container's PID 1, often) it stays a
    zombie for good. Nor is a process that started after the lock was written: the PID was reused.
    """
    fields = _proc_stat(pid)
    if fields == []:
        return False
    if fields:
        if fields[0] in ("Z", "X", "x"):
            return False
        started = _started_at(fields)
        if since is not None and started is not None and started > since + 2.0:
            return False
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _since(holder: dict) -> float | None:
    since = holder.get("since")
    return float(since) if isinstance(since, (int, float)) else None


class SessionLock:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.held = False

    def holder(self) -> dict | None:
        try:
            return json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def live_holder(self) -> dict | None:
        """Who holds the lock, if it is held: a process alive on this host, or one on another host
        (which cannot be checked from here). None for no lock or a stale one."""
        other = self.holder()
        if not other:
            return None
        if other.get("host") == socket.gethostname():
            return other if isinstance(other.get("pid"), int) and _alive(other["pid"], _since(other)) else None
        return other

    def acquire(self) -> str | None:
        """Take the lock; returns a note if a stale lock was taken over. Raises if a live app holds it."""
        me = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time()}
        note = None
        for _ in range(2):
            try:
                fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
            except FileExistsError:
                other = self.holder() or {}
                same_host = other.get("host") == me["host"]
                if same_host and isinstance(other.get("pid"), int) and _alive(other["pid"], _since(other)):
                    raise SessionError(
                        f"this session is open in another app: PID {other['pid']} on {other['host']}",
                        kept="the session is untouched",
                        fix=f"close that app (or `kill {other['pid']}` if it hangs), then resume again",
                    ) from None
                if not same_host and other:
                    raise SessionError(
                        f"this session is held by PID {other.get('pid')} on host {other.get('host')}",
                        kept="the session is untouched",
                        fix=f"close the app on {other.get('host')}; if that host is gone, delete {self.path} and resume again",
                    ) from None
                note = f"took over a stale lock left by PID {other.get('pid')} on {other.get('host')}"
                self.path.unlink(missing_ok=True)
                continue
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(me, fh)
            self.held = True
            return note
        raise SessionError(f"could not take the session lock {self.path}", fix="try again")

    def release(self) -> None:
        if self.held:
            self.path.unlink(missing_ok=True)
            self.held = False
