#!/usr/bin/env python3
"""Runs one command in its own process group with a timeout that really stops it.

Standard library only: it is copied into every sandbox (``/opt/rebench/supervise.py``) and run
by the sandbox's own ``python3``, as root where it can, dropping to the participant's user.

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

try:  # the C module behind ``signal``: the same functions and numbers, without enum (5 ms a start here)
    import _signal as signal
except ImportError:  # pragma: no cover - another Python
    import signal  # type: ignore[no-redef]

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


def _pidfile(state_dir: str, token: str) -> str:
    return os.path.join(state_dir, f"{token}.pid")


def _cancelfile(state_dir: str, token: str) -> str:
    return os.path.join(state_dir, f"{token}.cancel")


def _supfile(state_dir: str, token: str) -> str:
    return os.path.join(state_dir, f"{token}.sup")


def _statusfile(state_dir: str, token: str) -> str:
    return os.path.join(state_dir, f"{token}.status")


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


def _forget_old_statuses(state_dir: str) -> None:
    """A kept status is needed until the session has read it: before the next scoring starts."""
    for name in os.listdir(state_dir):
        if name.endswith((".status", ".status.tmp")):
            try:
                os.unlink(os.path.join(state_dir, name))
            except FileNotFoundError:
                pass


def _account(spec: str) -> tuple[str, int, int, str]:
    """(name, uid, gid, home) of ``USER[:GROUP]`` (names or numbers)."""
    import grp
    import pwd

    name, _, group = spec.partition(":")
    pw = pwd.getpwnam(name) if not name.isdigit() else pwd.getpwuid(int(name))
    gid = pw.pw_gid
    if group:
        gid = grp.getgrnam(group).gr_gid if not group.isdigit() else int(group)
    return pw.pw_name, pw.pw_uid, gid, pw.pw_dir


def find_links(root: str, forbid_paths: list[str]) -> list[list[str]]:
    """Every symlink below ``root`` that resolves into a ``forbid_paths`` path, as ``[link, target]``
    (a root scorer must not follow a participant's link into held-out data)."""
    forbid = [os.path.realpath(p) for p in forbid_paths]
    found = []
    for dirpath, dirnames, filenames in os.walk(root):  # never follows links into folders
        for name in dirnames + filenames:
            path = os.path.join(dirpath, name)
            if not os.path.islink(path):
                continue
            target = os.path.realpath(path)
            if any(target == f or target.startswith(f.rstrip("/") + "/") for f in forbid):
                found.append([path, target])
    return found


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


def _frozenfile(state_dir: str, token: str) -> str:
    return os.path.join(state_dir, f"{token}.frozen")


def _state_and_parent(pid: int) -> tuple[str, int]:
    """``pid``'s state letter (``T``: stopped) and its parent's pid; ``("", 0)`` when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b") ", 1)[1].split()
        return fields[0].decode(), int(fields[1])
    except (OSError, IndexError, ValueError):
        return "", 0


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


# The machine's shared temporary folders: swept after a scoring, and where a private one is made.
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")


def sweep(uid: int, since_ns: int, roots: tuple[str, ...] = SHARED_TMP) -> int:
    """Remove what ``uid`` made or changed under ``roots`` (shared temporary folders) since
    ``since_ns`` (ctime, the kernel's own clock): with the user's other processes stopped, only
    the scored run can have, and nothing it leaves there may reach the next scoring. Never follows
    a link or leaves a filesystem; folders go only when emptied. Returns how many entries went."""
    removed = 0
    for root in roots:
        try:
            dev = os.lstat(root).st_dev
        except OSError:
            continue
        for dirpath, dirnames, filenames in os.walk(root, topdown=False):
            for name in filenames + dirnames:
                path = os.path.join(dirpath, name)
                try:
                    st = os.lstat(path)
                    if st.st_uid != uid or st.st_ctime_ns < since_ns or st.st_dev != dev:
                        continue
                    if name in dirnames and not os.path.islink(path):
                        os.rmdir(path)  # fails (kept) while it still holds older entries
                    else:
                        os.unlink(path)
                    removed += 1
                except OSError:
                    continue
    return removed


BYTECODE_SUFFIXES = (".pyc", ".pyo")


def purge_bytecode(uid: int, roots: tuple[str, ...]) -> int:
    """Remove every Python bytecode file of ``uid`` under ``roots`` (the home and the shared
    temporary folders): such files are not in the record, and Python prefers one stamped like its
    source to the source itself. Never follows a link or leaves a root's filesystem. Returns how
    many went."""
    removed = 0
    for root in roots:
        try:
            dev = os.lstat(root).st_dev
        except OSError:
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames[:] = [d for d in dirnames if _same_dev(os.path.join(dirpath, d), dev)]
            for name in filenames:
                if not name.endswith(BYTECODE_SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                try:
                    if os.lstat(path).st_uid == uid:
                        os.unlink(path)
                        removed += 1
                except OSError:
                    continue
    return removed


def _same_dev(path: str, dev: int) -> bool:
    try:
        return os.lstat(path).st_dev == dev
    except OSError:
        return False


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


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass




def _tmp_base() -> str:
    """Where the private temp folder goes: $TMPDIR, else the first of /tmp, /var/tmp, /dev/shm
    that exists. An image without any (a root filesystem imported without /tmp) gets a /tmp made
    as it should be (1777), since the supervisor runs as root."""
    for base in (os.environ.get("TMPDIR"), *SHARED_TMP):
        if base and os.path.isdir(base):
            return base
    os.makedirs("/tmp", exist_ok=True)
    os.chmod("/tmp", 0o1777)
    return "/tmp"


def _private_tmp() -> str:
    base = _tmp_base()
    while True:
        path = os.path.join(base, "rebench-root-" + os.urandom(8).hex())
        try:
            os.mkdir(path, 0o700)  # fails if it exists: nobody can have prepared it
            return path
        except FileExistsError:
            continue


def _spawn(argv: list[str], cwd: str | None, env: dict[str, str], account: tuple[str, int, int, str] | None) -> int:
    """Start ``argv`` in a new session (its own process group) as ``account``; returns its pid.
    Raises OSError with the child's own errno if it could not be started."""
    r, w = os.pipe2(os.O_CLOEXEC)
    pid = os.fork()
    if pid == 0:  # the child: only async-signal-safe work until exec
        stage = b"start"
        try:
            os.close(r)
            os.setsid()
            for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGALRM):
                signal.signal(sig, signal.SIG_DFL)
            if account is not None:
                stage = b"become"
                name, uid, gid, _home = account
                os.initgroups(name, gid)
                os.setgid(gid)
                os.setuid(uid)
            if cwd:
                stage = b"enter"
                os.chdir(cwd)
            stage = b"start"
            os.execvpe(argv[0], argv, env)
        except OSError as exc:
            os.write(w, stage + b":" + str(exc.errno or 1).encode())
        except BaseException:  # noqa: BLE001
            os.write(w, stage + b":1")
        os._exit(127)
    os.close(w)
    with os.fdopen(r, "rb") as fh:
        failed = fh.read()  # empty: the exec succeeded (the pipe closed on exec)
    if failed:
        os.waitpid(pid, 0)
        stage, _, errno_text = failed.decode().partition(":")
        code = int(errno_text or 1)
        what = {"become": "switch to the user of", "enter": f"enter the folder {cwd!r} for"}.get(stage, "start")
        raise OSError(code, f"{os.strerror(code)} (could not {what} the command)")
    return pid


def _status_marker(env: dict[str, str]) -> str:
    """The status line's prefix; takes the nonce out of ``env`` so the command never sees it."""
    nonce = env.pop("REBENCH_EXEC_NONCE", "")
    return "\x1erebench-exec" + (":" + nonce if nonce else "") + " "


def _switch_user(user: str | None, env: dict[str, str]) -> tuple[tuple[str, int, int, str] | None, str | None]:
    """The account to run as (only when run as root) with ``env`` set for it, and the private
    temp folder made for a root command (None otherwise)."""
    if not user or os.geteuid() != 0:
        return None, None
    account = _account(user)
    name, uid, _gid, home = account
    env.update({"HOME": home, "USER": name, "LOGNAME": name})
    if uid != 0:
        return account, None
    # A root command (the scorer) writes nothing the participant can read: files it makes
    # are private, and its temp files go to a folder of its own, removed afterwards.
    os.umask(0o077)
    private_tmp = _private_tmp()
    env.update({"TMPDIR": private_tmp, "TMP": private_tmp, "TEMP": private_tmp})
    # A root scorer importing the participant's code must not leave root-owned __pycache__
    # folders in their home (they could neither write into nor remove them).
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return account, private_tmp


class _Watch:
    """The command's pid and what stopped it, as the signal handlers see them."""

    def __init__(self) -> None:
        self.pid = 0
        self.cancelled = False
        self.timed_out = False

    def on_signal(self, signum, _frame) -> None:  # the exec's client went away or asked us to stop
        self.cancelled = True
        if self.pid:
            _kill_group(self.pid)

    def on_alarm(self, signum, _frame) -> None:
        self.timed_out = True
        if self.pid:
            _kill_group(self.pid)


def _refuse(args: "Args", status: dict, marker: str, refused: list[list[str]]) -> int:
    """Links into forbidden paths were found before the command: it does not run."""
    status.update({"returncode": 126, "refused_links": refused, "duration_s": 0.0})
    if args.keep_status:
        _write_durably(_statusfile(args.state_dir, args.token), _json(status))
        os.unlink(_supfile(args.state_dir, args.token))
    sys.stderr.write(marker + _json(status) + "\n")
    return 0


def _exit_code(wstatus: int) -> int:
    """The command's exit code; killed by a signal: 128 + the signal."""
    code = os.waitstatus_to_exitcode(wstatus)
    return 128 - code if code < 0 else code


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


def _read_int(path: str) -> int | None:
    try:
        with open(path) as fh:
            return int(fh.read().strip())
    except (OSError, ValueError):
        return None


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


class Args:
    """The parsed command line (the grammar in the module docstring)."""

    def __init__(self) -> None:
        self.verb = ""
        self.token = self.state_dir = ""
        self.user = self.cwd = self.guard_links = self.freeze_owner_of = None
        self.swept_uid: int | None = None  # set by --freeze-owner-of: whose temporary files to sweep, since when
        self.swept_since = 0
        self.keep_status = False
        self.timeout: float | None = None
        self.forbid: list[str] = []
        self.argv: list[str] = []


USAGE = ("usage: supervise.py run --token T --state-dir D [options] -- ARGV... | cancel --token T --state-dir D"
         " | status --token T --state-dir D")
OPTIONS = {"--token": "token", "--state-dir": "state_dir", "--user": "user", "--cwd": "cwd", "--timeout": "timeout",
           "--guard-links": "guard_links", "--forbid": "forbid", "--freeze-owner-of": "freeze_owner_of"}


def parse(argv: list[str]) -> Args:
    a = Args()
    if not argv or argv[0] not in ("run", "cancel", "status"):
        raise SystemExit(USAGE)
    a.verb, rest = argv[0], argv[1:]
    i = 0
    while i < len(rest):
        opt = rest[i]
        if opt == "--":
            a.argv = rest[i + 1:]
            break
        if opt == "--keep-status":
            a.keep_status = True
            i += 1
            continue
        key, eq, val = opt.partition("=")
        if key not in OPTIONS:
            if a.verb == "run" and not opt.startswith("-"):  # ARGV without a "--" before it
                a.argv = rest[i:]
                break
            raise SystemExit(f"supervise.py: unknown option {opt!r}\n{USAGE}")
        if not eq:
            i += 1
            if i >= len(rest):
                raise SystemExit(f"supervise.py: {key} needs a value\n{USAGE}")
            val = rest[i]
        name = OPTIONS[key]
        if name == "forbid":
            a.forbid.append(val)
        elif name == "timeout":
            a.timeout = float(val)
        else:
            setattr(a, name, val)
        i += 1
    if not a.token or not a.state_dir or (a.verb == "run" and not a.argv):
        raise SystemExit(USAGE)
    return a


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    return {"run": run, "cancel": cancel, "status": status}[args.verb](args)


if __name__ == "__main__":
    sys.exit(main())
