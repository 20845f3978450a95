"""File digests shared by the asset store, the file watcher and the session's finish record."""

from __future__ import annotations

import hashlib
from pathlib import Path


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes, read in 4 MiB blocks (checkpoints are many GB)."""
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return h.hexdigest()
