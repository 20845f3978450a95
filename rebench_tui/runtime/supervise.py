#!/usr/bin/env python3
"""Runs one command in its own process group with a timeout that really stops it.

Standard library only: it is copied into every sandbox (``/opt/rebench/supervise.py``, its parts
``supervise_*.py`` beside it: arguments, files, processes, start, state) and run by the sandbox's
own ``python3``, as root where it can, dropping to the participant's user.

    supervise.py run --token T --state-dir D [--user U[:GROUP]] [--cwd DIR] [--timeout S]
                     [--guard-links HOME --forbid PATH ...] [--freeze-owner-of HOME] [--keep-status] -- ARGV...
    supervise.py cancel --token T --state-dir D
    supervise.py status --token T --state-dir D

``run`` passes the command's output straight through, kills the whole process group when the
timeout passes, when cancelled, or when the command exits, and then every process the command
left behind anywhere below it (the supervisor is their subreaper: a daemon that forked twice and
left its group is still found), and writes one status line to stderr last:
``\\x1erebench-exec[:NONCE] {"returncode": .., "timed_out": .., "cancelled": .., "duration_s": ..}``.
NONCE comes from the ``REBENCH_EXEC_NONCE`` variable (removed before the command starts), so a
line the command prints cannot pass for the status.

The result channel: the command gets ``REBENCH_RESULT_FD``, a file descriptor of an unlinked file
in the (root-only) state folder. A scorer writes its result there (``rebench_scorer.result``); the
status line carries what it wrote as ``result``. Processes the scorer starts for the participant
never inherit it, so a result can come only from the scorer's own process. (with ``--guard-links``, also ``refused_links`` found before the command,
which then does not run, and ``late_links`` found after it). A command killed by a signal has returncode 128 + signal (137 for SIGKILL,
which is what the kernel's OOM killer sends); a timeout or a cancel is reported by its own flag.

``--freeze-owner-of HOME`` (a scoring in a container): every process of the home's owner (the
participant) is stopped before the link check and the command, and resumed after them; processes
the command itself starts as that user run. So no process the participant started earlier (from
a shell, before the scoring) can watch, feed or end what is scored, or change the home under it.
The stopped pids are kept in the state folder (``T.frozen``) until resumed: a supervisor that is
killed leaves them to the next ``run`` or ``status``, which resume them. Once they are stopped,
every Python bytecode file of that user in the home and the shared temporary folders is removed
(:func:`purge_bytecode`: not in the record, and preferred to the recorded source). Before resuming them, what
that user made or changed in /tmp, /var/tmp and /dev/shm during the command (only the command can
have) is removed (:func:`sweep`), so nothing a scored run leaves there reaches the next scoring.

What outlives the exec's client (``--keep-status``, for scorings): an app killed while its scorer
runs leaves the supervisor running in the container (a closed exec stream does not stop it). So the
supervisor keeps, in the state folder, ``T.sup`` (its own pid) while it runs and, before it writes
the status line, the same status as ``T.status`` (fsynced; the last run's only: a new one removes
older ones). ``status`` answers with one JSON line: ``{"state": "finished", "status": {...}}``,
``{"state": "running", "supervisor": PID or null, "group": [PIDS]}``, ``{"state": "gone"}`` (it
started and ended without a status: the container restarted, or it was killed) or
``{"state": "unknown"}`` (no trace of the token). ``cancel`` ends a running one; it then writes
its status (``cancelled``) as ever.
"""

from __future__ import annotations

import os
import sys
import time

if not __package__:  # run as a script (``python3 -I -S supervise.py``): its parts lie beside it, as a package
    __package__ = "rebench_supervisor"
    _here = type(sys)(__package__)
    _here.__path__ = [os.path.dirname(os.path.abspath(__file__))]
    sys.modules[__package__] = _here
    sys.dont_write_bytecode = True  # nothing written beside it (a container's copy is refreshed on each attach)

try:  # the C module behind ``signal``: the same functions and numbers, without enum (5 ms a start here)
    import _signal as signal
except ImportError:  # pragma: no cover - another Python
    import signal  # type: ignore[no-redef]

# Its parts, shipped with it (docker_setup.py copies every one into the container beside it)
from .supervise_args import Args, parse
from .supervise_files import SHARED_TMP, find_links, purge_bytecode, sweep
from .supervise_procs import _become_subreaper, _end_descendants, _group, _kill_group, _runs_token, _signal_each, _state_and_parent, _uids
from .supervise_start import _exit_code, _spawn, _switch_user, _Watch
from .supervise_state import (_cancelfile, _forget_old_statuses, _frozenfile, _pidfile, _read_int, _read_result, _result_fd,
                              _statusfile, _supfile)

# Lean on purpose: it starts once per scoring (run as ``python3 -I -S``), so it imports only what
# every run needs (argparse, subprocess, shutil, tempfile, json and signal's enums cost ~20 ms of
# a 28 ms start here); the process is started with fork/exec directly, root-only helpers are imported when
# used, and the one status line is written by ``_json`` below (read back with ``json.loads``).


