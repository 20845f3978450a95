#!/usr/bin/env python3
"""The file feed of a sandbox on a remote engine: scans the participant's home, streams changes.

Standard library only: it is copied into the container (``/opt/rebench/poller.py``) and run as
root by the container's ``python3`` over an exec stream, where a host-side watcher cannot see the
files (the home is a volume on the remote host).

    poller.py ROOT --ignore JSON [--interval S] [--pidfile PATH]

Writes one JSON line per scan to stdout: the first is ``{"type": "scan", "full": true, "seq": 0,
"files": {rel: desc}}`` with every file; later ones carry only what changed since the previous
scan (``files`` created or changed, ``deleted`` paths), and an empty scan still comes, so the
reader can count scans (a flush waits for one that started after it asked). ``desc`` is
``{size, mtime, sha256}`` (``kind`` for links and other non-files, no hash above 2 GB) plus
``text`` for small UTF-8 files, so the host can keep diffs. Hashes are cached by size, mtime,
ctime and inode: an unchanged file is never read twice. One poller per container: a new one ends
the previous (its pid file), so a reconnect never leaves two writers. It exits when its reader
goes (a broken pipe).
"""

from __future__ import annotations

import argparse
import fnmatch
import hashlib
import json
import os
import signal
import sys
import time

TEXT_LIMIT = 256 * 1024
HASH_LIMIT = 2 * 1024**3


def is_ignored(rel: str, patterns: list[str]) -> bool:
    """The same rule as the host's (session/files.py): anchored with a slash, else any component."""
    parts = rel.split("/")
    for pat in patterns:
        if "/" in pat:
            anchored = pat.rstrip("/")
            if rel == anchored or rel.startswith(anchored + "/"):
                return True
        elif any(fnmatch.fnmatch(part, pat) for part in parts):
            return True
    return False


def _sha256(path: str) -> str:
    with open(path, "rb") as fh:  # the images' python3 is bookworm's 3.11, which has file_digest
        return hashlib.file_digest(fh, "sha256").hexdigest()


def _text(path: str, size: int) -> str | None:
    if size > TEXT_LIMIT:
        return None
    try:
        with open(path, "rb") as fh:
            data = fh.read(TEXT_LIMIT + 1)
        if b"\0" in data:
            return None
        return data.decode("utf-8")
    except (OSError, UnicodeDecodeError):
        return None


class Scanner:
    def __init__(self, root: str, ignore: list[str]) -> None:
        self.root = root
        self.ignore = ignore
        self.cache: dict[str, tuple[tuple, dict]] = {}  # rel -> (stat key, desc without text)

    def describe(self, rel: str) -> tuple[dict | None, bool]:
        """(desc, changed since the last scan)."""
        path = os.path.join(self.root, rel)
        try:
            st = os.lstat(path)
        except OSError:
            return None, True
        key = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_mode)
        hit = self.cache.get(rel)
        if hit is not None and hit[0] == key:
            return hit[1], False
        import stat as _stat

        if not _stat.S_ISREG(st.st_mode):
            desc = {"size": st.st_size, "mtime": st.st_mtime, "sha256": None,
                    "kind": "link" if _stat.S_ISLNK(st.st_mode) else "other"}
            if desc["kind"] == "link":
                try:  # where it leads, as written (never followed)
                    desc["target"] = os.fsdecode(os.readlink(path))
                except OSError:
                    desc["target"] = None
        else:
            try:
                sha = _sha256(path) if st.st_size <= HASH_LIMIT else None
            except OSError:
                return None, True
            desc = {"size": st.st_size, "mtime": st.st_mtime, "sha256": sha}
        self.cache[rel] = (key, desc)
        return desc, True

    def scan(self) -> dict[str, dict]:
        found: dict[str, dict] = {}
        changed: set[str] = set()
        for dirpath, dirnames, filenames in os.walk(self.root):
            reldir = os.path.relpath(dirpath, self.root)
            reldir = "" if reldir == "." else reldir
            dirnames[:] = [d for d in dirnames if not is_ignored(f"{reldir}/{d}".lstrip("/"), self.ignore)]
            for name in filenames:
                rel = f"{reldir}/{name}".lstrip("/")
                if is_ignored(rel, self.ignore):
                    continue
                desc, fresh = self.describe(rel)
                if desc is not None:
                    found[rel] = desc
                    if fresh:
                        changed.add(rel)
        for rel in list(self.cache):
            if rel not in found:
                del self.cache[rel]
        self.changed = changed
        return found


def with_text(root: str, rel: str, desc: dict) -> dict:
    if desc.get("kind") is None and desc.get("sha256"):
        text = _text(os.path.join(root, rel), desc["size"])
        if text is not None:
            return {**desc, "text": text}
    return desc


def _end_previous(pidfile: str) -> None:
    try:
        with open(pidfile, encoding="utf-8") as fh:
            pid = int(fh.read().strip() or 0)
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmd = fh.read()
        if pid != os.getpid() and b"poller.py" in cmd:
            os.kill(pid, signal.SIGTERM)
    except (OSError, ValueError):
        pass
    os.makedirs(os.path.dirname(pidfile), exist_ok=True)
    with open(pidfile, "w", encoding="utf-8") as fh:
        fh.write(str(os.getpid()))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--ignore", default="[]")
    ap.add_argument("--interval", type=float, default=0.5)
    ap.add_argument("--pidfile", default="/run/rebench/poller.pid")
    a = ap.parse_args(argv)
    _end_previous(a.pidfile)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    scanner = Scanner(a.root, json.loads(a.ignore))
    out = sys.stdout
    seq = 0
    known: dict[str, dict] = {}
    try:
        while True:
            started = time.monotonic()
            current = scanner.scan()
            if seq == 0:
                msg = {"type": "scan", "full": True, "seq": 0,
                       "files": {rel: with_text(a.root, rel, d) for rel, d in current.items()}}
            else:
                files = {rel: with_text(a.root, rel, current[rel]) for rel in sorted(scanner.changed)
                         if known.get(rel) != current[rel]}
                msg = {"type": "scan", "full": False, "seq": seq, "files": files,
                       "deleted": sorted(set(known) - set(current))}
            out.write(json.dumps(msg, separators=(",", ":")) + "\n")
            out.flush()
            known = current
            seq += 1
            time.sleep(max(0.0, a.interval - (time.monotonic() - started)))
    except (BrokenPipeError, KeyboardInterrupt):
        return 0


if __name__ == "__main__":
    sys.exit(main())
