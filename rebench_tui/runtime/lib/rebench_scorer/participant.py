"""Start the participant's code in a process of its own.

The scorer runs as root (or, on the local runtime, as you); the participant's code must never run
inside it: it could print a fake result, walk up to the scorer's frames, patch its clock, or read
held-out data. :func:`start` runs ``argv`` as the owner of the participant's home (uid 1000 in a
container), with no supplementary groups (so not ``protected``), in a new session, with:

- its own stdout and stderr, read by the scorer into bounded tails (never passed on as the
  scorer's output);
- stdin from /dev/null;
- no inherited descriptors but the control socket (fd number in ``REBENCH_CONTROL_FD``);
- an environment without the scorer's secrets: only what :data:`KEEP` names and what the scorer
  passes in ``env``;
- no bytecode cache read or written, and a temporary folder (``TMPDIR``) of its own, removed
  when the scorer is done with it (:mod:`room`);
- resource limits (core files off; CPU seconds, open files and address space when given), and
  the highest OOM score, so a memory blow-up (a fork bomb's copies, say) kills its processes
  before it reaches the scorer.

The process group is killed when the scorer is done with it; whatever escaped the group is killed
by the supervisor, which is the subreaper of everything below the scorer.

On the local runtime (not isolated) the process runs as you: it is apart from the scorer's memory
and result channel, but not from your files.
"""

from __future__ import annotations

import os
import pwd
import resource
import signal
import socket
import subprocess
import threading
from dataclasses import dataclass, field
from typing import Any, Sequence

from .channel import FD_VARIABLE, Channel
from .room import NEUTRAL_CWD, Room

KEEP = ("PATH", "LANG", "LC_ALL", "TZ", "REBENCH_HOME", "REBENCH_PROFILE", "REBENCH_ISOLATED", "LD_LIBRARY_PATH",
        "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "TRITON_INTERPRET", "OMP_NUM_THREADS", "PYTHONUNBUFFERED",
        "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR")
TAIL_BYTES = 16_000


@dataclass(frozen=True)
class Account:
    uid: int
    gid: int
    name: str
    home: str

    @property
    def is_me(self) -> bool:
        return self.uid == os.geteuid()


def account(home: str | None = None) -> Account:
    """The participant: the owner of their home folder (REBENCH_HOME)."""
    home = home or os.environ.get("REBENCH_HOME", "/home/agent")
    st = os.stat(home)
    try:
        name = pwd.getpwuid(st.st_uid).pw_name
    except KeyError:
        name = str(st.st_uid)
    return Account(st.st_uid, st.st_gid, name, home)


class _Tail:
    """The last ``limit`` bytes of a stream, read by a thread."""

    def __init__(self, stream, limit: int = TAIL_BYTES) -> None:
        self.limit = limit
        self.data = bytearray()
        self.total = 0
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):
            self.total += len(chunk)
            self.data += chunk
            if len(self.data) > self.limit:
                del self.data[: len(self.data) - self.limit]
        stream.close()

    def text(self) -> str:
        self.thread.join(timeout=2)
        body = bytes(self.data).decode("utf-8", errors="replace")
        cut = self.total - len(self.data)
        return (f"[{cut} earlier bytes not kept]\n" if cut > 0 else "") + body


@dataclass
class Limits:
    cpu_seconds: int | None = None
    open_files: int | None = 4096
    address_space: int | None = None  # bytes; leave None for CUDA (it maps huge ranges)


