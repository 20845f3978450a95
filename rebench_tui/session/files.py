"""The workspace file watcher: every change to the participant's files, recorded.

watchdog's observer feeds raw events into a queue; a coalescing thread drains it every
``interval`` seconds, keeps one change per path (the last), describes each (size, sha256, a
unified diff for small text files) and writes them to the audit log with one fsync per batch,
then tells listeners once per batch. A training run writing thousands of files costs a few
writes a second, not one per event, and no change is dropped from the record.

While no watcher runs (the app closed), files still change; :meth:`FileWatcher.catch_up`
compares the workspace with the last state recorded (``files.json``) and records the
differences as changes seen on reopening.

Events the kernel drops are found again. inotify's queue holds a fixed number of events
(``/proc/sys/fs/inotify/max_queued_events``, 16,384 here); a burst past it (20,000 files made in
a second) loses the rest, and watchdog only logs "Inotify queue overflowed". The watcher hears
that warning (and any other from watchdog's observer) and then rescans: it walks the workspace,
compares each file's size and mtime with its state, describes (hashes) only what differs, and
records every difference with the note "found by a rescan after file events were lost". The
flush before each scoring rescans too (noted "found by the rescan before a scoring"), so a
scoring's files are in the record whatever was lost. A file still being written when it was
described (its size or mtime moved while it was hashed, or its mtime was in the last moments)
is looked at again once it has been quiet for a second, and recorded again if it changed
("recorded again once it stopped changing"): a 2 GB file described at 1.7 GB ends at 2 GB.
"""

from __future__ import annotations

import difflib
import fnmatch
import hashlib
import itertools
import json
import logging
import os
import queue
import re
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from ..hashing import sha256_file

DEFAULT_IGNORE: tuple[str, ...] = (
    "__pycache__", "*.pyc", ".cache", ".triton", ".git", ".ipynb_checkpoints", "*.swp", "*.swx", "*~",
    ".nv", ".local/share/Trash", ".viminfo", ".lesshst", ".python_history", ".bash_history",
)
TEXT_LIMIT = 256 * 1024  # files up to this size are diffed when they are text
DIFF_LIMIT = 64 * 1024  # a diff longer than this is cut (the note says how much)
HASH_LIMIT = 2 * 1024**3  # files above this are recorded by size and mtime only
DEFERRED_LIMIT = 32 * 1024**2  # texts kept in memory between state saves before they are written out
MARKER = ".rebench-flush-"  # flush barrier files, made and removed at the workspace's top; never recorded
SETTLE = 1.0  # seconds a file must stay unchanged before a file seen while it was written is described again
RECENT = 0.05  # an mtime this close to the moment a file was described: it may change again unseen (same tick)
RESCAN_CHUNK = 1000  # changes found by a rescan go to the sink in batches of this many
LOST = "found by a rescan after file events were lost"
BEFORE_SCORING = "found by the rescan before a scoring"
SETTLED = "recorded again once it stopped changing"


@dataclass(frozen=True)
class FileChange:
    event: str  # created | modified | deleted | moved
    path: str  # relative to the workspace
    size: int | None = None
    sha256: str | None = None
    dest: str | None = None  # for moves
    diff: str | None = None
    diff_truncated: int = 0
    events: int = 1  # raw events coalesced into this change
    note: str | None = None

    def summary(self) -> str:
        size = "" if self.size is None else f" ({human_size(self.size)})"
        where = f"{self.path} -> {self.dest}" if self.dest else self.path
        return f"{self.event} {where}{size}"

    def record(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None and v != 0 or k in ("event", "path")}


def human_size(n: int) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000  # type: ignore[assignment]
    return f"{n} B"


def is_ignored(rel: str, patterns: tuple[str, ...] = DEFAULT_IGNORE) -> bool:
    """A pattern with a slash matches a path from the workspace root (``assets/``, ``a/b``);
    one without matches any path component by glob (``*.pyc``, ``__pycache__``)."""
    if rel.startswith(MARKER) and "/" not in rel:
        return True
    parts = rel.split("/")
    for pat in patterns:
        if "/" in pat:
            anchored = pat.rstrip("/")
            if rel == anchored or rel.startswith(anchored + "/"):
                return True
        elif any(fnmatch.fnmatch(part, pat) for part in parts):
            return True
    return False


