"""Lost file events are found again: a flood past the kernel's inotify queue, a scoring's flush,
and a file still being written when it was described. Real folders, real inotify, a real child."""

from __future__ import annotations

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from rebench_tui.session.files import FileRecorder, FileWatcher
from rebench_tui.session.files.workspace import BEFORE_SCORING, LOST, SETTLED


class Sink:
    def __init__(self) -> None:
        self.changes: list = []
        self.lock = threading.Lock()

    def __call__(self, changes, raw) -> None:
        with self.lock:
            self.changes.extend(changes)

    def created(self) -> dict:
        with self.lock:
            return {c.path: c for c in self.changes if c.event == "created"}


def _queue_limit() -> int:
    try:
        return int(Path("/proc/sys/fs/inotify/max_queued_events").read_text())
    except (OSError, ValueError):
        return 16384


def _wait(pred, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.25)
    return pred()


@pytest.mark.slow  # tens of thousands of files past the kernel's queue: 5-16 s here
def test_a_flood_past_the_kernel_queue_is_rescanned_and_every_file_has_a_row(tmp_path):
    """The recorder's child is stopped (as a loaded host stalls it) while more files are made than
    the kernel queues events for; when it runs again the kernel has dropped events and said so.
    Without any flush, every file ends with a row, the ones events missed noted as such."""
    ws = tmp_path / "ws"
    ws.mkdir()
    sink = Sink()
    rescans: list[dict] = []
    r = FileRecorder(ws, sink, tmp_path / "state" / "files.json", interval=0.05, on_rescan=rescans.append)
    r.start()
    n = _queue_limit() + 4000
    big = 8 * 1024 * 1024
    try:
        os.kill(r._proc.pid, signal.SIGSTOP)
        try:
            for i in range(n):
                (ws / f"f{i:05d}.txt").write_bytes(b"%d\n" % i)
            with open(ws / "weights.bin", "wb") as f:
                for _ in range(8):
                    f.write(os.urandom(big // 8))
        finally:
            os.kill(r._proc.pid, signal.SIGCONT)
        assert _wait(lambda: len(sink.created()) >= n + 1, 120), f"{len(sink.created())} of {n + 1} files have a row"
    finally:
        r.stop()
    created = sink.created()
    assert {f"f{i:05d}.txt" for i in range(n)} <= created.keys()
    assert created["weights.bin"].size == big or any(
        c.path == "weights.bin" and c.size == big for c in sink.changes)
    lost = [x for x in rescans if x["lost"]]
    assert lost and "overflow" in lost[0]["reason"].lower(), rescans
    assert any(c.note == LOST for c in created.values())
    assert len({c.path for c in sink.changes if c.event == "created"}) == len(created)  # no file twice as created


def _watcher_without_events(tmp_path: Path, sink: Sink) -> tuple[Path, FileWatcher]:
    """A watcher whose inotify observer is gone: every change it records, a rescan found."""
    root = tmp_path / "ws"
    root.mkdir()
    w = FileWatcher(root, sink, tmp_path / "files.json", interval=0.05)
    w.start()
    w._observer.stop()
    w._observer.join(timeout=5)
    return root, w


def test_the_flush_before_a_scoring_records_what_no_event_said(tmp_path):
    sink = Sink()
    root, w = _watcher_without_events(tmp_path, sink)
    try:
        (root / "solution.py").write_text("def f():\n    return 1\n")
        (root / "data").mkdir()
        (root / "data" / "x.bin").write_bytes(b"\0" * 100)
        assert w.flush(timeout=10, rescan=False)
        assert sink.changes == []  # events alone saw nothing
        assert w.flush(timeout=10, rescan=True)
        got = {c.path: c for c in sink.changes}
        assert set(got) == {"solution.py", "data/x.bin"}
        assert all(c.note == BEFORE_SCORING and c.event == "created" for c in got.values())
        assert "+    return 1" in got["solution.py"].diff
        (root / "solution.py").unlink()
        assert w.flush(timeout=10, rescan=True)
        assert sink.changes[-1].event == "deleted" and sink.changes[-1].path == "solution.py"
        before = len(sink.changes)
        assert w.flush(timeout=10, rescan=True)
        assert len(sink.changes) == before  # nothing changed, nothing recorded
    finally:
        w.stop()
    assert [x["found"] for x in w.rescans] == [2, 1, 0]


def test_a_file_described_while_it_was_written_is_recorded_again_once_quiet(tmp_path):
    sink = Sink()
    root, w = _watcher_without_events(tmp_path, sink)
    chunk, chunks = 256 * 1024, 24
    started = threading.Event()

    def write() -> None:
        with open(root / "ckpt.pt", "wb") as f:
            for i in range(chunks):
                f.write(os.urandom(chunk))
                f.flush()
                if i == 2:
                    started.set()
                time.sleep(0.05)

    t = threading.Thread(target=write)
    t.start()
    try:
        assert started.wait(10)
        assert w.flush(timeout=10, rescan=True)  # describes the file part-written
        first = [c for c in sink.changes if c.path == "ckpt.pt"]
        assert first and first[0].size < chunk * chunks
        t.join()
        # returns as soon as it is recorded; 15 s was too short once, in 3 test processes on 2 slow cores
        assert _wait(lambda: any(c.note == SETTLED for c in sink.changes), 60)
    finally:
        t.join()
        w.stop()
    last = [c for c in sink.changes if c.path == "ckpt.pt"][-1]
    assert last.size == chunk * chunks and last.note == SETTLED


def test_a_session_says_in_its_audit_log_when_a_rescan_found_changes(toy_session):
    from rebench_tui.trajectory.audit import read_entries

    s = toy_session()
    w = s.start_watching(interval=0.05, separate_process=False)
    w._observer.stop()
    w._observer.join(timeout=5)
    (s.workspace / "solution" / "answer.txt").write_text("42\n")
    assert w.flush(timeout=10, rescan=True)
    s.audit.flush()
    rows = read_entries(s.folder / "audit.jsonl")
    notes = [r for r in rows if (r["content"].get("attributes") or {}).get("title") == "recorder"]
    assert notes and "found 1 change" in notes[-1]["content"]["content"][0], notes
    files = [r["content"]["content"][1] for r in rows if (r["content"].get("attributes") or {}).get("title") == "file"]
    assert any(f["path"] == "solution/answer.txt" and f.get("note") == BEFORE_SCORING for f in files), files
