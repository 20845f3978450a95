"""The file watcher on a real folder with real inotify events."""

import hashlib
import os
import threading

from rebench_tui.session.files import FileWatcher, is_ignored


class Sink:
    def __init__(self):
        self.batches = []
        self.lock = threading.Lock()

    def __call__(self, changes, raw):
        with self.lock:
            self.batches.append((changes, raw))

    @property
    def changes(self):
        return [c for b, _ in self.batches for c in b]


def watcher(tmp_path, **kw):
    root = tmp_path / "ws"
    root.mkdir(exist_ok=True)
    sink = Sink()
    w = FileWatcher(root, sink, tmp_path / "files.json", **kw)
    return root, sink, w


def test_create_modify_move_delete_are_recorded_with_hash_and_diff(tmp_path):
    root, sink, w = watcher(tmp_path)
    w.start()
    try:
        (root / "a.py").write_text("x = 1\n")
        w.flush()
        (root / "a.py").write_text("x = 2\n")
        w.flush()
        os.rename(root / "a.py", root / "b.py")
        w.flush()
        (root / "b.py").unlink()
        w.flush()
    finally:
        w.stop()
    ch = sink.changes
    assert [c.event for c in ch] == ["created", "modified", "moved", "deleted"]
    assert ch[0].sha256 == hashlib.sha256(b"x = 1\n").hexdigest() and ch[0].size == 6
    assert "+x = 1" in ch[0].diff
    assert "-x = 1" in ch[1].diff and "+x = 2" in ch[1].diff
    assert ch[2].path == "a.py" and ch[2].dest == "b.py"
    assert ch[3].path == "b.py"


def test_binary_files_are_hashed_not_diffed(tmp_path):
    root, sink, w = watcher(tmp_path)
    w.start()
    try:
        (root / "model.pth").write_bytes(os.urandom(4096) + b"\0")
        w.flush()
    finally:
        w.stop()
    (c,) = sink.changes
    assert c.diff is None and c.sha256 and c.size == 4097


def test_ignore_rules():
    assert is_ignored("solution/__pycache__/x.cpython-311.pyc")
    assert is_ignored(".cache/triton/abc")
    assert is_ignored("a/.git/objects/12")
    assert is_ignored("notes.txt.swp")
    assert is_ignored(".bash_history")  # the shell key's bash writes it on exit: not a new attempt
    assert not is_ignored("solution/solution.py")
    assert not is_ignored("cache.py")


def test_caches_are_not_recorded(tmp_path):
    root, sink, w = watcher(tmp_path)
    w.start()
    try:
        (root / "__pycache__").mkdir()
        (root / "__pycache__" / "m.pyc").write_bytes(b"\0\1")
        (root / "real.txt").write_text("kept")
        w.flush()
    finally:
        w.stop()
    assert [c.path for c in sink.changes] == ["real.txt"]


def test_a_flood_is_coalesced_but_nothing_is_dropped(tmp_path):
    root, sink, w = watcher(tmp_path, interval=0.2)
    w.start()
    try:
        (root / "ckpt").mkdir()
        for i in range(3000):
            (root / "ckpt" / f"f{i}.bin").write_bytes(b"%d" % i)
        for i in range(0, 3000, 3):
            (root / "ckpt" / f"f{i}.bin").write_bytes(b"changed %d" % i)
        w.flush(timeout=20)
    finally:
        w.stop()
    paths = {c.path for c in sink.changes}
    assert paths == {f"ckpt/f{i}.bin" for i in range(3000)}
    assert len(sink.batches) < 100  # batched, not one call per event
    assert sum(raw for _, raw in sink.batches) >= 3000


def test_touch_without_change_is_not_a_change(tmp_path):
    root, sink, w = watcher(tmp_path)
    (root / "same.txt").write_text("same")
    w.start()
    try:
        os.utime(root / "same.txt")
        (root / "same.txt").write_text("same")
        w.flush()
    finally:
        w.stop()
    assert sink.changes == []


