"""Putting a solution in place in the calibration's home: copying a set-up's files from the
environment folder, handing the home to the participant's uid (local runtime run as root), and
running the set-up's command as the participant; and checking that uid can reach the home."""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any, Callable

from ..catalog import Environment
from ..catalog.manifest import SetupSpec
from .outcome import CalibrationError, Progress


def closed_to(path: Path, uid: int) -> Path | None:
    """The first existing folder on the way to ``path`` that ``uid`` cannot pass through (it owns
    it without search permission, or does not own it and others have none), or None. Folders
    still to be made get the umask's usual 755."""
    import os
    import stat

    for folder in [*reversed(path.parents), path]:
        try:
            st = folder.stat()
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return None
        need = stat.S_IXUSR if st.st_uid == uid else stat.S_IXOTH
        if not st.st_mode & need and not (os.getuid() == uid == 0):
            return folder
    return None


def give_home(session, uid: int | None) -> None:
    """Local runtime run as root: hand the home to ``uid`` (the participant's scorer helpers run the
    solution as its owner), so the solution runs as that user, as in a container (uid 1000)."""
    if uid is None or session.sandbox.isolated:
        return
    import os

    home = session.workspace
    for root, dirs, files in os.walk(home):
        for name in dirs + files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chown(path, uid, uid)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
    os.chown(home, uid, uid)


def copy_setup_files(env: Environment, setup: SetupSpec, home: Path,
                     said: Callable[[str, str], None] = lambda _src, _dest: None) -> None:
    """Copy a set-up's files from the environment folder into ``home`` (a folder merged into place)."""
    for dest, src in setup.files.items():
        source, target = env.path / src, home / dest
        said(src, dest)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            shutil.copymode(source, target)


def put_in_place(session, env: Environment, setup: SetupSpec, label: str, progress: Progress = lambda _m: None,
                 owner: int | None = None) -> dict[str, Any]:
    """Put one solution in place: copy its files into the home, then run its command as the participant."""
    info: dict[str, Any] = {"files": dict(setup.files), "command": setup.command, "workdir": setup.workdir}
    copy_setup_files(env, setup, session.workspace, lambda src, dest: progress(f"{label}: {src} -> ~/{dest}"))
    sb = session.sandbox
    give_home(session, owner)
    if setup.files and sb.isolated:  # copied in by this process: the participant owns their files
        owned = [f"{sb.home}/{dest}" for dest in setup.files]
        r = sb.exec(["chown", "-R", "agent:agent", *owned], user="root", timeout=120)
        if r.exit_code != 0:
            raise CalibrationError(f"{label}: could not give the copied files to the participant: {r.stderr.strip()[-500:]}",
                                   kept=f"the calibration session in {session.folder}")
    if setup.command:
        argv = [sb.python if setup.command[0] == "python3" else setup.command[0], *setup.command[1:]]
        workdir = sb.home if not setup.workdir else f"{sb.home}/{setup.workdir}"
        progress(f"{label}: running `{' '.join(setup.command)}` as the participant in ~/{setup.workdir} "
                 f"(up to {setup.timeout:g} s)")
        started = time.monotonic()
        r = sb.exec(argv, user="agent", workdir=workdir, timeout=setup.timeout)
        info["command_s"] = round(time.monotonic() - started, 3)
        info["output_tail"] = (r.stdout[-1500:] + r.stderr[-1500:])
        if not r.ok:
            why = "timed out" if r.timed_out else f"exited with status {r.exit_code}"
            raise CalibrationError(f"{label}: `{' '.join(setup.command)}` {why}: {(r.stderr or r.stdout).strip()[-800:]}",
                                   kept=f"the calibration session's records and files in {session.folder}; "
                                        "no calibration file was written (an earlier one is unchanged)",
                                   fix="run the command by hand in that folder's workspace to see why, fix the "
                                       "environment's reference, then calibrate again")
        progress(f"{label}: command done in {info['command_s']:.1f} s")
    return info
