"""File digests shared by the asset store, the file watcher and the session's finish record."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path


def sha256_file(path: Path) -> str:
    """sha256 of a file's bytes (read in blocks by hashlib: checkpoints are many GB)."""
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


# The scorer's self-digest. ``runtime/lib/rebench_scorer/identity.py`` is copied into every
# container and imports nothing from this package; this is the workstation's copy of the same
# function, so the catalog needs no import from the runtime layer. ``tests/unit/test_layers.py``
# checks that both give the same digest for an environment.
SCORER_SKIP_TOP = frozenset({"assets", "starting_solution", "secrets.env"})
SCORER_LIB = Path(__file__).parent / "runtime" / "lib" / "rebench_scorer"


def _scorer_files(root: Path, skip_top: frozenset[str]) -> list[tuple[str, Path]]:
    out: list[tuple[str, Path]] = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not (rel_dir == "." and d in skip_top))
        for name in sorted(filenames):
            if rel_dir == "." and name in skip_top or name.endswith(".pyc"):
                continue
            path = Path(dirpath, name)
            if path.is_symlink() or not path.is_file():
                continue
            out.append((os.path.normpath(os.path.join(rel_dir, name)), path))
    return out


def scorer_digest(scorer_dir: Path) -> str:
    """sha256 (hex) of a scorer folder's code and the scorer helpers, as the scorer reports it."""
    h = hashlib.sha256()
    for prefix, root, skip in (("scorer", scorer_dir, SCORER_SKIP_TOP), ("lib", SCORER_LIB, frozenset())):
        for rel, path in _scorer_files(root, skip):
            h.update(f"{prefix}/{rel}\0{hashlib.sha256(path.read_bytes()).hexdigest()}\n".encode())
    return h.hexdigest()
