"""The attempts a session scored, as frozen snapshots: what is scored, fingerprinted, recounted
and recorded is one set of files.

A scoring takes its snapshot while the participant's processes are frozen (the engine's cgroup
freezer, ``docker pause``), from the home as a tar stream (any engine, local or remote) or as a
folder (the local runtime). Every entry the record keeps is taken (the recorder's ignore rules
decide for both: what the record leaves out, caches and VCS folders, is left out of the snapshot
too, so nothing the scorer can run is unrecorded). Regular files go into a content-addressed
store (``.state/attempts/objects/<sha256>``, shared by every attempt of the session, so a
re-scoring of unchanged files costs no copy); links are kept only when they stay inside the home;
a named pipe, socket or device ends the scoring with a reason that names it, as does a link out
of the home. The snapshot's manifest (``.state/attempts/<fingerprint>.json``) lists each path
with its hash, mode and size, and its fingerprint is the attempt fingerprint of the record
(``files.fingerprint`` over the descriptions the file recorder writes, a link's target
included), so a recount scores exactly the files the record shows.

The store is out of the participant's reach: it is in the session folder on the machine that
runs the app, never mounted into the participant's container; a scoring room gets a copy.
"""

from __future__ import annotations

import io
import json
import os
import posixpath
import stat
import tarfile
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Iterator

from ..errors import SessionError
from ..safe_write import write_content_addressed, write_json
from .files import fingerprint, is_ignored

ATTEMPTS = "attempts"
OBJECTS = "objects"
CHUNK = 1 << 20


class SnapshotRefused(SessionError):
    """The home holds something a snapshot cannot take: the scoring does not run."""


@dataclass(frozen=True)
class Snapshot:
    fingerprint: str
    n_files: int
    manifest: dict[str, dict[str, Any]]  # path -> {"sha256", "size", "mode"} or {"link": target, "size"}
    bytes: int

    def info(self) -> dict[str, Any]:
        """The record's attempt description of this snapshot."""
        return {"fingerprint": self.fingerprint, "n_files": self.n_files, "source": "snapshot", "bytes": self.bytes}


