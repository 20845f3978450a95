"""The host's side of the command supervisor (supervise.py, run in the sandbox): its command line,
a fresh nonce for each exec's status line, the filter that takes that line out of the command's
output, and the :class:`ExecResult` made of the status.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

OutputFn = Callable[[str, bytes], None]  # (stream name "stdout"|"stderr", chunk)
STATUS_MARKER = b"\x1erebench-exec "


@dataclass
class ExecResult:
    exit_code: int
    stdout: str
    stderr: str
    duration_s: float
    timed_out: bool = False
    cancelled: bool = False
    refused_links: list[list[str]] = field(default_factory=list)  # guarded runs: found before; the command did not run
    late_links: list[list[str]] = field(default_factory=list)     # guarded runs: found after the command
    # What the command wrote into its result channel (REBENCH_RESULT_FD), as the supervisor read it
    # back: the only place a scorer's result is taken from. None: nothing was written.
    result: str | None = None
    # Scorings in a container: how many of the participant's processes were stopped while it ran.
    frozen_processes: int = 0
    swept_temporary_files: int = 0  # and how many files it left in the shared temporary folders were removed
    bytecode_files_removed: int = 0  # the participant's Python bytecode files, removed before it started

    @property
    def ok(self) -> bool:
        return self.exit_code == 0 and not self.timed_out and not self.cancelled



def supervisor_argv(python: str, supervisor: str, token: str, argv: Sequence[str], *, user: str | None,
                    workdir: str | None, timeout: float | None, state_dir: str,
                    guard: tuple[str, Sequence[str]] | None = None, keep_status: bool = False) -> list[str]:
    # -I -S: isolated (no PYTHON* variables, no current folder on the path) and no site import, which
    # the standard-library-only supervisor does not need (it starts once per scoring)
    cmd = [python, "-I", "-S", supervisor, "run", "--token", token, "--state-dir", state_dir]
    if guard is not None:  # a scoring: links checked around it, the participant's processes stopped during it
        root, forbid = guard
        cmd += ["--guard-links", root, *[a for path in forbid for a in ("--forbid", path)], "--freeze-owner-of", root]
    if user:
        cmd += ["--user", user]
    if workdir:
        cmd += ["--cwd", workdir]
    if timeout:
        cmd += ["--timeout", f"{timeout:.3f}"]
    if keep_status:
        cmd += ["--keep-status"]
    return [*cmd, "--", *argv]


def exec_nonce() -> str:
    """A fresh secret for one exec's status line (passed to the supervisor as REBENCH_EXEC_NONCE)."""
    return secrets.token_hex(16)


class StatusFilter:
    """Collects a supervised command's output, strips the supervisor's status line, forwards the rest.

    Output is kept up to ``keep`` bytes per stream (the tail). With a ``nonce``, only a status line
    carrying it counts: a command cannot print a status of its own making.
    """

    def __init__(self, forward: OutputFn | None, keep: int = 1 << 20, nonce: str = "") -> None:
        self.forward = forward
        self.keep = keep
        self.marker = STATUS_MARKER if not nonce else STATUS_MARKER[:-1] + b":" + nonce.encode() + b" "
        self._held = bytearray()
        self._out = {"stdout": bytearray(), "stderr": bytearray()}
        self.truncated = {"stdout": 0, "stderr": 0}
        self.status: dict[str, Any] | None = None

    def _emit(self, stream: str, chunk: bytes) -> None:
        if not chunk:
            return
        buf = self._out[stream]
        buf += chunk
        if len(buf) > self.keep:
            drop = len(buf) - self.keep
            self.truncated[stream] += drop
            del buf[:drop]
        if self.forward:
            self.forward(stream, chunk)

    def feed(self, stream: str, chunk: bytes) -> None:
        if stream == "stdout":
            self._emit(stream, chunk)
            return
        self._held += chunk
        while True:
            idx = self._held.find(b"\x1e")
            if idx < 0:
                self._emit("stderr", bytes(self._held))
                self._held.clear()
                return
            tail = bytes(self._held[idx:])
            n = min(len(tail), len(self.marker))
            if tail[:n] == self.marker[:n]:
                # Possibly the status line: forward what precedes it and hold the rest.
                self._emit("stderr", bytes(self._held[:idx]))
                del self._held[:idx]
                return
            self._emit("stderr", bytes(self._held[: idx + 1]))
            del self._held[: idx + 1]

    def finish(self) -> None:
        rest = bytes(self._held)
        self._held.clear()
        idx = rest.rfind(self.marker)
        if idx >= 0:
            line_end = rest.find(b"\n", idx)
            payload = rest[idx + len(self.marker): line_end if line_end >= 0 else None]
            try:
                self.status = json.loads(payload)
            except ValueError:
                self.status = None
            rest = rest[:idx] + (rest[line_end + 1:] if line_end >= 0 else b"")
        self._emit("stderr", rest)

    def text(self, stream: str) -> str:
        data = self._out[stream].decode("utf-8", errors="replace")
        if self.truncated[stream]:
            data = f"[{self.truncated[stream]} earlier bytes not kept]\n" + data
        return data

    def result(self, returncode: int, duration_s: float) -> ExecResult:
        return exec_result(self.status or {}, self.text("stdout"), self.text("stderr"), returncode, duration_s)


def exec_result(st: dict[str, Any], stdout: str, stderr: str, returncode: int = -1, duration_s: float = 0.0) -> ExecResult:
    """An :class:`ExecResult` from the supervisor's status (its status line, or the status it kept)."""
    return ExecResult(
        exit_code=int(st.get("returncode", returncode)),
        stdout=stdout,
        stderr=stderr,
        duration_s=float(st.get("duration_s", duration_s)),
        timed_out=bool(st.get("timed_out", False)),
        cancelled=bool(st.get("cancelled", False)),
        refused_links=[list(map(str, x)) for x in st.get("refused_links") or []],
        late_links=[list(map(str, x)) for x in st.get("late_links") or []],
        result=st["result"] if isinstance(st.get("result"), str) else None,
        frozen_processes=int(st.get("frozen_processes") or 0),
        swept_temporary_files=int(st.get("swept_temporary_files") or 0),
        bytecode_files_removed=int(st.get("bytecode_files_removed") or 0),
    )
