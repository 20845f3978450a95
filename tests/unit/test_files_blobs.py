"""Diff bases during a burst: intermediate versions stay in memory; the versions the saved state
names are on disk before the state, so diffs still work across a restart."""

from __future__ import annotations

import hashlib
import threading

from rebench_tui.session.files import watcher as files_mod
from rebench_tui.session.files import FileWatcher


def make(tmp_path, root):
    got = []
    lock = threading.Lock()

    def sink(changes, raw):
        with lock:
            got.extend(changes)

    return FileWatcher(root, sink, tmp_path / "files.json"), got


def drain_appends(w, root, name, lines):
    for line in lines:
        with open(root / name, "a") as fh:
            fh.write(line)
        w._q.put(("modified", str(root / name), None))
        w._drain()  # one drain per version: each is a change with its own diff


def blobs(tmp_path) -> set[str]:
    return {p.name for p in (tmp_path / "blobs").rglob("*") if p.is_file()}


def test_burst_diffs_are_exact_and_only_current_versions_reach_disk(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "train.log").write_text("start\n")
    w, got = make(tmp_path, root)
    w.catch_up()
    w._last_state_save = 10**12  # no periodic save during the burst
    drain_appends(w, root, "train.log", [f"step {i}\n" for i in range(5)])
    assert [c.event for c in got] == ["modified"] * 5
    for i, c in enumerate(got):  # every diff is against the version just before it
        assert f"+step {i}\n" in c.diff and c.diff.count("\n+") == 1 + 1  # the +++ header and one added line
    before = blobs(tmp_path)
    assert len(w._deferred) == 5  # intermediate versions in memory, not on disk
    w._save_state(force=True)
    final_sha = hashlib.sha256((root / "train.log").read_bytes()).hexdigest()
    assert blobs(tmp_path) - before == {final_sha}  # only the version the state names
    assert w._deferred == {}


def test_restart_diffs_against_the_last_saved_version(tmp_path):
    root = tmp_path / "ws"
    root.mkdir()
    (root / "a.txt").write_text("one\n")
    w, _got = make(tmp_path, root)
    w.start()
    (root / "a.txt").write_text("one\ntwo\n")
    w.flush()
    w.stop()  # saves the state and the blob of "one\ntwo\n"
    (root / "a.txt").write_text("one\ntwo\nthree\n")
    w2, got2 = make(tmp_path, root)
    w2.catch_up()
    (change,) = got2
    assert change.event == "modified" and "+three\n" in change.diff and "+two" not in change.diff


def test_memory_cap_writes_current_versions_early(tmp_path, monkeypatch):
    monkeypatch.setattr(files_mod, "DEFERRED_LIMIT", 10)
    root = tmp_path / "ws"
    root.mkdir()
    w, _got = make(tmp_path, root)
    w.catch_up()
    w._last_state_save = 10**12
    drain_appends(w, root, "big.txt", ["0123456789abcdef\n"])
    assert w._deferred == {}
    assert hashlib.sha256((root / "big.txt").read_bytes()).hexdigest() in blobs(tmp_path)