def _descriptions(manifest: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The manifest as the file recorder describes files, for ``fingerprint``."""
    out: dict[str, dict[str, Any]] = {}
    for rel, entry in manifest.items():
        if "link" in entry:
            out[rel] = {"size": entry["size"], "sha256": None, "kind": f"link->{entry['link']}"}  # where it leads counts
        else:
            out[rel] = {"size": entry["size"], "sha256": entry["sha256"]}
    return out


def _link_stays_inside(rel: str, target: str) -> bool:
    if posixpath.isabs(target):
        return False
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target))
    return not (joined == ".." or joined.startswith("../"))


class AttemptStore:
    """The session's snapshots under ``<state>/attempts``."""

    def __init__(self, state: Path, ignore: tuple[str, ...]) -> None:
        self.root = state / ATTEMPTS
        self.objects = self.root / OBJECTS
        self.ignore = ignore

    # -- taking ---------------------------------------------------------------------------
    def take_from_tar(self, stream: Iterator[bytes] | IO[bytes], prefix: str = "") -> Snapshot:
        """A snapshot of the tar stream of a home (``docker``'s archive of it: every member under
        ``prefix``, the folder's own name)."""
        fileobj = stream if hasattr(stream, "read") else _ChunkReader(stream)  # type: ignore[arg-type]
        entries: dict[str, dict[str, Any]] = {}
        with tarfile.open(fileobj=fileobj, mode="r|") as tar:  # type: ignore[arg-type]
            for member in tar:
                rel = _relative(member.name, prefix)
                if rel is None or is_ignored(rel, self.ignore) or _under_ignored(rel, self.ignore):
                    continue
                if member.isdir():
                    continue
                if member.issym():
                    entries[rel] = self._link(rel, member.linkname)
                elif member.islnk():  # a hard link to a member already taken: the same content
                    first = _relative(member.linkname, prefix)
                    if first in entries and "sha256" in entries[first]:
                        entries[rel] = {**entries[first], "mode": member.mode & 0o7777}
                    else:
                        raise SnapshotRefused(f"scoring refused: {rel} is a hard link to {member.linkname}, which the "
                                              "snapshot of your files does not hold", kept="every record; nothing was scored",
                                              fix="replace it with an ordinary copy of the file, then score again")
                elif member.isreg():
                    src = tar.extractfile(member)
                    assert src is not None
                    entries[rel] = self._put(src, member.mode)
                else:
                    raise _special(rel, _tar_kind(member))
        return self._finish(entries)

    def take_from_folder(self, home: Path) -> Snapshot:
        """A snapshot of a folder on this machine (the local runtime's home)."""
        entries: dict[str, dict[str, Any]] = {}
        for dirpath, dirnames, filenames in os.walk(home):
            reldir = os.path.relpath(dirpath, home)
            reldir = "" if reldir == "." else reldir
            keep = []
            for d in dirnames:
                rel = f"{reldir}/{d}".lstrip("/")
                if is_ignored(rel, self.ignore):
                    continue
                if os.path.islink(os.path.join(dirpath, d)):
                    filenames.append(d)  # a link to a folder is an entry like any link
                    continue
                keep.append(d)
            dirnames[:] = keep
            for name in filenames:
                rel = f"{reldir}/{name}".lstrip("/")
                if is_ignored(rel, self.ignore):
                    continue
                path = os.path.join(dirpath, name)
                st = os.lstat(path)
                if stat.S_ISLNK(st.st_mode):
                    entries[rel] = self._link(rel, os.readlink(path))
                elif stat.S_ISREG(st.st_mode):
                    with open(path, "rb") as f:
                        entries[rel] = self._put(f, st.st_mode)
                else:
                    raise _special(rel, _mode_kind(st.st_mode))
        return self._finish(entries)

    def _link(self, rel: str, target: str) -> dict[str, Any]:
        if not _link_stays_inside(rel, target):
            raise SnapshotRefused(f"scoring refused: {rel} is a symbolic link out of your home (to {target}); the "
                                  "scorer takes only what is in your home", kept="every record; nothing was scored",
                                  fix="copy what it leads to into your home instead of linking, then score again")
        return {"link": target, "size": len(os.fsencode(target))}

    def _put(self, src: IO[bytes], mode: int) -> dict[str, Any]:
        digest, size = write_content_addressed(self.objects, src, chunk=CHUNK)
        return {"sha256": digest, "size": size, "mode": mode & 0o7777}

    def _finish(self, entries: dict[str, dict[str, Any]]) -> Snapshot:
        fp, n = fingerprint(_descriptions(entries))
        snap = Snapshot(fp, n, dict(sorted(entries.items())), sum(int(e.get("size") or 0) for e in entries.values()
                                                                    if "sha256" in e))
        path = self.root / f"{fp}.json"
        if not path.exists():
            write_json(path, {"fingerprint": fp, "n_files": n, "files": snap.manifest}, durable=True)
        return snap

    # -- reading --------------------------------------------------------------------------
    def has(self, fp: str | None) -> bool:
        return bool(fp) and (self.root / f"{fp}.json").is_file()

    def load(self, fp: str) -> Snapshot:
        data = json.loads((self.root / f"{fp}.json").read_text(encoding="utf-8"))
        files = data["files"]
        got, n = fingerprint(_descriptions(files))
        if got != fp:
            raise SessionError(f"the kept snapshot of attempt {fp[:12]} does not match its fingerprint (it gives {got[:12]})",
                               kept="every record", fix="the session folder was changed outside the app; run `rebench-tui verify`")
        for entry in files.values():
            if "sha256" in entry and not (self.objects / entry["sha256"]).is_file():
                raise SessionError(f"the kept snapshot of attempt {fp[:12]} lacks a file ({entry['sha256'][:12]})",
                                   kept="every record", fix="the session folder was changed outside the app")
        return Snapshot(fp, n, files, sum(int(e.get("size") or 0) for e in files.values() if "sha256" in e))

    def add_to_tar(self, snap: Snapshot, tar: tarfile.TarFile, arcroot: str, uid: int = 1000, gid: int = 1000) -> None:
        """Add the snapshot's files under ``arcroot`` (a folder owned by ``uid``:``gid``, as every
        file in it) to ``tar``: a scoring room's copy of the attempt."""
        root = tarfile.TarInfo(arcroot)
        root.type, root.mode, root.uid, root.gid = tarfile.DIRTYPE, 0o755, uid, gid
        tar.addfile(root)
        made: set[str] = set()
        for rel, entry in snap.manifest.items():
            parts = rel.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                folder = "/".join(parts[:i])
                if folder not in made:
                    made.add(folder)
                    info = tarfile.TarInfo(posixpath.join(arcroot, folder))
                    info.type, info.mode, info.uid, info.gid = tarfile.DIRTYPE, 0o755, uid, gid
                    tar.addfile(info)
            info = tarfile.TarInfo(posixpath.join(arcroot, rel))
            info.uid, info.gid = uid, gid
            if "link" in entry:
                info.type, info.linkname, info.mode = tarfile.SYMTYPE, entry["link"], 0o777
                tar.addfile(info)
                continue
            info.size, info.mode = int(entry["size"]), int(entry.get("mode", 0o644)) & 0o7777
            with open(self.objects / entry["sha256"], "rb") as f:
                tar.addfile(info, f)


class _ChunkReader(io.RawIOBase):
    """A file over an iterator of byte chunks (the engine's archive stream)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._it = iter(chunks)
        self._buf = b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._it)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        return n


def _relative(name: str, prefix: str) -> str | None:
    while name.startswith("./"):
        name = name[2:]
    name = name.lstrip("/")
    if prefix:
        if name == prefix:
            return None
        if not name.startswith(prefix + "/"):
            return None
        name = name[len(prefix) + 1:]
    name = posixpath.normpath(name) if name else name
    if not name or name == "." or name.startswith("../"):
        return None
    return name


def _under_ignored(rel: str, ignore: tuple[str, ...]) -> bool:
    parts = rel.split("/")
    return any(is_ignored("/".join(parts[:i]), ignore) for i in range(1, len(parts)))


def _tar_kind(member: tarfile.TarInfo) -> str:
    if member.isfifo():
        return "a named pipe"
    if member.ischr() or member.isblk():
        return "a device file"
    return "not a regular file"


def _mode_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    return "not a regular file"


def _special(rel: str, kind: str) -> SnapshotRefused:
    return SnapshotRefused(f"scoring refused: {rel} is {kind}; a scoring takes only regular files, folders and links "
                           "inside your home", kept="every record; nothing was scored",
                           fix=f"remove {rel} (or move it out of your home), then score again")