def _json(value: object) -> str:
    """JSON for the status line's values (None, bools, numbers, strings, lists, dicts), ASCII
    only, control characters escaped (a file name cannot end the line early): ``json.loads``
    reads back the value ``json.dumps`` would have written, without importing json (and ``re``)
    on every start. NaN and infinities, never in a status, are written as null."""
    if value is None or isinstance(value, bool):
        return {None: "null", True: "true", False: "false"}[value]
    if isinstance(value, (int, float)):
        return repr(value) if value == value and value not in (float("inf"), float("-inf")) else "null"
    if isinstance(value, str):
        out = []
        for ch in value:
            code = ord(ch)
            if ch in '"\\':
                out.append("\\" + ch)
            elif 0x20 <= code < 0x7F:
                out.append(ch)
            elif code > 0xFFFF:  # a surrogate pair, as JSON spells characters outside the BMP
                code -= 0x10000
                out.append(f"\\u{0xD800 | (code >> 10):04x}\\u{0xDC00 | (code & 0x3FF):04x}")
            else:
                out.append(f"\\u{code:04x}")
        return '"' + "".join(out) + '"'
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_json(str(k))}: {_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_json(v) for v in value) + "]"
    return _json(str(value))


def _write_durably(path: str, text: str) -> None:
    """``text`` at ``path`` by an fsynced temporary file renamed into place, the folder fsynced."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        data = text.encode("ascii")
        while data:
            data = data[os.write(fd, data):]
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    dfd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)


def freeze_user(uid: int, record: str) -> list[int]:
    """Stop (SIGSTOP) every process of ``uid``, again until none is left running (one may fork
    while we look); their pids go to ``record`` first, so a later run can resume them even if this
    one is killed. A scoring then runs with no process of the participant's that could watch,
    feed or end it: only those the scorer itself starts (after this) run as that user. A process
    that was already stopped (a job the participant suspended with Ctrl-Z) is left out of the
    record, so the resume does not wake it."""
    frozen: list[int] = []
    for _round in range(50):
        found = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) not in frozen and uid in _uids(int(n))
                 and _state_and_parent(int(n))[0] != "T"]
        if not found:
            break
        frozen.extend(found)
        _write_durably(record, " ".join(map(str, frozen)))
        _signal_each(found, signal.SIGSTOP)
    return frozen


def thaw(state_dir: str) -> int:
    """Resume (SIGCONT) the processes every ``*.frozen`` record in ``state_dir`` names, and remove
    the records; returns how many were resumed.

    Then the stopped parents of those processes: the terminal of a participant's shell is
    ``script`` run by root (the app's shell key), and ``script`` stops itself when its child stops,
    until someone resumes it. Left stopped, the participant's shell would hang for good after the
    first scoring it was open through."""
    resumed = 0
    for name in os.listdir(state_dir):
        if not name.endswith(".frozen"):
            continue
        path = os.path.join(state_dir, name)
        try:
            with open(path) as fh:
                pids = [int(x) for x in fh.read().split()]
        except (OSError, ValueError):
            pids = []
        parents = {_state_and_parent(pid)[1] for pid in pids} - set(pids) - {0, 1, os.getpid()}
        resumed += _signal_each(pids, signal.SIGCONT)
        for wait in (0.0, 0.05):  # once more a moment later, for one that stops itself late
            time.sleep(wait)
            _signal_each([p for p in parents if _state_and_parent(p)[0] == "T"], signal.SIGCONT)
        os.unlink(path)
    return resumed


def _status_marker(env: dict[str, str]) -> str:
    """The status line's prefix; takes the nonce out of ``env`` so the command never sees it."""
    nonce = env.pop("REBENCH_EXEC_NONCE", "")
    return "\x1erebench-exec" + (":" + nonce if nonce else "") + " "


def _refuse(args: "Args", status: dict, marker: str, refused: list[list[str]]) -> int:
    """Links into forbidden paths were found before the command: it does not run."""
    status.update({"returncode": 126, "refused_links": refused, "duration_s": 0.0})
    if args.keep_status:
        _write_durably(_statusfile(args.state_dir, args.token), _json(status))
        os.unlink(_supfile(args.state_dir, args.token))
    sys.stderr.write(marker + _json(status) + "\n")
    return 0


def _run_command(args: "Args", env: dict[str, str], account: tuple[str, int, int, str] | None, watch: _Watch,
                 subreaper: bool, status: dict) -> None:
    """Start the command, wait for it (up to the timeout), end what it left behind; into ``status``."""
    try:
        pid = _spawn(args.argv, args.cwd or None, env, account)
    except OSError as exc:
        sys.stderr.write(f"rebench: cannot start {args.argv[0]!r}: {exc}\n")
        status["returncode"] = 127
        return
    watch.pid = pid
    with open(_pidfile(args.state_dir, args.token), "w") as fh:
        fh.write(str(pid))
    if args.timeout:
        signal.signal(signal.SIGALRM, watch.on_alarm)
        signal.setitimer(signal.ITIMER_REAL, args.timeout)
    _pid, wstatus = os.waitpid(pid, 0)  # retried after a signal handler runs (PEP 475)
    signal.setitimer(signal.ITIMER_REAL, 0)
    _kill_group(pid)  # stragglers left in the group
    if subreaper:
        status["stragglers_killed"] = _end_descendants()
    status["returncode"] = _exit_code(wstatus)
    status["timed_out"] = watch.timed_out
    if os.path.exists(_cancelfile(args.state_dir, args.token)) or watch.cancelled:
        status["cancelled"] = True


def _remove_run_files(args: "Args") -> None:
    for path in (_pidfile(args.state_dir, args.token), _cancelfile(args.state_dir, args.token),
                 _supfile(args.state_dir, args.token)):
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass


def _finish(args: "Args", status: dict, started: float, result_fd: int, private_tmp: str | None, marker: str) -> int:
    """Complete the status (duration, result, late links), keep it where asked, and write its line."""
    status["duration_s"] = round(time.monotonic() - started, 6)  # the command's time: ends before the cleanup
    if args.swept_uid is not None:  # before the participant's processes run again
        status["swept_temporary_files"] = sweep(args.swept_uid, args.swept_since)
    if args.freeze_owner_of:
        thaw(args.state_dir)
    if private_tmp is not None:
        import shutil

        shutil.rmtree(private_tmp, ignore_errors=True)
    result = _read_result(result_fd)
    if result is not None:
        status["result"] = result
    if args.guard_links:
        status["late_links"] = find_links(args.guard_links, args.forbid)
    if args.keep_status:  # first: the exec's client may be gone, and the line below lost with it
        _write_durably(_statusfile(args.state_dir, args.token), _json(status))
    _remove_run_files(args)
    sys.stdout.flush()
    sys.stderr.write(marker + _json(status) + "\n")
    sys.stderr.flush()
    return 0


def run(args: "Args") -> int:
    os.makedirs(args.state_dir, mode=0o700, exist_ok=True)
    env = dict(os.environ)
    marker = _status_marker(env)
    result_fd = _result_fd(args.state_dir)
    env["REBENCH_RESULT_FD"] = str(result_fd)
    subreaper = _become_subreaper()
    account, private_tmp = _switch_user(args.user, env)
    started = time.monotonic()
    status: dict = {"returncode": 127, "timed_out": False, "cancelled": False}
    watch = _Watch()
    if args.keep_status:
        _forget_old_statuses(args.state_dir)
        _write_durably(_supfile(args.state_dir, args.token), str(os.getpid()))
    for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(sig, watch.on_signal)
    _freeze_owner(args, status)
    # --guard-links: links from the home into --forbid paths are looked for here, in the same exec,
    # before the command (found: it does not run) and after it (found: its output is not to be kept).
    refused = find_links(args.guard_links, args.forbid) if args.guard_links else []
    if refused:
        thaw(args.state_dir)
        return _refuse(args, status, marker, refused)
    _run_command(args, env, account, watch, subreaper, status)
    return _finish(args, status, started, result_fd, private_tmp, marker)


def _freeze_owner(args: "Args", status: dict) -> None:
    """--freeze-owner-of PATH (a scoring in a container): the processes of PATH's owner (the
    participant) stop for the command's run and resume after it (see :func:`freeze_user`). Only as
    root, never for root or this process's own user."""
    thaw(args.state_dir)  # an earlier run killed before it could resume them
    if not args.freeze_owner_of or os.geteuid() != 0:
        return
    try:
        uid = os.stat(args.freeze_owner_of).st_uid
    except OSError:
        return
    if uid in (0, os.geteuid()):
        return
    status["frozen_processes"] = len(freeze_user(uid, _frozenfile(args.state_dir, args.token)))
    status["bytecode_files_removed"] = purge_bytecode(uid, (args.freeze_owner_of, *SHARED_TMP))
    args.swept_uid, args.swept_since = uid, time.time_ns()


def cancel(args: "Args") -> int:
    open(_cancelfile(args.state_dir, args.token), "w").close()
    try:
        with open(_pidfile(args.state_dir, args.token)) as fh:
            pgid = int(fh.read().strip())
    except (FileNotFoundError, ValueError):
        return 1
    _kill_group(pgid)
    return 0


def status_of(state_dir: str, token: str) -> str:
    """The ``status`` verb's answer (see the module docstring), as one JSON line."""
    try:
        with open(_statusfile(state_dir, token)) as fh:
            kept = fh.read().strip()
    except FileNotFoundError:
        kept = ""
    if kept:
        return '{"state": "finished", "status": ' + kept + "}"
    sup = _read_int(_supfile(state_dir, token))
    alive = sup is not None and _runs_token(sup, token)
    pgid = _read_int(_pidfile(state_dir, token))
    group = _group(pgid) if pgid else []
    if alive or group:
        return _json({"state": "running", "supervisor": sup if alive else None, "group": group})
    thaw(state_dir)  # a supervisor killed before it could resume what it stopped
    return _json({"state": "gone" if sup is not None else "unknown"})


def status(args: "Args") -> int:
    sys.stdout.write(status_of(args.state_dir, args.token) + "\n")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    return {"run": run, "cancel": cancel, "status": status}[args.verb](args)


if __name__ == "__main__":
    sys.exit(main())
