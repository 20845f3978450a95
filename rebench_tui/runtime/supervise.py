#!/usr/bin/env python3
"""Runs one command in its own process group with a timeout that really stops it.

Standard library only: it is copied into every sandbox (``/opt/rebench/supervise.py``) and run
by the sandbox's own ``python3``, as root where it can, dropping to the participant's user.

    supervise.py run --token T --state-dir D [--user U[:GROUP]] [--cwd DIR] [--timeout S]
                     [--guard-links HOME --forbid PATH ...] -- ARGV...
    supervise.py cancel --token T --state-dir D

``run`` passes the command's output straight through, kills the whole process group when the
timeout passes, when cancelled, or when the command exits (no stragglers), and writes one status
line to stderr last: ``\\x1erebench-exec {"returncode": .., "timed_out": .., "cancelled": ..,
"duration_s": ..}`` (with ``--guard-links``, also ``refused_links`` found before the command,
which then does not run, and ``late_links`` found after it). A command killed by a signal has returncode 128 + signal (137 for SIGKILL,
which is what the kernel's OOM killer sends); a timeout or a cancel is reported by its own flag.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def _pidfile(state_dir: str, token: str) -> str:
    return os.path.join(state_dir, f"{token}.pid")


def _cancelfile(state_dir: str, token: str) -> str:
    return os.path.join(state_dir, f"{token}.cancel")


def _drop_privileges(spec: str):
    import grp
    import pwd

    name, _, group = spec.partition(":")
    pw = pwd.getpwnam(name) if not name.isdigit() else pwd.getpwuid(int(name))
    gid = pw.pw_gid
    if group:
        gid = grp.getgrnam(group).gr_gid if not group.isdigit() else int(group)
    env_home = pw.pw_dir

    def preexec() -> None:
        os.initgroups(pw.pw_name, gid)
        os.setgid(gid)
        os.setuid(pw.pw_uid)

    return preexec, {"HOME": env_home, "USER": pw.pw_name, "LOGNAME": pw.pw_name}


def pwd_uid(spec: str) -> int:
    import pwd

    name = spec.partition(":")[0]
    return int(name) if name.isdigit() else pwd.getpwnam(name).pw_uid


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


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def run(args: argparse.Namespace) -> int:
    os.makedirs(args.state_dir, mode=0o700, exist_ok=True)
    env = dict(os.environ)
    preexec = None
    private_tmp = None
    if args.user and os.geteuid() == 0:
        preexec, user_env = _drop_privileges(args.user)
        env.update(user_env)
        if user_env["USER"] == "root" or pwd_uid(args.user) == 0:
            # A root command (the scorer) writes nothing the participant can read: files it makes
            # are private, and its temp files go to a folder of its own, removed afterwards.
            os.umask(0o077)
            private_tmp = tempfile.mkdtemp(prefix="rebench-root-")
            env.update({"TMPDIR": private_tmp, "TMP": private_tmp, "TEMP": private_tmp})
            # A root scorer importing the participant's code must not leave root-owned __pycache__
            # folders in their home (they could neither write into nor remove them).
            env["PYTHONDONTWRITEBYTECODE"] = "1"
    started = time.monotonic()
    status = {"returncode": 127, "timed_out": False, "cancelled": False}
    cancelled = {"flag": False}
    proc = None

    def on_signal(signum, _frame):  # the exec's client went away or asked us to stop
        cancelled["flag"] = True
        if proc is not None:
            _kill_group(proc.pid)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGHUP, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    # --guard-links: links from the home into --forbid paths are looked for here, in the same exec,
    # before the command (found: it does not run) and after it (found: its output is not to be kept).
    refused = find_links(args.guard_links, args.forbid) if args.guard_links else []
    if refused:
        status.update({"returncode": 126, "refused_links": refused, "duration_s": 0.0})
        sys.stderr.write("\x1erebench-exec " + json.dumps(status) + "\n")
        return 0
    try:
        proc = subprocess.Popen(args.argv, cwd=args.cwd or None, env=env, start_new_session=True, preexec_fn=preexec)
    except (OSError, subprocess.SubprocessError) as exc:
        sys.stderr.write(f"rebench: cannot start {args.argv[0]!r}: {exc}\n")
        status["returncode"] = 127
    else:
        pidfile = _pidfile(args.state_dir, args.token)
        with open(pidfile, "w") as fh:
            fh.write(str(proc.pid))
        try:
            proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            status["timed_out"] = True
            _kill_group(proc.pid)
            proc.wait()
        _kill_group(proc.pid)  # stragglers left in the group
        rc = proc.returncode
        status["returncode"] = 128 - rc if rc < 0 else rc
        if os.path.exists(_cancelfile(args.state_dir, args.token)) or cancelled["flag"]:
            status["cancelled"] = True
        for path in (pidfile, _cancelfile(args.state_dir, args.token)):
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
    if private_tmp is not None:
        shutil.rmtree(private_tmp, ignore_errors=True)
    status["duration_s"] = round(time.monotonic() - started, 6)
    if args.guard_links:
        status["late_links"] = find_links(args.guard_links, args.forbid)
    sys.stdout.flush()
    sys.stderr.write("\x1erebench-exec " + json.dumps(status) + "\n")
    sys.stderr.flush()
    return 0


def cancel(args: argparse.Namespace) -> int:
    open(_cancelfile(args.state_dir, args.token), "w").close()
    try:
        with open(_pidfile(args.state_dir, args.token)) as fh:
            pgid = int(fh.read().strip())
    except (FileNotFoundError, ValueError):
        return 1
    _kill_group(pgid)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="supervise.py")
    sub = parser.add_subparsers(dest="verb", required=True)
    r = sub.add_parser("run")
    r.add_argument("--token", required=True)
    r.add_argument("--state-dir", required=True)
    r.add_argument("--user")
    r.add_argument("--cwd")
    r.add_argument("--timeout", type=float)
    r.add_argument("--guard-links", help="refuse to run while links below this folder lead into a --forbid path")
    r.add_argument("--forbid", action="append", default=[])
    r.add_argument("argv", nargs="+")
    c = sub.add_parser("cancel")
    c.add_argument("--token", required=True)
    c.add_argument("--state-dir", required=True)
    args = parser.parse_args(argv)
    return {"run": run, "cancel": cancel}[args.verb](args)


if __name__ == "__main__":
    sys.exit(main())
