"""What the file watcher knows of a workspace without watching it: the ignore rules, a walk,
a file described (size, mtime, sha256), a whole scan, and the attempt fingerprint of a state.

Also the recorder's limits and notes, and :class:`FileChange`, the row one change becomes.
"""

from __future__ import annotations

import fnmatch
import hashlib
import os
import re
import time
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from ...hashing import sha256_file

DEFAULT_IGNORE: tuple[str, ...] = (
    "__pycache__", "*.pyc", ".cache", ".triton", ".git", ".ipynb_checkpoints", "*.swp", "*.swx", "*~",
    ".nv", ".local/share/Trash", ".viminfo", ".lesshst", ".python_history", ".bash_history",
)
TEXT_LIMIT = 256 * 1024  # files up to this size are diffed when they are text
DIFF_LIMIT = 64 * 1024  # a diff longer than this is cut (the note says how much)
HASH_LIMIT = 2 * 1024**3  # files above this are recorded by size and mtime only
DEFERRED_LIMIT = 32 * 1024**2  # texts kept in memory between state saves before they are written out
MARKER = ".rebench-flush-"  # flush barrier files, made and removed at the workspace's top; never recorded
SETTLE = 1.0  # seconds a file must stay unchanged before a file seen while it was written is described again
RECENT = 0.05  # an mtime this close to the moment a file was described: it may change again unseen (same tick)
RESCAN_CHUNK = 1000  # changes found by a rescan go to the sink in batches of this many
LOST = "found by a rescan after file events were lost"
BEFORE_SCORING = "found by the rescan before a scoring"
SETTLED = "recorded again once it stopped changing"


@dataclass(frozen=True)
class FileChange:
    event: str  # created | modified | deleted | moved
    path: str  # relative to the workspace
    size: int | None = None
    sha256: str | None = None
    dest: str | None = None  # for moves
    diff: str | None = None
    diff_truncated: int = 0
    events: int = 1  # raw events coalesced into this change
    note: str | None = None
    kind: str | None = None  # "link" (a symbolic link, ``target`` where it leads) or "other" (no regular file)
    target: str | None = None
    mtime_ms: int | None = None  # the file's modification time (ms since the epoch), in its own field
    seen_ms: int | None = None  # when the watcher saw it (its event, or the scan that found it): the row's calledAt

    def summary(self) -> str:
        where = f"{self.path} -> {self.dest}" if self.dest else self.path
        if self.kind == "link":
            return f"{self.event} link {where}" + ("" if self.target is None else f" → {self.target}")
        if self.kind is not None:
            return f"{self.event} {where} (not a regular file)"
        size = "" if self.size is None else f" ({human_size(self.size)})"
        return f"{self.event} {where}{size}"

    def record(self) -> dict[str, Any]:
        """The row's facts (``seen_ms`` is the row's own time, ``calledAt``, not repeated here)."""
        return {k: v for k, v in asdict(self).items()
                if k != "seen_ms" and (v is not None and v != 0 or k in ("event", "path"))}


def observed(change: FileChange, desc: dict[str, Any] | None, seen: float | None) -> FileChange:
    """``change`` with what was seen of the file: when (``seen``, seconds; now if None), its mtime,
    and for a link that it is one and where it leads."""
    extra: dict[str, Any] = {"seen_ms": int((time.time() if seen is None else seen) * 1000)}
    if desc is not None:
        if desc.get("mtime") is not None:
            extra["mtime_ms"] = int(float(desc["mtime"]) * 1000)
        if desc.get("kind"):
            extra.update(kind=desc["kind"], target=desc.get("target"))
    return replace(change, **extra)


def with_diff(change: FileChange, diff: str | None) -> FileChange:
    """``change`` with its diff, cut at DIFF_LIMIT (``diff_truncated`` says how much was cut)."""
    if not diff:
        return change
    cut = max(0, len(diff) - DIFF_LIMIT)
    return FileChange(**{**asdict(change), "diff": diff[:DIFF_LIMIT], "diff_truncated": cut})


def human_size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n} B"


def is_ignored(rel: str, patterns: tuple[str, ...] = DEFAULT_IGNORE) -> bool:
    """A pattern with a slash matches a path from the workspace root (``assets/``, ``a/b``);
    one without matches any path component by glob (``*.pyc``, ``__pycache__``)."""
    if rel.startswith(MARKER) and "/" not in rel:
        return True
    parts = rel.split("/")
    for pat in patterns:
        if "/" in pat:
            anchored = pat.rstrip("/")
            if rel == anchored or rel.startswith(anchored + "/"):
                return True
        elif any(fnmatch.fnmatch(part, pat) for part in parts):
            return True
    return False


