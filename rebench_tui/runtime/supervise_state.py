"""The command supervisor's state folder (a part of supervise.py, shipped and run beside it): each
run's files (the command's pid, the cancel mark, the supervisor's pid, the kept status, the record
of the processes it stopped) and the result channel's unlinked file. The durable writes of the
status and the record stay in supervise.py. Standard library only.
"""

from __future__ import annotations

import os


def _pidfile(state_dir: str, token: str) -> str:
    return os.path.join(state_dir, f"{token}.pid")


def _cancelfile(state_dir: str, token: str) -> str:
    return os.path.join(state_dir, f"{token}.cancel")


def _supfile(state_dir: str, token: str) -> str:
    return os.path.join(state_dir, f"{token}.sup")


def _statusfile(state_dir: str, token: str) -> str:
    return os.path.join(state_dir, f"{token}.status")


def _frozenfile(state_dir: str, token: str) -> str:
    return os.path.join(state_dir, f"{token}.frozen")


def _forget_old_statuses(state_dir: str) -> None:
    """A kept status is needed until the session has read it: before the next scoring starts."""
    for name in os.listdir(state_dir):
        if name.endswith((".status", ".status.tmp")):
            try:
                os.unlink(os.path.join(state_dir, name))
            except FileNotFoundError:
                pass


def _read_int(path: str) -> int | None:
    try:
        with open(path) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


def _result_fd(state_dir: str) -> int:
    """An unlinked, root-only file for the command's result (see the module docstring)."""
    while True:
        path = os.path.join(state_dir, "result-" + os.urandom(8).hex())
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            continue
        os.unlink(path)
        os.set_inheritable(fd, True)
        return fd


RESULT_LIMIT = 1 << 20


def _read_result(fd: int) -> str | None:
    size = os.fstat(fd).st_size
    if not size:
        return None
    os.lseek(fd, max(0, size - RESULT_LIMIT), 0)
    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", errors="replace")
