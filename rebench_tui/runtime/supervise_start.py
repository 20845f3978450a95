"""How the command supervisor starts its command (a part of supervise.py, shipped and run beside
it): the account it runs as (with a private temporary folder for a root command), the fork and
exec into a session of its own, the signal handlers that end its group, and its exit code.
Standard library only.
"""

from __future__ import annotations

import os

try:  # the C module behind ``signal``: the same functions and numbers, without enum (5 ms a start here)
    import _signal as signal
except ImportError:  # pragma: no cover - another Python
    import signal  # type: ignore[no-redef]

from .supervise_files import _private_tmp
from .supervise_procs import _kill_group


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


def _exit_code(wstatus: int) -> int:
    """The command's exit code; killed by a signal: 128 + the signal."""
    code = os.waitstatus_to_exitcode(wstatus)
    return 128 - code if code < 0 else code
