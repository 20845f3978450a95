"""Compile a Rust program and run it against a problem's tests, the way the scorer does.

The scorer imports this same file (a pristine copy the participant cannot change), so a program
that passes here passes there, given the same tests and a similarly loaded machine:

- compile: ``rustc -O --edition 2021 main.rs -o main`` in a fresh folder, limited to
  COMPILE_CPU_SECONDS (3) seconds of CPU time, with a wall-clock backstop; a compile that fails
  or runs out of time means the problem is not solved;
- run: each test's input is fed on stdin; the program gets ceil(time_limit) seconds of CPU time
  (plus a wall-clock backstop), MEMORY_FLOOR or twice the problem's memory limit of address
  space, and may write at most OUTPUT_LIMIT bytes; the tests run in order and the first failure
  stops the problem;
- compare: outputs match when they are equal after splitting on whitespace (so spacing and
  line breaks do not matter; everything else does, including the digits of numbers).

Outcomes: passed, no_code, compile_error, compile_timeout, wrong_answer, runtime_error, timeout.
Limits use `prlimit` (util-linux) where it exists; without it only the wall-clock limits apply.

Confinement: on Linux (x86_64 and aarch64) each run of a program is confined by a seccomp filter
(:func:`confinement`): it may read files and write to the descriptors it was given, but may not
open a file for writing, create, rename, link or remove anything, open a socket, use System V or
POSIX message queues and shared memory, io_uring or ptrace (those calls fail with EPERM). A
program that solves the problem needs none of it; a program that tries to carry a test's input
somewhere (a file in /tmp, a loopback connection) gets nowhere. The compiler is not confined.

Where the harness runs as root with a user for the programs (the scorer in a container), each
program also runs in its own build folder as its whole filesystem (``chroot``; programs are linked
statically, so they need nothing else): it can open no file of the machine's, so a process that
watches files (inotify) sees nothing of it, and it has no /proc to read.

Folders: each program gets a fresh folder with two parts. ``build/`` is the compiler's and the
program's working folder (owned by ``run_as`` when given); ``io/`` is the harness's own (inputs,
outputs, the compiler's messages), which only the harness's user can enter. The program reaches
its input and output only through the descriptors it is given (stdin, stdout), and the harness
never opens a path inside ``build/`` after anything of the program's has run there, so a program
cannot make the harness read or write a file through a link it planted.
"""

from __future__ import annotations

import ctypes
import errno
import json
import math
import os
import platform
import shutil
import struct
import signal
import stat
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

COMPILE_CPU_SECONDS = 3
# Backstop only: a compile that waits for CPU is not cut off at 3 s of wall time. 12 s was too short:
# with the test suite in 3 processes on 2 cores, rustc -O waited past it for its 3 s of CPU, and the
# reference scaffold, taking that for a failure, asked again and scored 8/8 instead of 7/8.
COMPILE_WALL_SECONDS = 60.0
# crt-static: the program needs no file at all to start (no loader, no shared libraries), so it can
# run in a folder of its own as its whole filesystem (see run_test)
RUSTC_ARGS = ["-O", "--edition", "2021", "-C", "target-feature=+crt-static"]
MEMORY_FLOOR = 512 * 2**20
OUTPUT_LIMIT = 64 * 2**20
MAX_SOURCE_BYTES = 256 * 1024
NPROC_LIMIT = 1024  # processes and threads of the programs' user (run_as) at once
OUTCOMES = ("passed", "no_code", "compile_error", "compile_timeout", "wrong_answer", "runtime_error", "timeout")
# What solve() receives: everything but the hidden tests.
PUBLIC_FIELDS = ("name", "description", "public_tests", "time_limit", "memory_limit_bytes")


def load_problems(path: str | os.PathLike) -> list[dict]:
    """Problems from a JSONL file, one object per line (see the instructions for the fields)."""
    problems = []
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            if line.strip():
                try:
                    problems.append(json.loads(line))
                except ValueError as exc:
                    raise ValueError(f"{path}:{n}: not JSON: {exc}") from None
    return problems


def public_view(problem: dict) -> dict:
    """The problem as solve() sees it: no hidden tests."""
    return {k: problem[k] for k in PUBLIC_FIELDS if k in problem}


