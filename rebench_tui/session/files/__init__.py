"""The participant's files, recorded: the workspace file watcher, the recorder that runs it in a
child process, the feed of a home on a remote engine, and the scans and fingerprints of a workspace.

The rest of the session (and the screen) imports only the names below; the modules inside are
this package's own (an import-linter ``protected`` contract in pyproject.toml keeps it so):

- ``watcher``: :class:`FileWatcher`, watchdog's events coalesced and recorded in batches;
- ``raw_events``: watchdog's handler, the lost-events handler, coalescing, the flush barrier;
- ``rescan``: the second look after lost events and before a scoring;
- ``state``: ``files.json`` and the diff bases (``blobs/``);
- ``workspace``: the ignore rules, a file described, a whole scan, the attempt fingerprint, :class:`FileChange`;
- ``recorder`` and ``recorder_child``: :class:`FileRecorder`, the watcher in a process of its own;
- ``remote``: :class:`RemoteFileWatcher`, the poller's scans of a remote home.
"""

from .recorder import FileRecorder
from .remote import RemoteFileWatcher
from .watcher import FileWatcher
from .workspace import DEFAULT_IGNORE, FileChange, fingerprint, is_ignored, scan

__all__ = ["DEFAULT_IGNORE", "FileChange", "FileRecorder", "FileWatcher", "RemoteFileWatcher", "fingerprint",
           "is_ignored", "scan"]
