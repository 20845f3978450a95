"""Copies of the participant's files as each attempt was scored, kept so the finish can score the
leading attempt again (``recount``).

A snapshot is kept under ``.state/attempts/<fingerprint>/`` the first time an attempt is scored,
only where the environment asks for a recount and the home is a folder on this machine (a bind
mount or the local runtime). It holds every file the attempt fingerprint covers, and it is kept
only if its own fingerprint is the attempt's: a file changed while it was copied drops it. Placing
a snapshot makes the home hold exactly its files again: files it lacks are removed, files that
differ are rewritten in place (so they keep their owner), and the home's fingerprint is checked.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..errors import SessionError
from .files import fingerprint, scan

SNAPSHOTS = "attempts"


class Snapshots:
    def __init__(self, home: Path, state: Path, ignore: tuple[str, ...]) -> None:
        self.home = home
        self.root = state / SNAPSHOTS
        self.ignore = ignore

    def folder(self, fp: str) -> Path:
        return self.root / fp

    def has(self, fp: str | None) -> bool:
        return bool(fp) and self.folder(fp).is_dir()  # type: ignore[arg-type]

    def keep(self, fp: str | None) -> bool:
        """Copy the home into the snapshot of ``fp`` unless it is there; True if it is there now."""
        if not fp or self.has(fp):
            return bool(fp)
        tmp = self.root / f".{fp}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        for rel in scan(self.home, self.ignore):
            src, dest = self.home / rel, tmp / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            if src.is_symlink() or src.is_file():
                shutil.copy2(src, dest, follow_symlinks=False)
                _same_owner(src, dest)
        if fingerprint(scan(tmp, self.ignore) if tmp.is_dir() else {})[0] != fp:
            shutil.rmtree(tmp, ignore_errors=True)  # the files changed while they were copied
            return False
        tmp.mkdir(parents=True, exist_ok=True)
        tmp.rename(self.folder(fp))
        return True

    def place(self, fp: str) -> None:
        """Make the home hold exactly the files of snapshot ``fp``."""
        src = self.folder(fp)
        want = scan(src, self.ignore)
        have = scan(self.home, self.ignore)
        for rel in have.keys() - want.keys():
            (self.home / rel).unlink(missing_ok=True)
        for rel, desc in want.items():
            if (have.get(rel) or {}).get("sha256") == desc.get("sha256") and desc.get("sha256"):
                continue
            dest = self.home / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            made = not dest.exists()
            if (src / rel).is_symlink() or dest.is_symlink():
                dest.unlink(missing_ok=True)
                shutil.copy2(src / rel, dest, follow_symlinks=False)
                _same_owner(src / rel, dest)
                continue
            with open(src / rel, "rb") as fin, open(dest, "wb") as fout:  # in place: the owner stays
                shutil.copyfileobj(fin, fout)
            shutil.copymode(src / rel, dest)
            if made:  # a file made again: the owner it had when it was copied
                _same_owner(src / rel, dest)
        got = fingerprint(scan(self.home, self.ignore))[0]
        if got != fp:
            raise SessionError(f"the home could not be made to hold attempt {fp[:12]}'s files (it now has {got[:12]})",
                               kept=f"the snapshot in {src}", fix="check the session folder's permissions")


def _same_owner(src: Path, dest: Path) -> None:
    """Give ``dest`` the owner of ``src`` where this process may (as root it may: the home's files
    stay the participant's); elsewhere they are this process's, which is who made them anyway."""
    try:
        st = src.lstat()
        os.chown(dest, st.st_uid, st.st_gid, follow_symlinks=False)
    except OSError:
        pass
