"""What every process a scorer starts may import and where it may keep temporary files.

A scoring must run on what is in the record, nothing else. Two doors stay open otherwise:

- Compiled bytecode. Python prefers a ``__pycache__/*.pyc`` whose stamp matches its source, and
  those files are neither recorded nor fingerprinted: a planted one runs in place of the recorded
  source. In a container the supervisor removes every bytecode file of the participant's user
  before a scoring (with their processes stopped, none can be planted again meanwhile), and the
  processes a scorer starts write none (``PYTHONDONTWRITEBYTECODE``): the participant's modules
  are compiled from the recorded source, while the installed packages' own caches (root's, out of
  the participant's reach) still save their start-up time. (A cache prefix below ``/dev/null``
  for every process was tried first: ``import torch`` took 5.7 s instead of 2.3 s, every run.)
- Temporary files. Each started process gets a temporary folder of its own (``TMPDIR``), made
  afresh for it and removed when the scorer is done with it, so what one scoring leaves there is
  gone before the next. As root the folder sits in a root-owned folder nobody else can list.

:func:`python_argv` is how a scorer starts a Python process of its own (trusted code, such as a
GPU side that runs as the participant's user): isolated mode (``-I``: no current folder or
script folder on ``sys.path``, no user site directory, no ``PYTHON*`` variables), no bytecode
cache written. Such a process must also be started in a folder outside the participant's home
(:data:`NEUTRAL_CWD`).

Standard library only.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

NEUTRAL_CWD = "/"


def python_argv(code: str, *args: str) -> list[str]:
    """``python -I -B -c code args``: imports only the standard library's and the installed
    packages' own files, whose caches are root's (see the module docstring), and writes none."""
    return [sys.executable, "-I", "-B", "-c", code, *args]


def bytecode_env() -> dict[str, str]:
    """Environment for a participant's process: it writes no bytecode cache."""
    return {"PYTHONDONTWRITEBYTECODE": "1"}


def _base() -> str:
    """Where rooms go: as root a shared temporary folder (the root scorer's own TMPDIR is private to
    it, so the participant's user could not reach a room inside it); otherwise the usual one."""
    if os.geteuid() == 0:
        for base in ("/tmp", "/var/tmp", "/dev/shm"):
            if os.path.isdir(base):
                return base
    return tempfile.gettempdir()


class Room:
    """A fresh temporary folder for one started process, owned by ``uid``; :meth:`remove` when done."""

    def __init__(self, uid: int, gid: int) -> None:
        base = _base()
        if os.geteuid() == 0 and uid != 0:
            self.outer = tempfile.mkdtemp(prefix="rebench-room-", dir=base)
            os.chmod(self.outer, 0o711)  # root's: nobody else lists it, the owner of tmp/ passes through
            self.tmp = os.path.join(self.outer, "tmp")
            os.mkdir(self.tmp, 0o700)
            os.chown(self.tmp, uid, gid)
        else:
            self.outer = self.tmp = tempfile.mkdtemp(prefix="rebench-room-", dir=base)

    def env(self, trusted: bool = False) -> dict[str, str]:
        """The variables that put the process in this room; ``trusted`` (the scorer's own code run
        as the participant's user): also its home and every cache it might read (the CUDA driver's
        compiled kernels, Triton's, Inductor's), none of them the participant's."""
        env = {"TMPDIR": self.tmp, "TMP": self.tmp, "TEMP": self.tmp, **bytecode_env()}
        if trusted:
            env.update({"HOME": self.tmp, "CUDA_CACHE_DISABLE": "1", "TRITON_CACHE_DIR": os.path.join(self.tmp, "triton"),
                        "TORCHINDUCTOR_CACHE_DIR": os.path.join(self.tmp, "inductor"),
                        "XDG_CACHE_HOME": os.path.join(self.tmp, "cache")})
        return env

    def remove(self) -> None:
        shutil.rmtree(self.outer, ignore_errors=True)
