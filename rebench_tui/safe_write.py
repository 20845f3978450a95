"""Writing a file whole: a reader finds the old version or the new one, never half of either.

Every caller says how durable the write must be:

- ``durable=True`` for records (``session.json``, a calibration file, a running scoring's marker,
  the file watcher's journal): the temporary file is fsynced before it is renamed into place and
  the folder after, so once the call returns the new file survives a crash or a power cut.
- ``durable=False`` for caches and exports, which are rebuilt if lost: renamed into place, no
  fsync (a crash may leave the old version, never a torn one).
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_whole(path: Path, data: str | bytes, *, durable: bool) -> Path:
    """Write ``data`` (text as UTF-8) to ``path`` through a temporary file beside it. On any failure
    the temporary file is removed and the previous ``path``, if any, is left as it was."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data.encode("utf-8") if isinstance(data, str) else data)
            if durable:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    if durable:
        fsync_dir(path.parent)
    return path


def write_json(path: Path, obj: Any, *, durable: bool, indent: int | None = None) -> Path:
    """``obj`` as JSON (a final newline where indented, as an editor would leave it), written whole."""
    text = json.dumps(obj, indent=indent) + ("\n" if indent is not None else "")
    return write_whole(path, text, durable=durable)


def write_content_addressed(folder: Path, src: Any, *, chunk: int = 1 << 20) -> tuple[str, int]:
    """Copy the stream ``src`` into ``folder`` under the sha256 of its bytes (a content-addressed
    store: the same bytes are kept once), read-only; returns (digest, size). A file already there
    under that name is kept and the copy dropped. Not fsynced: a store of snapshots is written
    again from the home when a file of it is lost."""
    import hashlib

    folder.mkdir(parents=True, exist_ok=True)
    h = hashlib.sha256()
    size = 0
    fd, tmp = tempfile.mkstemp(prefix=".in-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            while block := src.read(chunk):
                h.update(block)
                out.write(block)
                size += len(block)
        digest = h.hexdigest()
        dest = folder / digest
        if dest.exists():
            os.unlink(tmp)
        else:
            os.chmod(tmp, 0o444)
            os.replace(tmp, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return digest, size
