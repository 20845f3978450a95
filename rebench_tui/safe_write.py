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