class _Ignore:
    """The ignore rules of :func:`is_ignored`, compiled, for walks over many files: a name is
    matched against the unanchored patterns once, where its folder was checked already."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        names = [p for p in patterns if "/" not in p]
        self.names = re.compile("|".join(fnmatch.translate(p) for p in names)) if names else None
        self.anchored = tuple(p.rstrip("/") for p in patterns if "/" in p)

    def __call__(self, rel: str, name: str) -> bool:
        if self.names is not None and self.names.match(name):
            return True
        if name.startswith(MARKER) and "/" not in rel:
            return True
        return any(rel == a or rel.startswith(a + "/") for a in self.anchored)


def stat_walk(root: Path, ignore: tuple[str, ...] = DEFAULT_IGNORE) -> dict[str, os.stat_result]:
    """Every entry below ``root`` that is not a folder and that the ignore rules keep, with its
    ``lstat`` (links are not followed): what a rescan compares with the recorded state."""
    skip = _Ignore(ignore)
    found: dict[str, os.stat_result] = {}
    todo = [("", str(root))]
    while todo:
        reldir, path = todo.pop()
        try:
            entries = list(os.scandir(path))
        except OSError:
            continue  # removed meanwhile, or unreadable: its files count as gone
        for entry in entries:
            rel = f"{reldir}/{entry.name}" if reldir else entry.name
            if skip(rel, entry.name):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    todo.append((rel, entry.path))
                else:
                    found[rel] = entry.stat(follow_symlinks=False)
            except OSError:
                continue
    return found


def _read_text(path: Path, size: int) -> str | None:
    if size > TEXT_LIMIT:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def describe(path: Path) -> dict[str, Any] | None:
    """Size, mtime and sha256 of a file (no hash above HASH_LIMIT; links and others by kind, a link
    with its ``target``)."""
    try:
        st = path.lstat()
    except OSError:
        return None
    if not path.is_file() or path.is_symlink():
        if not path.is_symlink():
            return {"size": st.st_size, "mtime": st.st_mtime, "sha256": None, "kind": "other"}
        try:  # where it leads, as written (never followed)
            target: str | None = os.fsdecode(os.readlink(path))
        except OSError:
            target = None
        return {"size": st.st_size, "mtime": st.st_mtime, "sha256": None, "kind": "link", "target": target}
    sha = sha256_file(path) if st.st_size <= HASH_LIMIT else None
    return {"size": st.st_size, "mtime": st.st_mtime, "sha256": sha}


def scan(root: Path, ignore: tuple[str, ...] = DEFAULT_IGNORE) -> dict[str, dict[str, Any]]:
    """Every file below root that the ignore rules keep, described."""
    found: dict[str, dict[str, Any]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        reldir = os.path.relpath(dirpath, root)
        reldir = "" if reldir == "." else reldir
        dirnames[:] = [d for d in dirnames if not is_ignored(f"{reldir}/{d}".lstrip("/"), ignore)]
        for name in filenames:
            rel = f"{reldir}/{name}".lstrip("/")
            if is_ignored(rel, ignore):
                continue
            desc = describe(root / rel)
            if desc is not None:
                found[rel] = desc
    return found


FINGERPRINT_DOMAIN = b"rebench-tui attempt fingerprint v1\n"


def fingerprint(files: dict[str, dict[str, Any]]) -> tuple[str, int]:
    """The attempt fingerprint of a set of files: (sha256 hex, number of files).

    ``files`` is a file state as the file recorder keeps it (``files.json``; :func:`scan` gives
    the same shape): workspace-relative path -> ``{size, mtime, sha256}``, ``kind`` for links and
    other non-files. What is in it: EVERY file the recorder tracks in the participant's home, the
    solution folder and everything else (trained weights such as ``~/fixed_model.pth``,
    ``~/finetuned_model/``, answers, scripts, data the participant made): a scorer may read any
    of them. Left out are only the recorder's ignore patterns (:data:`DEFAULT_IGNORE`: caches
    rebuilt from the files that are in, such as ``__pycache__``/``*.pyc``/``.triton``/``.cache``,
    editor and shell leftovers, ``.git``) and the read-only ``assets/`` mount, which is the same
    for every attempt of a session.

    Each file enters as its path and its content's sha256. A file with no hash enters as what
    the recorder knows of it: a link or other non-file by kind and size (its target is not
    read), a regular file above the hash limit (2 GB) by size and mtime. Modes and owners do not
    enter. Paths are sorted by their bytes and every field is length-prefixed, so no two states
    give the same stream. The result does not depend on where the state came from (the recorder
    here, its child process, a remote engine's poller, or a scan of the folder)."""
    h = hashlib.sha256(FINGERPRINT_DOMAIN)

    def put(b: bytes) -> None:
        h.update(len(b).to_bytes(8, "big"))
        h.update(b)

    entries = sorted((rel.encode("utf-8", "surrogateescape"), rel) for rel in files)
    for raw, rel in entries:
        desc = files[rel] or {}
        if desc.get("sha256"):
            token = f"sha256:{desc['sha256']}"
        elif desc.get("kind"):
            token = f"{desc['kind']}:size={desc.get('size')}"
        else:
            token = f"unhashed:size={desc.get('size')}:mtime={desc.get('mtime')!r}"
        put(raw)
        put(token.encode("ascii", "backslashreplace"))
    return h.hexdigest(), len(entries)