class _Ignore:
    """The ignore rules of :func:`is_ignored`, compiled, for walks over many files: a name is
    matched against the unanchored patterns once, where its folder was checked already."""

    def __init__(self, patterns: tuple[str, ...]) -> None:
        names = [p for p in patterns if "/" not in p]
        self.names = re.compile("|".join(fnmatch.translate(p) for p in names)) if names else None
        self.anchored = tuple(p.rstrip("/") for p in patterns if "/" in p)

    def __call__(self, rel: str, name: str) -> bool:
        if self.names is not None and self.names.match(name):
            return True
        if name.startswith(MARKER) and "/" not in rel:
            return True
        return any(rel == a or rel.startswith(a + "/") for a in self.anchored)


def stat_walk(root: Path, ignore: tuple[str, ...] = DEFAULT_IGNORE) -> dict[str, os.stat_result]:
    """Every entry below ``root`` that is not a folder and that the ignore rules keep, with its
    ``lstat`` (links are not followed): what a rescan compares with the recorded state."""
    skip = _Ignore(ignore)
    found: dict[str, os.stat_result] = {}
    todo = [("", str(root))]
    while todo:
        reldir, path = todo.pop()
        try:
            entries = list(os.scandir(path))
        except OSError:
            continue  # removed meanwhile, or unreadable: its files count as gone
        for entry in entries:
            rel = f"{reldir}/{entry.name}" if reldir else entry.name
            if skip(rel, entry.name):
                continue
            try:
                if entry.is_dir(follow_symlinks=False):
                    todo.append((rel, entry.path))
                else:
                    found[rel] = entry.stat(follow_symlinks=False)
            except OSError:
                continue
    return found


