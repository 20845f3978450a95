"""What the file watcher keeps between runs: its saved state (``files.json``, what has been
recorded: workspace-relative path -> ``{size, mtime, sha256}``) and the texts of small text files
(``blobs/``, by sha256, redacted), the bases of diffs across restarts.

While the watcher drains a burst, new versions' texts stay in memory (sha256 -> redacted text)
and only the versions the saved state names are written to ``blobs/``, when it is saved: a log
appended to 1,000 times a second needs one blob a second, not 1,000 files.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from ...safe_write import write_json, write_whole


class FileState:
    """The state file and the text blobs beside it, for one :class:`~.watcher.FileWatcher`."""

    def __init__(self, state_path: Path, redact: Callable[[str], str]) -> None:
        self.state_path = state_path
        self.redact = redact  # blob copies of the participant's files keep no secret value
        self.blobs = state_path.parent / "blobs"  # small text files by sha256, for diffs across restarts
        self.defer = False  # set while the watcher drains: texts stay in ``deferred`` until the state is saved
        self.deferred: dict[str, str] = {}
        self.deferred_bytes = 0

    def save(self, known: dict[str, dict[str, Any]]) -> None:
        """Write the deferred texts the state names, then the state (atomically). A full or
        read-only disk leaves the last state: it is a cache of the audit log; saved next time."""
        self.write_deferred(known)  # before the state that names them
        try:
            write_json(self.state_path, known, durable=False)
        except OSError:
            pass

    def load(self) -> dict[str, dict[str, Any]] | None:
        """The last saved state; None if there is none (a first start), {} for an empty workspace."""
        try:
            return json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def put(self, sha: str | None, text: str | None) -> None:
        if sha is None or text is None:
            return
        if self.defer:
            if sha not in self.deferred:
                self.deferred[sha] = self.redact(text)
                self.deferred_bytes += len(text)
            return
        self.write(sha, self.redact(text))

    def write_deferred(self, known: dict[str, dict[str, Any]]) -> None:
        """Write the deferred texts of the versions the state names now; forget the others."""
        current = {d.get("sha256") for d in known.values()}
        for sha, text in self.deferred.items():
            if sha in current:
                self.write(sha, text)
        self.deferred.clear()
        self.deferred_bytes = 0

    def write(self, sha: str, redacted: str) -> None:
        path = self.blobs / sha[:2] / sha
        if not path.exists():
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                write_whole(path, redacted, durable=False)
            except OSError:  # only later diffs lose their base; the change itself is still recorded
                pass

    def get(self, sha: str | None) -> str | None:
        if sha is None:
            return None
        if sha in self.deferred:
            return self.deferred[sha]
        try:
            return (self.blobs / sha[:2] / sha).read_text(encoding="utf-8")
        except OSError:
            return None
