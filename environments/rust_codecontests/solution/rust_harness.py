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
"""

from __future__ import annotations

import json
import math
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Sequence

COMPILE_CPU_SECONDS = 3
COMPILE_WALL_SECONDS = 12.0  # backstop only: a compile that waits for CPU is not cut off at 3 s of wall time
RUSTC_ARGS = ["-O", "--edition", "2021"]
MEMORY_FLOOR = 512 * 2**20
OUTPUT_LIMIT = 64 * 2**20
MAX_SOURCE_BYTES = 256 * 1024
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


def _limits(cpu_seconds: int | None, memory: int | None, fsize: int | None) -> list[str]:
    prlimit = shutil.which("prlimit")
    if prlimit is None:
        return []
    args = [prlimit, "--core=0"]
    if cpu_seconds is not None:
        args.append(f"--cpu={cpu_seconds}:{cpu_seconds + 1}")
    if memory is not None:
        args.append(f"--as={memory}")
    if fsize is not None:
        args.append(f"--fsize={fsize}")
    return args + ["--"]


def _kill(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.kill()
    except ProcessLookupError:
        pass


def _run(argv: Sequence[str], *, cwd: str, stdin, stdout, stderr, wall: float, run_as: tuple[int, int] | None,
         env: dict[str, str]) -> tuple[int | None, float]:
    """(returncode or None if killed at the wall limit, seconds). The process gets its own group."""
    kwargs: dict = {}
    if run_as is not None:
        kwargs = {"user": run_as[0], "group": run_as[1], "extra_groups": []}
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
    """A fresh folder for one program (owned by ``run_as`` when given); removed on exit."""

    def __init__(self, run_as: tuple[int, int] | None = None, parent: str | None = None) -> None:
        self.run_as = run_as
        self.path = tempfile.mkdtemp(prefix="rust-", dir=parent)
        if run_as is not None:
            os.chown(self.path, run_as[0], run_as[1])
        os.chmod(self.path, 0o700)

    def __enter__(self) -> str:
        return self.path

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def compile_rust(source: str, workdir: str, *, run_as: tuple[int, int] | None = None,
                 cpu_seconds: int = COMPILE_CPU_SECONDS, wall_seconds: float = COMPILE_WALL_SECONDS,
                 rustc: str = "rustc") -> tuple[str, str, float]:
    """Compile ``source`` into ``workdir/main``: (status, compiler messages, seconds) with status
    "ok", "compile_error" or "compile_timeout"."""
    src = os.path.join(workdir, "main.rs")
    with open(src, "w", encoding="utf-8") as fh:
        fh.write(source)
    if run_as is not None:
        os.chown(src, run_as[0], run_as[1])
    log = os.path.join(workdir, "rustc.log")
    with open(log, "wb") as err:
        if run_as is not None:
            os.fchown(err.fileno(), run_as[0], run_as[1])
        argv = _limits(cpu_seconds, None, OUTPUT_LIMIT) + [rustc, *RUSTC_ARGS, "main.rs", "-o", "main"]
        try:
            rc, seconds = _run(argv, cwd=workdir, stdin=subprocess.DEVNULL, stdout=err, stderr=err, wall=wall_seconds,
                               run_as=run_as, env=_env(workdir, run_as))
        except FileNotFoundError:
            return "compile_error", f"{rustc} was not found on PATH", 0.0
    with open(log, "rb") as fh:
        messages = fh.read(64 * 1024).decode("utf-8", "replace")
    if rc is None or (rc < 0 and -rc in (signal.SIGXCPU, signal.SIGKILL)):
        return "compile_timeout", f"rustc did not finish within {cpu_seconds} s of CPU time", seconds
    if rc != 0 or not os.path.isfile(os.path.join(workdir, "main")):
        return "compile_error", messages, seconds
    return "ok", messages, seconds


def run_test(workdir: str, input_text: str, time_limit: float, *, memory_bytes: int | None = None,
             run_as: tuple[int, int] | None = None) -> tuple[str, str, float]:
    """Run ``workdir/main`` on one input: (status, stdout, seconds) with status "ok", "timeout" or
    "runtime_error" (the stdout is what it printed)."""
    cpu = max(1, math.ceil(time_limit))
    wall = 2 * time_limit + 1.0
    memory = max(MEMORY_FLOOR, 2 * int(memory_bytes or 0))
    inp, out = os.path.join(workdir, "input.txt"), os.path.join(workdir, "output.txt")
    with open(inp, "w", encoding="utf-8") as fh:
        fh.write(input_text)
    with open(inp, "rb") as stdin, open(out, "wb") as stdout:
        argv = _limits(cpu, memory, OUTPUT_LIMIT) + ["./main"]
        rc, seconds = _run(argv, cwd=workdir, stdin=stdin, stdout=stdout, stderr=subprocess.DEVNULL, wall=wall,
                           run_as=run_as, env=_env(workdir, run_as))
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
    if source is None or not source.strip():
        return Verdict("no_code", "no program", tests_total=total)
    if len(source.encode("utf-8")) > MAX_SOURCE_BYTES:
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