class _LostEvents(logging.Handler):
    """Hears watchdog's observer say that events were lost ("Inotify queue overflowed; filesystem
    events were lost", a watch it could not rebuild) and tells the watchers of this process."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.watchers: "set[FileWatcher]" = set()
        # not ``self.lock``: that is logging.Handler's own, held while emit runs (taking it again hangs
        # watchdog's inotify thread for good)
        self.watchers_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        if not record.name.startswith("watchdog.observers"):
            return
        try:
            text = record.getMessage()
        except Exception:  # noqa: BLE001 - a record that cannot be formatted still says something was wrong
            text = str(record.msg)
        with self.watchers_lock:
            watchers = list(self.watchers)
        for w in watchers:
            w.lost_events(text)


_LOST_EVENTS = _LostEvents()
logging.getLogger("watchdog").addHandler(_LOST_EVENTS)


def _read_text(path: Path, size: int) -> str | None:
    if size > TEXT_LIMIT:
        return None
    try:
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data:
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def describe(path: Path) -> dict[str, Any] | None:
    """Size, mtime and sha256 of a file (no hash above HASH_LIMIT; links and others by kind)."""
    try:
        st = path.lstat()
    except OSError:
        return None
    if not path.is_file() or path.is_symlink():
        return {"size": st.st_size, "mtime": st.st_mtime, "sha256": None, "kind": "link" if path.is_symlink() else "other"}
    sha = sha256_file(path) if st.st_size <= HASH_LIMIT else None
    return {"size": st.st_size, "mtime": st.st_mtime, "sha256": sha}


def scan(root: Path, ignore: tuple[str, ...] = DEFAULT_IGNORE) -> dict[str, dict[str, Any]]:
    """Every file below root that the ignore rules keep, described."""
    found: dict[str, dict[str, Any]] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        reldir = os.path.relpath(dirpath, root)
        reldir = "" if reldir == "." else reldir
        dirnames[:] = [d for d in dirnames if not is_ignored(f"{reldir}/{d}".lstrip("/"), ignore)]
        for name in filenames:
            rel = f"{reldir}/{name}".lstrip("/")
            if is_ignored(rel, ignore):
                continue
            desc = describe(root / rel)
            if desc is not None:
                found[rel] = desc
    return found


FINGERPRINT_DOMAIN = b"rebench-tui attempt fingerprint v1\n"


def fingerprint(files: dict[str, dict[str, Any]]) -> tuple[str, int]:
    """The attempt fingerprint of a set of files: (sha256 hex, number of files).

    ``files`` is a file state as the file recorder keeps it (``files.json``; :func:`scan` gives
    the same shape): workspace-relative path -> ``{size, mtime, sha256}``, ``kind`` for links and
    other non-files. What is in it: EVERY file the recorder tracks in the participant's home, the
    solution folder and everything else (trained weights such as ``~/fixed_model.pth``,
    ``~/finetuned_model/``, answers, scripts, data the participant made): a scorer may read any
    of them. Left out are only the recorder's ignore patterns (:data:`DEFAULT_IGNORE`: caches
    rebuilt from the files that are in, such as ``__pycache__``/``*.pyc``/``.triton``/``.cache``,
    editor and shell leftovers, ``.git``) and the read-only ``assets/`` mount, which is the same
    for every attempt of a session.

    Each file enters as its path and its content's sha256. A file with no hash enters as what
    the recorder knows of it: a link or other non-file by kind and size (its target is not
    read), a regular file above the hash limit (2 GB) by size and mtime. Modes and owners do not
    enter. Paths are sorted by their bytes and every field is length-prefixed, so no two states
    give the same stream. The result does not depend on where the state came from (the recorder
    here, its child process, a remote engine's poller, or a scan of the folder)."""
    h = hashlib.sha256(FINGERPRINT_DOMAIN)

    def put(b: bytes) -> None:
        h.update(len(b).to_bytes(8, "big"))
        h.update(b)

    entries = sorted((rel.encode("utf-8", "surrogateescape"), rel) for rel in files)
    for raw, rel in entries:
        desc = files[rel] or {}
        if desc.get("sha256"):
            token = f"sha256:{desc['sha256']}"
        elif desc.get("kind"):
            token = f"{desc['kind']}:size={desc.get('size')}"
        else:
            token = f"unhashed:size={desc.get('size')}:mtime={desc.get('mtime')!r}"
        put(raw)
        put(token.encode("ascii", "backslashreplace"))
    return h.hexdigest(), len(entries)


class _Handler(FileSystemEventHandler):
    def __init__(self, q: "queue.Queue[tuple[str, str, str | None]]", root: str,
                 markers: dict[str, threading.Event]) -> None:
        self.q = q
        self.marker_prefix = os.path.join(root, MARKER)
        self.markers = markers

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type in ("opened", "closed_no_write"):
            return
        src = os.fsdecode(event.src_path)
        if src.startswith(self.marker_prefix):
            seen = self.markers.get(src)
            if seen is not None:
                seen.set()  # every event queued before the marker's has been delivered
            return
        # closed-after-write and attribute changes may carry new content: the hash decides
        kind = event.event_type if event.event_type in ("created", "deleted", "moved") else "modified"
        dest = getattr(event, "dest_path", None) or None
        self.q.put((kind, src, os.fsdecode(dest) if dest else None))


class FileWatcher:
    def __init__(self, root: Path, sink: Callable[[list[FileChange], int], None], state_path: Path,
                 ignore: tuple[str, ...] = DEFAULT_IGNORE, interval: float = 0.2,
                 redact: Callable[[str], str] | None = None, on_error: Callable[[Exception], None] | None = None,
                 on_rescan: Callable[[dict[str, Any]], None] | None = None) -> None:
        """``sink(changes, raw_event_count)`` records a batch; it is called from the watcher's thread.
        ``on_error`` hears of a batch that could not be recorded (a full disk); the watcher keeps going.
        ``on_rescan`` hears what a rescan found (``reason``, ``found``, ``files``, ``seconds``), after
        its changes went to the sink, when events had been lost or the rescan found differences."""
        self.root = root.resolve()
        self.sink = sink
        self.state_path = state_path
        self.ignore = ignore
        self.interval = interval
        self.redact = redact or (lambda t: t)  # blob copies of the participant's files keep no secret value
        self._q: "queue.Queue[tuple[str, str, str | None]]" = queue.Queue()
        self._known: dict[str, dict[str, Any]] = {}  # rel -> {size, mtime, sha256}
        self._blobs = state_path.parent / "blobs"  # small text files by sha256, for diffs across restarts
        # While the watcher drains a burst, new versions' texts stay here (sha256 -> redacted text)
        # and only the versions the saved state names are written to blobs/, when it is saved: a
        # log appended to 1,000 times a second needs one blob a second, not 1,000 files.
        self._defer_blobs = False
        self._deferred: dict[str, str] = {}
        self._deferred_bytes = 0
        self._observer: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by stop() and flush(): drain now rather than at the next interval
        self._flushed = threading.Event()
        self._markers: dict[str, threading.Event] = {}  # flush barriers waiting for their own event
        self._marker_ids = itertools.count(1)
        self._last_state_save = 0.0
        self._dirty = False  # changes recorded since the state was last saved
        self.total_events = 0
        self.total_changes = 0
        self.on_error = on_error
        self.errors = 0
        self._caught_up = False  # the state (``_known``) describes the workspace: set by the first catch-up
        self.on_rescan = on_rescan
        self._unsettled: dict[str, list[Any]] = {}  # rel -> [when to look again, (size, mtime) last seen]
        self._rescan_reason: str | None = None  # set when events were lost: the loop rescans
        self._rescan_cond = threading.Condition()
        self._rescans_asked = 0  # flushes that asked for a rescan, and rescans done (flush waits on these)
        self._rescans_done = 0
        self.rescans: list[dict[str, Any]] = []  # what each rescan found (reason, found, seconds)
        self.lost = 0  # times watchdog said events were lost

    # -- state ----------------------------------------------------------------------------
    def _rel(self, path: str) -> str | None:
        root = str(self.root)
        return path[len(root) + 1:] if path.startswith(root + os.sep) else None

    def _describe(self, rel: str) -> dict[str, Any] | None:
        """:func:`describe`, noting a file that may still be changing (it moved while it was
        hashed, or its mtime is of this very moment): it is looked at again once it is quiet."""
        began = time.time()
        desc = describe(self.root / rel)
        if desc is None or desc.get("kind") is not None:
            self._unsettled.pop(rel, None)
            return desc
        try:
            st = os.lstat(self.root / rel)
            after = (st.st_size, st.st_mtime)
        except OSError:
            after = None
        moved = after != (desc["size"], desc["mtime"])
        if moved or began - RECENT < desc["mtime"] < began + SETTLE:
            self._unsettled[rel] = [time.monotonic() + SETTLE, after]
        else:
            self._unsettled.pop(rel, None)
        return desc

    def _text(self, rel: str, desc: dict[str, Any]) -> str | None:
        """The file's text where it is small UTF-8 text, for diffs and blobs."""
        return _read_text(self.root / rel, desc["size"])

    def scan(self) -> dict[str, dict[str, Any]]:
        return scan(self.root, self.ignore)

    def _save_state(self, force: bool = False) -> None:
        """Save what has been recorded: at most once a second (a change recorded in the last second
        before a crash may be recorded again, marked "changed while no watcher ran"), and always
        within a second of the last recorded change, even if nothing changes after it."""
        now = time.monotonic()
        if not force and (not self._dirty or now - self._last_state_save < 1.0):
            return
        self._last_state_save = now
        self._dirty = False
        self._write_deferred_blobs()  # before the state that names them
        try:
            fd, tmp = tempfile.mkstemp(prefix=".files.", dir=self.state_path.parent)
        except OSError:
            return  # a full or read-only disk: the state is a cache of the audit log; saved next time
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self._known, fh)
            os.replace(tmp, self.state_path)
        except OSError:
            Path(tmp).unlink(missing_ok=True)

    def _load_state(self) -> dict[str, dict[str, Any]] | None:
        """The last saved state; None if there is none (a first start), {} for an empty workspace."""
        try:
            return json.loads(self.state_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    def _blob_put(self, sha: str | None, text: str | None) -> None:
        if sha is None or text is None:
            return
        if self._defer_blobs:
            if sha not in self._deferred:
                self._deferred[sha] = self.redact(text)
                self._deferred_bytes += len(text)
            return
        self._blob_write(sha, self.redact(text))

    def _write_deferred_blobs(self) -> None:
        """Write the deferred texts of the versions the state names now; forget the others."""
        current = {d.get("sha256") for d in self._known.values()}
        for sha, text in self._deferred.items():
            if sha in current:
                self._blob_write(sha, text)
        self._deferred.clear()
        self._deferred_bytes = 0

    def _blob_write(self, sha: str, redacted: str) -> None:
        path = self._blobs / sha[:2] / sha
        if not path.exists():
            tmp = path.with_suffix(".part")
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp.write_text(redacted, encoding="utf-8")
                os.replace(tmp, path)
            except OSError:  # only later diffs lose their base; the change itself is still recorded
                tmp.unlink(missing_ok=True)

    def _blob_get(self, sha: str | None) -> str | None:
        if sha is None:
            return None
        if sha in self._deferred:
            return self._deferred[sha]
        try:
            return (self._blobs / sha[:2] / sha).read_text(encoding="utf-8")
        except OSError:
            return None

    # -- changes --------------------------------------------------------------------------
    def _change(self, event: str, rel: str, dest: str | None = None, events: int = 1, note: str | None = None) -> FileChange | None:
        target = dest or rel
        prev = self._known.get(rel)
        old_text = self._blob_get(prev.get("sha256")) if prev else None
        desc = None if event == "deleted" else self._describe(target)
        if event != "deleted" and desc is None:
            event = "deleted"  # gone again before we looked
        if event == "deleted":
            self._unsettled.pop(rel, None)
            if prev is None:
                return None  # created and deleted inside one batch, or never seen: nothing to record
            self._known.pop(rel, None)
            diff = None
            if old_text is not None:
                diff = "".join(difflib.unified_diff(old_text.splitlines(True), [], f"a/{rel}", "/dev/null"))
            return self._finish(FileChange("deleted", rel, events=events, note=note), diff)
        if dest:
            self._known.pop(rel, None)
        if event == "modified" and prev is not None and desc.get("sha256") and prev.get("sha256") == desc.get("sha256"):
            return None  # touched, not changed
        if (event == "modified" and prev is not None and not desc.get("sha256") and not prev.get("sha256")
                and all(prev.get(k) == desc.get(k) for k in ("size", "mtime", "kind"))):
            return None  # unhashed (a link, or above the hash limit): the same size and mtime are the same file
        if event == "modified" and prev is None:
            event = "created"
        self._known[target] = desc
        new_text = self._text(target, desc) if desc.get("kind") is None else None
        self._blob_put(desc.get("sha256"), new_text)
        if event == "created":
            old_text = ""
        diff = None
        if new_text is not None and old_text is not None and (event != "moved" or old_text != new_text):
            diff = "".join(difflib.unified_diff(old_text.splitlines(True), new_text.splitlines(True),
                                                "/dev/null" if event == "created" else f"a/{rel}", f"b/{target}"))
        if note is None and not (desc.get("sha256") or desc.get("kind")):
            note = f"larger than {human_size(HASH_LIMIT)}: recorded by size and mtime only"
        return self._finish(FileChange(event, rel, size=desc["size"], sha256=desc.get("sha256"), dest=dest,
                                       events=events, note=note), diff)

    @staticmethod
    def _finish(change: FileChange, diff: str | None) -> FileChange:
        if not diff:
            return change
        cut = max(0, len(diff) - DIFF_LIMIT)
        return FileChange(**{**asdict(change), "diff": diff[:DIFF_LIMIT], "diff_truncated": cut})

    def _drain(self) -> None:
        raw: list[tuple[str, str, str | None]] = []
        try:
            while True:
                raw.append(self._q.get_nowait())
        except queue.Empty:
            pass
        if not raw:
            return
        # Coalesce: one change per path, in first-seen order; moves kept as moves.
        order: list[str] = []
        merged: dict[str, tuple[str, str | None, int]] = {}
        for kind, src, dest in raw:
            rel = self._rel(src)
            drel = self._rel(dest) if dest else None
            if rel is None:
                continue
            if kind == "moved" and drel is not None and is_ignored(rel, self.ignore) and not is_ignored(drel, self.ignore):
                kind, rel, drel = "created", drel, None  # e.g. an editor's swap file renamed into place
            if is_ignored(rel, self.ignore) and (drel is None or is_ignored(drel, self.ignore)):
                continue
            if kind == "moved" and drel is not None and is_ignored(drel, self.ignore):
                kind, drel = "deleted", None
            key = rel
            if key not in merged:
                order.append(key)
                merged[key] = (kind, drel, 1)
            else:
                prev_kind, prev_dest, n = merged[key]
                if prev_kind == "created" and kind == "modified":
                    kind = "created"
                merged[key] = (kind, drel or prev_dest, n + 1)
        changes: list[FileChange] = []
        self._defer_blobs = True
        try:
            for rel in order:
                kind, drel, n = merged[rel]
                ch = self._change("moved" if drel else kind, rel, drel, events=n)
                if ch is not None:
                    changes.append(ch)
        finally:
            self._defer_blobs = False
        if self._deferred_bytes > DEFERRED_LIMIT:
            self._write_deferred_blobs()
        self.total_events += len(raw)
        if changes:
            self.total_changes += len(changes)
            self.sink(changes, len(raw))
            self._dirty = True  # saved by the loop right after this drain (or by stop)

    def _drain_reporting(self) -> None:
        try:
            self._drain()
        except Exception as exc:  # noqa: BLE001 - the watcher must outlive a full disk; the rows wait in the log's queue
            self.errors += 1
            if self.on_error is not None:
                self.on_error(exc)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.interval)
            self._wake.clear()
            self._drain_reporting()
            self._settle_reporting()
            self._save_state()  # a change recorded just before a quiet spell is saved within a second
            self._flushed.set()
        self._drain_reporting()
        self._save_state(force=True)

    # -- lost events and files still being written ------------------------------------------
    def lost_events(self, why: str) -> None:
        """Events were lost (watchdog said so; called from its thread): rescan soon."""
        self.lost += 1
        with self._rescan_cond:
            self._rescan_reason = why
        self._wake.set()

    def _settle_reporting(self) -> None:
        try:
            self._settle()
        except Exception as exc:  # noqa: BLE001 - as a drain's: reported, the watcher keeps going
            self.errors += 1
            if self.on_error is not None:
                self.on_error(exc)

    def _settle(self) -> None:
        """Rescan where events were lost or a flush asked for it; look again at files that were
        still changing when described, once they have been quiet for ``SETTLE`` seconds."""
        with self._rescan_cond:
            reason, self._rescan_reason = self._rescan_reason, None
            asked = self._rescans_asked
        if reason is not None or asked > self._rescans_done:
            lost = reason is not None
            self._drain()  # events that did arrive first, so a rescan records only what was lost
            self._rescan(LOST if lost else BEFORE_SCORING, reason or "before a scoring", lost)
            with self._rescan_cond:
                self._rescans_done = max(self._rescans_done, asked)
                self._rescan_cond.notify_all()
        if not self._unsettled:
            return
        now = time.monotonic()
        changes: list[FileChange] = []
        for rel, entry in list(self._unsettled.items()):
            if entry[0] > now:
                continue
            try:
                st = os.lstat(self.root / rel)
                seen = (st.st_size, st.st_mtime)
            except OSError:
                seen = None
            if seen != entry[1]:  # still changing: wait until it has been quiet for SETTLE
                entry[0], entry[1] = now + SETTLE, seen
                continue
            del self._unsettled[rel]
            ch = self._change("modified" if seen is not None else "deleted", rel, note=SETTLED)
            if ch is not None:
                changes.append(ch)
        self._emit_changes(changes)

    def _emit_changes(self, changes: list[FileChange]) -> None:
        for at in range(0, len(changes), RESCAN_CHUNK):
            chunk = changes[at:at + RESCAN_CHUNK]
            self.total_changes += len(chunk)
            self.sink(chunk, 0)
            self._dirty = True

    def _rescan(self, note: str, reason: str, lost: bool) -> dict[str, Any]:
        """Compare the workspace with the state: files whose size or mtime differ, or that were
        still changing when described, are described again; new and gone files are recorded.
        Every difference is recorded with ``note``."""
        began = time.monotonic()
        found = stat_walk(self.root, self.ignore)
        changes: list[FileChange] = []
        self._defer_blobs = True
        try:
            for rel in sorted(found.keys() | self._known.keys()):
                st, prev = found.get(rel), self._known.get(rel)
                if st is None:
                    ch = self._change("deleted", rel, note=note)
                elif prev is None:
                    ch = self._change("created", rel, note=note)
                elif prev.get("size") != st.st_size or prev.get("mtime") != st.st_mtime or rel in self._unsettled:
                    ch = self._change("modified", rel, note=note)
                else:
                    continue
                if ch is not None:
                    changes.append(ch)
        finally:
            self._defer_blobs = False
        self._emit_changes(changes)
        info = {"reason": reason, "lost": lost, "found": len(changes), "files": len(found),
                "seconds": round(time.monotonic() - began, 3)}
        self.rescans.append(info)
        if (lost or changes) and self.on_rescan is not None:
            self.on_rescan(info)
        return info

    # -- lifecycle ------------------------------------------------------------------------
    def catch_up(self) -> list[FileChange]:
        """Record what changed since the last recorded state (for example while the app was closed).

        The first run has no recorded state: the workspace as found is the baseline.
        """
        saved = self._load_state()
        first, previous = saved is None, saved or {}
        current = self.scan()
        changes: list[FileChange] = []
        self._known = dict(previous)
        for rel in sorted(set(previous) | set(current)):
            before, after = previous.get(rel), current.get(rel)
            ch = None
            if before is not None and after is None:
                ch = self._change("deleted", rel, note="changed while no watcher ran")
            elif before is None and after is not None and not first:
                ch = self._change("created", rel, note="changed while no watcher ran")
            elif before and after and (before.get("sha256") != after.get("sha256") or before.get("size") != after.get("size")):
                ch = self._change("modified", rel, note="changed while no watcher ran")
            if ch is not None:
                changes.append(ch)
        self._known = current
        for desc_rel, desc in current.items():
            self._blob_put(desc.get("sha256"), self._text(desc_rel, desc))
        if changes:
            self.sink(changes, 0)
        self._save_state(force=True)
        self._caught_up = True
        return changes

    def state_fingerprint(self, timeout: float = 10.0) -> tuple[str, int] | None:
        """The attempt fingerprint (:func:`fingerprint`) of the files as this watcher knows them now
        (call :meth:`flush` first); None while it has no state yet (before its first catch-up)."""
        if not self._caught_up:
            return None
        return fingerprint(dict(self._known))  # a plain dict's copy is one step under the GIL

    def start(self) -> None:
        self.catch_up()
        with _LOST_EVENTS.watchers_lock:
            _LOST_EVENTS.watchers.add(self)
        self._observer = Observer()
        self._observer.schedule(_Handler(self._q, str(self.root), self._markers), str(self.root), recursive=True)
        self._observer.start()
        self._thread = threading.Thread(target=self._loop, name="rebench-file-watcher", daemon=True)
        self._thread.start()

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _barrier(self, wait: float) -> None:
        """Return once every file event the kernel queued before this call has reached the queue.

        A marker file is made at the workspace's top and the call waits for the marker's own
        event: inotify delivers events in order, so everything before it has arrived (a few ms,
        where a fixed settle of 50 ms guessed before). Where no marker can be made (a read-only
        workspace) it falls back to that settle. The marker is removed at once and never recorded.
        The exception: watchdog holds a move-from event with no move-to (a file moved out of
        the workspace) up to 0.5 s while it looks for the pair."""
        if self._observer is None:
            return
        path = os.path.join(str(self.root), f"{MARKER}{os.getpid()}-{next(self._marker_ids)}")
        seen = self._markers[path] = threading.Event()
        try:
            os.close(os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except OSError:
            self._markers.pop(path, None)
            time.sleep(0.05)
            return
        try:
            seen.wait(wait)
        finally:
            self._markers.pop(path, None)
            try:
                os.unlink(path)
            except OSError:
                pass

    def flush(self, timeout: float = 5.0, rescan: bool = False) -> bool:
        """Wait until events seen so far are recorded (before a scoring, tests, and before closing);
        with ``rescan`` (before a scoring), also until a rescan that began after this call is
        (whatever events were lost, the files as they are now are in the record). Returns whether
        that happened within ``timeout``."""
        deadline = time.monotonic() + timeout
        self._barrier(min(1.0, timeout))
        if rescan:
            with self._rescan_cond:
                self._rescans_asked += 1
                target = self._rescans_asked
            self._wake.set()
            with self._rescan_cond:
                while self._rescans_done < target:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self.alive:
                        return False
                    self._rescan_cond.wait(min(left, 0.5))
        while time.monotonic() < deadline:
            self._flushed.clear()
            self._wake.set()  # drain now: a scoring waits on this
            if self._flushed.wait(timeout=max(0.0, deadline - time.monotonic())) and self._q.empty():
                return True
        return False

    def stop(self) -> None:
        with _LOST_EVENTS.watchers_lock:
            _LOST_EVENTS.watchers.discard(self)
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
            self._observer = None
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None
