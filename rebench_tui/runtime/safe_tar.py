"""Extracting archives copied out of a sandbox, whose contents the participant controls.

Every member goes through tarfile's ``data`` filter (no absolute paths, no ``..``, no links that
leave the destination, no device files, no set-uid bits). A member the filter refuses is
skipped, not fatal: the rest is still kept, and the caller gets a line per skipped member to
say so. Files larger than ``max_file_bytes``, and anything past ``max_total_bytes`` in all, are
skipped the same way, so a participant's 100 GB file cannot fill this machine's disk.
"""

from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path
from typing import Callable, Iterable

MAX_FILE_BYTES = 64 * 1024**3
MAX_TOTAL_BYTES = 256 * 1024**3


def _printable(name: str) -> str:
    return name.encode("utf-8", "backslashreplace").decode("utf-8")[:300]


def extract_safely(tar: tarfile.TarFile, dest: Path, *, max_file_bytes: int = MAX_FILE_BYTES,
                   max_total_bytes: int = MAX_TOTAL_BYTES) -> list[str]:
    """Extract what is safe into ``dest``; returns one line per member skipped, and why."""
    dest.mkdir(parents=True, exist_ok=True)
    skipped: list[str] = []
    total = 0
    members = iter(tar)
    while True:
        try:
            member = next(members)
        except StopIteration:
            break
        except tarfile.TarError as exc:  # cut short (the container stopped mid-copy): keep what came
            skipped.append(f"the rest of the archive: unreadable ({exc})")
            break
        name = _printable(member.name)
        if member.name.startswith("/") or (member.islnk() and member.linkname.startswith("/")):
            skipped.append(f"{name}: refused (an absolute path; an archive of a folder has none)")
            continue
        if member.isfile() and member.size > max_file_bytes:
            skipped.append(f"{name}: {member.size} bytes, over the {max_file_bytes}-byte limit per file")
            continue
        if member.isfile() and total + member.size > max_total_bytes:
            skipped.append(f"{name}: the archive passed the {max_total_bytes}-byte limit in all")
            continue
        try:
            safe = tarfile.data_filter(member, str(dest))
        except tarfile.FilterError as exc:
            skipped.append(f"{name}: refused ({exc})")
            continue
        try:
            tar.extract(safe, dest, filter="fully_trusted", set_attrs=True)
        except (OSError, tarfile.TarError) as exc:  # a link to a member that was skipped, a name the OS refuses
            skipped.append(f"{name}: not extracted ({exc})")
            continue
        if member.isfile():
            total += member.size
    return skipped


def extract_stream(chunks: Iterable[bytes], dest: Path, *, before_extract: Callable[[], None] | None = None) -> list[str]:
    """An archive arriving in chunks (a container's ``get_archive`` or ``tar -cf -`` output),
    spooled to a temporary file (a large home must not fill memory), then :func:`extract_safely`
    into ``dest``. ``before_extract`` runs once the stream has ended (e.g. to check how it ended)."""
    with tempfile.TemporaryFile() as tmp:
        for chunk in chunks:
            tmp.write(chunk)
        if before_extract is not None:
            before_extract()
        tmp.seek(0)
        with tarfile.open(fileobj=tmp) as tar:
            return extract_safely(tar, dest)
