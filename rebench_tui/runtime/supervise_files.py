"""What the command supervisor looks for and removes in the participant's files (a part of
supervise.py, shipped and run beside it): links from the home into forbidden paths, the
participant's Python bytecode, what a scored run left in the shared temporary folders; and the
private temporary folder of a root command. Standard library only.
"""

from __future__ import annotations

import os


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