def test_catch_up_records_changes_made_while_no_watcher_ran(tmp_path):
    root, sink, w = watcher(tmp_path)
    (root / "keep.txt").write_text("v1\n")
    (root / "gone.txt").write_text("bye\n")
    w.start()
    w.stop()
    assert sink.changes == []  # first run: the initial state is the baseline
    (root / "keep.txt").write_text("v2\n")
    (root / "gone.txt").unlink()
    (root / "new.txt").write_text("hi\n")
    root2, sink2, w2 = watcher(tmp_path)
    w2.start()
    w2.stop()
    got = {(c.event, c.path) for c in sink2.changes}
    assert got == {("modified", "keep.txt"), ("deleted", "gone.txt"), ("created", "new.txt")}
    assert all(c.note == "changed while no watcher ran" for c in sink2.changes)
    assert "+v2" in next(c for c in sink2.changes if c.path == "keep.txt").diff


def test_odd_file_names(tmp_path):
    root, sink, w = watcher(tmp_path)
    w.start()
    try:
        (root / "new\nline.txt").write_text("a")
        (root / ("long" * 60)).write_text("b")
        w.flush()
    finally:
        w.stop()
    assert {c.path for c in sink.changes} == {"new\nline.txt", "long" * 60}


# -- the attempt fingerprint ---------------------------------------------------------------------

def test_fingerprint_is_the_files_content_and_nothing_else():
    from rebench_tui.session.files import fingerprint

    a = {"solution/x.py": {"size": 3, "mtime": 1.0, "sha256": "a" * 64}, "notes.md": {"size": 1, "mtime": 2.0, "sha256": "b" * 64}}
    fp, n = fingerprint(a)
    assert n == 2 and len(fp) == 64
    # the order of the entries and a file's mtime (when it has a hash) do not enter
    b = {"notes.md": {"size": 1, "mtime": 9.0, "sha256": "b" * 64}, "solution/x.py": {"size": 3, "mtime": 5.0, "sha256": "a" * 64}}
    assert fingerprint(b) == (fp, 2)
    # content, a path, an added or removed file do
    assert fingerprint({**a, "solution/x.py": {"size": 3, "mtime": 1.0, "sha256": "c" * 64}})[0] != fp
    assert fingerprint({"solution/y.py": a["solution/x.py"], "notes.md": a["notes.md"]})[0] != fp
    assert fingerprint({**a, "extra": {"size": 0, "mtime": 1.0, "sha256": "d" * 64}}) [1] == 3
    assert fingerprint({"notes.md": a["notes.md"]})[0] != fp
    # no field runs into the next: a path that spells another entry is still another state
    assert fingerprint({"ab": {"sha256": "c" * 64}}) != fingerprint({"a": {"sha256": "bc" + "c" * 62}})
    # unhashed files: links by kind and size, files above the hash limit by size and mtime
    big = {"ckpt.pt": {"size": 3 * 1024**3, "mtime": 1.0, "sha256": None}}
    assert fingerprint(big) != fingerprint({"ckpt.pt": {**big["ckpt.pt"], "mtime": 2.0}})
    link = {"l": {"size": 4, "mtime": 1.0, "sha256": None, "kind": "link"}}
    assert fingerprint(link) == fingerprint({"l": {**link["l"], "mtime": 7.0}}) != fingerprint({"l": {**link["l"], "size": 5}})
    assert fingerprint({}) == fingerprint({}) and fingerprint({})[1] == 0
    # a name that is not UTF-8 (surrogate-escaped) is fingerprinted too
    assert fingerprint({"bad-\udcff.txt": {"sha256": "e" * 64}})[1] == 1


def test_the_watchers_state_fingerprint_is_the_folders(tmp_path):
    """After a flush the watcher's recorded state and a fresh scan of the folder agree, so a
    scoring fingerprinted by either source names the same attempt."""
    from rebench_tui.session.files import fingerprint, scan

    root, sink, w = watcher(tmp_path, interval=0.05)
    (root / "solution").mkdir()
    (root / "solution" / "x.py").write_text("x = 1\n")
    assert w.state_fingerprint() is None  # not started: no state yet
    w.start()
    try:
        first = w.state_fingerprint()
        assert first == fingerprint(scan(root)) and first[1] == 1
        (root / "solution" / "x.py").write_text("x = 2\n")
        (root / "__pycache__").mkdir()
        (root / "__pycache__" / "x.pyc").write_bytes(b"\0")  # caches are not part of an attempt
        w.flush()
        second = w.state_fingerprint()
        assert second != first and second == fingerprint(scan(root))
        (root / "solution" / "x.py").write_text("x = 1\n")  # changed back: the first attempt again
        w.flush()
        assert w.state_fingerprint() == first
    finally:
        w.stop()