@dataclass
class Verdict:
    outcome: str
    detail: str = ""
    tests_passed: int = 0
    tests_total: int = 0
    compile_seconds: float = 0.0
    run_seconds: float = 0.0
    failed_test: int | None = None
    extra: dict = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    def as_dict(self) -> dict:
        return asdict(self)


def tokens(text: str) -> list[str]:
    return text.split()


def outputs_match(got: str, expected: str) -> bool:
    """Equal after splitting on whitespace."""
    return tokens(got) == tokens(expected)


def standard_error(successes: int, n: int) -> float:
    """Standard error of a fraction of successes: sqrt(p (1 - p) / n)."""
    if n <= 0:
        return float("nan")
    p = successes / n
    return math.sqrt(p * (1 - p) / n)


def available_cpus() -> int:
    """CPUs this process may use: its affinity, lowered by a cgroup CPU quota (containers)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    for path, parse in (("/sys/fs/cgroup/cpu.max", lambda t: t.split()),
                        ("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", None)):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if parse is not None:
            quota, period = parse(text)[:2]
        else:
            quota, period = text, Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text().strip()
        if quota not in ("max", "-1") and int(period) > 0:
            n = min(n, max(1, math.ceil(int(quota) / int(period))))
        break
    return max(1, n)


def _limits(cpu_seconds: int | None, memory: int | None, fsize: int | None, *, nproc: bool = False) -> list[str]:
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        return []
    args = [prlimit, "--core=0"]
    if nproc:  # a user of its own (the scorer's programs): a fork bomb stops here, not at the container's limit
        args.append(f"--nproc={NPROC_LIMIT}")
    if cpu_seconds is not None:
        args.append(f"--cpu={cpu_seconds}:{cpu_seconds + 1}")
    if memory is not None:
        args.append(f"--as={memory}")
    if fsize is not None:
        args.append(f"--fsize={fsize}")
    return args + ["--"]


# -- confinement of the programs (seccomp) ---------------------------------------------------------
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
# Calls refused outright (EPERM), per architecture; open/openat only with a flag that writes.
_DENY = {
    "x86_64": [41, 85, 437, 83, 258, 84, 86, 265, 88, 266, 87, 263, 82, 264, 316, 90, 91, 268, 452, 92, 93, 94, 260, 76,
               133, 259, 425, 426, 427, 101, 310, 311, 29, 68, 64, 240, 188, 189, 190, 197, 198, 199, 132, 235, 280, 261,
               303, 304, 321, 298, 323, 248, 249, 250],
    "aarch64": [198, 437, 34, 35, 36, 37, 38, 276, 52, 53, 452, 54, 55, 45, 33, 425, 426, 427, 117, 270, 271, 194, 186, 190,
                180, 5, 6, 7, 14, 15, 16, 88, 264, 265, 280, 241, 282, 217, 218, 219],
}
_OPEN_FLAGS_ARG = {"x86_64": {2: 1, 257: 2}, "aarch64": {56: 2}}  # syscall number -> index of its flags argument
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND | 0o20000000  # ... | __O_TMPFILE


def _bpf(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("HBBI", code, jt, jf, k)


def _filter_program(machine: str) -> bytes | None:
    if machine not in _AUDIT_ARCH:
        return None
    ld, jeq, jge, jset, ret = 0x20, 0x15, 0x35, 0x45, 0x06
    kill, allow, deny = 0x80000000, 0x7FFF0000, 0x00050000 | errno.EPERM
    prog = [_bpf(ld, 4), _bpf(jeq, _AUDIT_ARCH[machine], 1, 0), _bpf(ret, kill), _bpf(ld, 0)]
    if machine == "x86_64":  # the x32 numbers (bit 30) would slip past the checks below
        prog += [_bpf(jge, 0x40000000, 0, 1), _bpf(ret, deny)]
    for nr in _DENY[machine]:
        prog += [_bpf(jeq, nr, 0, 1), _bpf(ret, deny)]
    for nr, arg in _OPEN_FLAGS_ARG[machine].items():
        prog += [_bpf(jeq, nr, 0, 3), _bpf(ld, 16 + 8 * arg), _bpf(jset, _WRITE_FLAGS, 0, 1), _bpf(ret, deny), _bpf(ld, 0)]
    prog.append(_bpf(ret, allow))
    return b"".join(prog)


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


class _Confinement:
    """The filter, built once in the parent; :meth:`install` runs in the child before exec."""

    def __init__(self) -> None:
        self.available = False
        self.reason = ""
        program = _filter_program(platform.machine()) if os.name == "posix" and platform.system() == "Linux" else None
        if program is None:
            self.reason = f"no seccomp filter for {platform.system()} {platform.machine()}"
            return
        try:
            self._libc = ctypes.CDLL(None, use_errno=True)
            self._prctl = self._libc.prctl
        except (OSError, AttributeError) as exc:
            self.reason = f"prctl unavailable: {exc}"
            return
        self._buf = ctypes.create_string_buffer(program, len(program))
        self._fprog = _Fprog(len(program) // 8, ctypes.cast(self._buf, ctypes.c_void_p))
        self._ref = ctypes.byref(self._fprog)
        self.available = True

    def install(self) -> None:
        if self._prctl(38, 1, 0, 0, 0) != 0:  # PR_SET_NO_NEW_PRIVS
            raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS failed")
        if self._prctl(22, 2, self._ref, 0, 0) != 0:  # PR_SET_SECCOMP, SECCOMP_MODE_FILTER
            raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP failed")


_CONFINEMENT: _Confinement | None = None


def confinement() -> _Confinement:
    """The programs' seccomp filter; ``.available`` is False (with ``.reason``) where the platform or
    the kernel does not allow one: programs then run unconfined (checked once, with /bin/true)."""
    global _CONFINEMENT
    if _CONFINEMENT is None:
        c = _Confinement()
        if c.available:
            try:
                rc = subprocess.run(["true"], preexec_fn=c.install, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.DEVNULL, timeout=30).returncode
                if rc != 0:
                    c.available, c.reason = False, f"a confined /bin/true exited with {rc}"
            except (OSError, subprocess.SubprocessError) as exc:
                c.available, c.reason = False, f"the filter cannot be installed: {exc}"
        _CONFINEMENT = c
    return _CONFINEMENT



def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass


def _run(argv: Sequence[str], *, cwd: str | None, stdin, stdout, stderr, wall: float, run_as: tuple[int, int] | None,
         env: dict[str, str], confine: bool = False, jail: "Jail | None" = None) -> tuple[int | None, float]:
    """(returncode or None if killed at the wall limit, seconds). The process gets its own group;
    ``confine``: under the seccomp filter, where there is one; ``jail``: in a folder of its own as
    its whole filesystem (it then sets the user and limits itself)."""
    kwargs: dict = {}
    if jail is not None:
        kwargs["preexec_fn"] = jail.enter
    elif run_as is not None:
        kwargs = {"user": run_as[0], "group": run_as[1], "extra_groups": []}
    if confine and confinement().available and jail is None:
        kwargs["preexec_fn"] = confinement().install
    started = time.monotonic()
    proc = subprocess.Popen(list(argv), cwd=cwd, stdin=stdin, stdout=stdout, stderr=stderr, env=env,
                            start_new_session=True, close_fds=True, **kwargs)
    try:
        rc = proc.wait(timeout=wall)
    except subprocess.TimeoutExpired:
        _kill(proc)  # the whole group
        proc.wait()
        return None, time.monotonic() - started
    seconds = time.monotonic() - started
    try:  # whatever the program started and left running in its group (the group outlives its leader)
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return rc, seconds


class Jail:
    """A program run (as root's judge, with a user to run it as) inside ``root`` as its whole
    filesystem: ``chroot`` to its own build folder, where only the program itself is, then the
    limits, the user and the seccomp filter. It can open nothing of the machine's, so no other
    process can see it open anything (a participant's inotify watch on world-readable files
    learns nothing), and /proc is not there to read. Static programs only (RUSTC_ARGS)."""

    def __init__(self, root: str, run_as: tuple[int, int], limits: dict[int, int]) -> None:
        self.root, self.run_as, self.limits = root, run_as, limits
        self.confine = confinement()  # built here, in the parent: the child only installs it

    @staticmethod
    def possible(run_as: tuple[int, int] | None) -> bool:
        return run_as is not None and hasattr(os, "chroot") and os.geteuid() == 0

    def enter(self) -> None:  # in the child, before exec
        import resource

        os.chroot(self.root)
        os.chdir("/")
        for which, value in self.limits.items():
            resource.setrlimit(which, (value, value + 1 if which == resource.RLIMIT_CPU else value))
        os.setgroups([])
        os.setgid(self.run_as[1])
        os.setuid(self.run_as[0])
        if self.confine.available:
            self.confine.install()


def _jail_limits(cpu_seconds: int, memory: int, fsize: int) -> dict[int, int]:
    import resource

    return {resource.RLIMIT_CORE: 0, resource.RLIMIT_NPROC: NPROC_LIMIT, resource.RLIMIT_CPU: cpu_seconds,
            resource.RLIMIT_AS: memory, resource.RLIMIT_FSIZE: fsize}


def _env(workdir: str, run_as: tuple[int, int] | None) -> dict[str, str]:
    env = {"PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"), "LANG": "C.UTF-8"}
    if run_as is None:  # keep a rustup installation working (it finds its toolchains through these)
        for key in ("HOME", "RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN"):
            if key in os.environ:
                env[key] = os.environ[key]
    else:
        env["HOME"] = workdir
    return env


class Workdir:
    """A fresh folder for one program; removed on exit. ``build`` is the compiler's and the
    program's working folder (owned by ``run_as`` when given), ``io`` the harness's own (0700)."""

    def __init__(self, run_as: tuple[int, int] | None = None, parent: str | None = None) -> None:
        self.run_as = run_as
        self.path = tempfile.mkdtemp(prefix="rust-", dir=parent)
        os.chmod(self.path, 0o711)  # others may pass through to build/, not list or enter io/
        self.io = os.path.join(self.path, "io")
        self.build = os.path.join(self.path, "build")
        os.mkdir(self.io, 0o700)
        os.mkdir(self.build, 0o700)
        if run_as is not None:
            os.chown(self.build, run_as[0], run_as[1])

    def __enter__(self) -> "Workdir":
        return self

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def _parts(workdir: "Workdir | str") -> tuple[str, str]:
    """(io folder, build folder); a plain path (your own experiments) serves as both."""
    if isinstance(workdir, Workdir):
        return workdir.io, workdir.build
    return str(workdir), str(workdir)


def _write_new(path: str, data: bytes, owner: tuple[int, int] | None = None, mode: int = 0o600) -> None:
    """Create ``path`` (never through a link, never over an existing file) holding ``data``."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
        if owner is not None:
            os.fchown(fh.fileno(), owner[0], owner[1])


def compile_rust(source: str, workdir: "Workdir | str", *, run_as: tuple[int, int] | None = None,
                 cpu_seconds: int = COMPILE_CPU_SECONDS, wall_seconds: float = COMPILE_WALL_SECONDS,
                 rustc: str = "rustc") -> tuple[str, str, float]:
    """Compile ``source`` into ``build/main`` of a fresh :class:`Workdir`: (status, compiler
    messages, seconds) with status "ok", "compile_error" or "compile_timeout"."""
    io_dir, build = _parts(workdir)
    src = os.path.join(build, "main.rs")
    log = os.path.join(io_dir, "rustc.log")
    if not isinstance(workdir, Workdir):  # a folder of your own, perhaps used before
        for path in (src, log, os.path.join(build, "main")):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    _write_new(src, source.encode("utf-8"), run_as, 0o600)  # the folder is new: nothing of the program's ran there
    with open(log, "xb") as err:
        argv = _limits(cpu_seconds, None, OUTPUT_LIMIT, nproc=run_as is not None) + [rustc, *RUSTC_ARGS, "main.rs", "-o", "main"]
        try:
            rc, seconds = _run(argv, cwd=build, stdin=subprocess.DEVNULL, stdout=err, stderr=err, wall=wall_seconds,
                               run_as=run_as, env=_env(build, run_as))
        except FileNotFoundError:
            return "compile_error", f"{rustc} was not found on PATH", 0.0
    with open(log, "rb") as fh:
        messages = fh.read(64 * 1024).decode("utf-8", "replace")
    if rc is None or (rc < 0 and -rc in (signal.SIGXCPU, signal.SIGKILL)):
        return "compile_timeout", f"rustc did not finish within {cpu_seconds} s of CPU time", seconds
    try:
        built = stat.S_ISREG(os.lstat(os.path.join(build, "main")).st_mode)
    except OSError:
        built = False
    if rc != 0 or not built:
        return "compile_error", messages, seconds
    return "ok", messages, seconds


def run_test(workdir: "Workdir | str", input_text: str, time_limit: float, *, memory_bytes: int | None = None,
             run_as: tuple[int, int] | None = None) -> tuple[str, str, float]:
    """Run ``build/main`` on one input: (status, stdout, seconds) with status "ok", "timeout" or
    "runtime_error" (the stdout is what it printed). The input and output files live in ``io/``;
    the program gets them as descriptors only."""
    io_dir, build = _parts(workdir)
    cpu = max(1, math.ceil(time_limit))
    wall = 2 * time_limit + 1.0
    memory = max(MEMORY_FLOOR, 2 * int(memory_bytes or 0))
    inp, out = os.path.join(io_dir, "input.txt"), os.path.join(io_dir, "output.txt")
    for path in (inp, out):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    _write_new(inp, input_text.encode("utf-8"))
    jail = Jail(build, run_as, _jail_limits(cpu, memory, OUTPUT_LIMIT)) if Jail.possible(run_as) else None
    with open(inp, "rb") as stdin, open(out, "xb") as stdout:
        if jail is not None:
            argv, cwd, env = ["/main"], None, {"PATH": "/", "LANG": "C.UTF-8", "HOME": "/"}
        else:
            argv, cwd, env = _limits(cpu, memory, OUTPUT_LIMIT, nproc=run_as is not None) + ["./main"], build, _env(build, run_as)
        rc, seconds = _run(argv, cwd=cwd, stdin=stdin, stdout=stdout, stderr=subprocess.DEVNULL, wall=wall,
                           run_as=run_as, env=env, confine=True, jail=jail)
    with open(out, "rb") as fh:
        printed = fh.read(OUTPUT_LIMIT + 1).decode("utf-8", "replace")
    if rc is None or (rc < 0 and -rc in (signal.SIGXCPU, signal.SIGKILL)):
        return "timeout", printed, seconds
    if rc != 0:
        return "runtime_error", printed, seconds
    return "ok", printed, seconds


def evaluate(source: str | None, tests: Sequence[dict], time_limit: float, *, memory_bytes: int | None = None,
             run_as: tuple[int, int] | None = None, tmp_parent: str | None = None,
             compile_cpu_seconds: int = COMPILE_CPU_SECONDS) -> Verdict:
    """Compile ``source`` and run it on ``tests`` (dicts with "input" and "output") in order."""
    total = len(tests)
    if not isinstance(source, str) or not source.strip():
        return Verdict("no_code", "no program", tests_total=total)
    try:
        size = len(source.encode("utf-8"))
    except UnicodeEncodeError:
        return Verdict("no_code", "the program is not valid UTF-8 text", tests_total=total)
    if size > MAX_SOURCE_BYTES:
        return Verdict("no_code", f"the program has more than {MAX_SOURCE_BYTES} bytes", tests_total=total)
    with Workdir(run_as, tmp_parent) as wd:
        status, messages, compile_s = compile_rust(source, wd, run_as=run_as, cpu_seconds=compile_cpu_seconds)
        if status != "ok":
            return Verdict(status, messages[-3000:], tests_total=total, compile_seconds=round(compile_s, 3))
        run_s = 0.0
        for i, test in enumerate(tests):
            status, printed, seconds = run_test(wd, test["input"], time_limit, memory_bytes=memory_bytes, run_as=run_as)
            run_s += seconds
            if status != "ok":
                return Verdict(status, f"test {i}: {status} after {seconds:.2f} s", i, total, round(compile_s, 3),
                               round(run_s, 3), i)
            if not outputs_match(printed, test["output"]):
                return Verdict("wrong_answer", f"test {i}: expected {_clip(test['output'])!r}, got {_clip(printed)!r}", i,
                               total, round(compile_s, 3), round(run_s, 3), i)
        return Verdict("passed", "", total, total, round(compile_s, 3), round(run_s, 3))


def _clip(text: str, n: int = 200) -> str:
    text = " ".join(text.split()[:64])
    return text if len(text) <= n else text[:n] + "..."
