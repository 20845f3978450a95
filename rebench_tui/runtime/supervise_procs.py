"""The command supervisor's processes (a part of supervise.py, shipped and run beside it): every
process below the supervisor (it is their subreaper) and of one user, read from /proc in one
pass, and the signals sent to them. Standard library only.
"""

from __future__ import annotations

import os
import time

try:  # the C module behind ``signal``: the same functions and numbers, without enum (5 ms a start here)
    import _signal as signal
except ImportError:  # pragma: no cover - another Python
    import signal  # type: ignore[no-redef]


PR_SET_CHILD_SUBREAPER = 36


def _become_subreaper() -> bool:
    """Orphans of the command (double-forked daemons) become our children, so they can be ended."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):  # pragma: no cover - not Linux
        return False


def _parents() -> dict[int, int]:
    """Every process's parent (pid -> ppid), from one pass over /proc."""
    parents: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return parents
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 1:
            parents[int(name)] = int(fields[1])
    return parents


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``, from one look at /proc (a tree of thousands, a fork bomb's, is
    one pass, not one pass per process)."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents().items():
        children.setdefault(parent, []).append(child)
    found: list[int] = []
    todo = list(children.get(pid, ()))
    while todo:
        p = todo.pop()
        found.append(p)
        todo.extend(children.get(p, ()))
    return found


def _signal_each(pids: list[int], sig: int) -> int:
    """Send ``sig`` to each of ``pids``; how many it reached (one gone, or not ours, is skipped)."""
    sent = 0
    for pid in pids:
        try:
            os.kill(pid, sig)
            sent += 1
        except (ProcessLookupError, PermissionError):
            pass
    return sent


def _end_descendants() -> int:
    """SIGKILL every process below this one, again and again until none is left (a fork bomb keeps
    forking while we look); reap them. Returns how many were killed."""
    me = os.getpid()
    killed = 0
    for _round in range(200):
        found = _descendants(me)
        if not found:
            break
        killed += _signal_each(found, signal.SIGKILL)
        while True:  # reap what has died (orphans reparented to us included)
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                time.sleep(0.01)
                break
    return killed


def _uids(pid: int) -> tuple[int, ...]:
    """The real, effective, saved and filesystem uids of ``pid`` (empty when it is gone)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"Uid:"):
                    return tuple(int(x) for x in line.split()[1:])
    except (OSError, ValueError):
        pass
    return ()


def _state_and_parent(pid: int) -> tuple[str, int]:
    """``pid``'s state letter (``T``: stopped) and its parent's pid; ``("", 0)`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b") ", 1)[1].split()
        return fields[0].decode(), int(fields[1])
    except (OSError, IndexError, ValueError):
        return "", 0


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _runs_token(pid: int, token: str) -> bool:
    """Whether ``pid`` is a supervisor of ``token`` (a pid alone may have been reused)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            return token.encode() in fh.read().split(b"\0")
    except OSError:
        return False


def _group(pgid: int) -> list[int]:
    """The pids of process group ``pgid``."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if len(fields) > 2 and int(fields[2]) == pgid:
            found.append(int(name))
    return found
