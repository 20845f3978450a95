"""Which scorer produced a result: a sha256 over the scorer's own files.

The digest covers every regular file of the scorer's folder (the environment's ``protected/``),
less what is data rather than code (the held-out ``assets``, the pristine ``starting_solution``,
``secrets.env``, byte-code caches), plus this helper package itself. The scorer puts it into its
result (``scorer_sha256``); the workstation computes the same over the environment folder it
built the image from and records whether they agree.
"""

from __future__ import annotations

import hashlib
import os

SKIP_TOP = {"assets", "starting_solution", "secrets.env"}
SKIP_ANY = {"__pycache__"}


def _files(root: str, skip_top: set[str]) -> list[tuple[str, str]]:
    out = []
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        dirnames[:] = sorted(d for d in dirnames if d not in SKIP_ANY and not (rel_dir == "." and d in skip_top))
        for name in sorted(filenames):
            if rel_dir == "." and name in skip_top or name.endswith(".pyc"):
                continue
            path = os.path.join(dirpath, name)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            out.append((os.path.normpath(os.path.join(rel_dir, name)), path))
    return out


def digest(scorer_dir: str) -> str:
    """sha256 (hex) of the scorer folder's code and this package."""
    h = hashlib.sha256()
    here = os.path.dirname(os.path.abspath(__file__))
    for prefix, root, skip in (("scorer", scorer_dir, SKIP_TOP), ("lib", here, set())):
        for rel, path in _files(root, skip):
            with open(path, "rb") as fh:
                content = hashlib.sha256(fh.read()).hexdigest()
            h.update(f"{prefix}/{rel}\0{content}\n".encode())
    return h.hexdigest()