@dataclass
class Participant:
    proc: subprocess.Popen
    who: Account
    channel: Channel | None
    _out: _Tail
    _err: _Tail
    info: dict[str, Any] = field(default_factory=dict)
    room: Room | None = None

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout: float | None = None) -> int | None:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> int:
        """End the whole process group; returns the exit status (128 + signal when killed)."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        rc = self.proc.wait()
        if self.channel is not None:
            self.channel.close()
        if self.room is not None:
            self.room.remove()
        return 128 - rc if rc < 0 else rc

    def stdout(self) -> str:
        return self._out.text()

    def stderr(self) -> str:
        return self._err.text()

    def report(self) -> dict[str, Any]:
        """What the participant's process printed and how it ended, for the result's details."""
        rc = self.proc.poll()
        out: dict[str, Any] = {"participant_uid": self.who.uid, "participant_exit": None if rc is None else (128 - rc if rc < 0 else rc)}
        if (text := self.stdout()).strip():
            out["participant_stdout_tail"] = text[-4000:]
        if (text := self.stderr()).strip():
            out["participant_stderr_tail"] = text[-4000:]
        return out


def clean_env(who: Account, env: dict[str, str] | None = None) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k in KEEP}
    base.update({"HOME": who.home, "USER": who.name, "LOGNAME": who.name, "PYTHONUNBUFFERED": "1"})
    base.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    base.update(env or {})
    return base


def _child_setup(limits: Limits, become: tuple[int, int] | None):
    """What the child does before exec, still with the scorer's rights: OOM score, limits, ids."""

    def prepare_child() -> None:
        try:  # the kernel's OOM killer takes the participant's processes first, never the scorer
            with open("/proc/self/oom_score_adj", "w") as fh:  # (after the switch below it is root's file)
                fh.write("1000")
        except OSError:
            pass
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if limits.cpu_seconds:
            resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds))
        if limits.open_files:
            soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
            cap = limits.open_files if hard == resource.RLIM_INFINITY else min(limits.open_files, hard)
            resource.setrlimit(resource.RLIMIT_NOFILE, (cap, cap))
        if limits.address_space:
            resource.setrlimit(resource.RLIMIT_AS, (limits.address_space, limits.address_space))
        if become is not None:  # no supplementary groups (not `protected`), then the participant's ids
            os.setgroups([])
            os.setgid(become[1])
            os.setuid(become[0])

    return prepare_child


def start(argv: Sequence[str], *, cwd: str | None = None, env: dict[str, str] | None = None, control: bool = True,
          limits: Limits | None = None, who: Account | None = None, stdout: Any = None,
          trusted: bool = False) -> Participant:
    """Start ``argv`` as the participant (see the module docstring). ``control``: give it the
    other end of a control channel (``Participant.channel``). ``stdout``: a file to write its
    standard output to instead of a kept tail (for long logs). ``trusted``: the scorer's own code
    running as the participant's user (start it with :func:`room.python_argv`): its home and
    caches are in its room, its folder outside the home, so nothing of the participant's is read."""
    who = who or account()
    limits = limits or Limits()
    room = Room(who.uid, who.gid)
    full_env = {**clean_env(who, env), **room.env(trusted)}
    cwd = NEUTRAL_CWD if trusted else cwd
    ours = theirs = None
    pass_fds: tuple[int, ...] = ()
    if control:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        pass_fds = (theirs.fileno(),)
        full_env[FD_VARIABLE] = str(theirs.fileno())
    prepare_child = _child_setup(limits, (who.uid, who.gid) if os.geteuid() == 0 else None)
    try:
        proc = subprocess.Popen(list(argv), cwd=cwd or who.home, env=full_env, stdin=subprocess.DEVNULL,
                                stdout=stdout if stdout is not None else subprocess.PIPE, stderr=subprocess.PIPE,
                                close_fds=True, pass_fds=pass_fds, start_new_session=True, preexec_fn=prepare_child)
    except BaseException:
        room.remove()
        raise
    if theirs is not None:
        theirs.close()
    out = _Tail(proc.stdout) if stdout is None else _EmptyTail()
    return Participant(proc, who, Channel(ours) if ours is not None else None, out, _Tail(proc.stderr), room=room)


class _EmptyTail(_Tail):
    def __init__(self) -> None:  # noqa: D107 - nothing to read
        self.data, self.total, self.limit = bytearray(), 0, 0
        self.thread = threading.Thread(target=lambda: None)
        self.thread.start()


def run(argv: Sequence[str], *, timeout: float, cwd: str | None = None, env: dict[str, str] | None = None,
        limits: Limits | None = None, stdout: Any = None) -> tuple[int | None, Participant]:
    """Run ``argv`` as the participant to its end or ``timeout`` (then kill it): (exit status, or
    None on timeout; the process, for its output tails)."""
    p = start(argv, cwd=cwd, env=env, control=False, limits=limits, stdout=stdout)
    rc = p.wait(timeout)
    code = p.kill()
    return (None if rc is None else code), p
