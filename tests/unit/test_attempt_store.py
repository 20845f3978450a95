"""The attempt snapshots: one set of files is scored, fingerprinted, recounted and recorded."""

from __future__ import annotations

import io
import os
import tarfile

import pytest

from rebench_tui.session.attempt_store import AttemptStore, SnapshotRefused
from rebench_tui.session.files import DEFAULT_IGNORE, fingerprint, scan

IGNORE = DEFAULT_IGNORE + ("assets/",)


def _home(tmp_path):
    home = tmp_path / "home"
    (home / "solution" / "pkg").mkdir(parents=True)
    (home / "solution" / "solution.py").write_text("import pkg.k\n")
    (home / "solution" / "pkg" / "k.py").write_text("X = 1\n")
    (home / "solution" / "run.sh").write_text("#!/bin/sh\n")
    os.chmod(home / "solution" / "run.sh", 0o755)
    (home / "solution" / "same.py").symlink_to("solution.py")
    (home / ".git").mkdir()
    (home / ".git" / "kernel.py").write_text("FAST = True\n")  # ignored by the record: not in the snapshot either
    (home / "solution" / ".cache").mkdir()
    (home / "solution" / ".cache" / "weights.bin").write_bytes(b"w" * 100)
    (home / "assets").mkdir()
    (home / "assets" / "data.bin").write_bytes(b"d")
    return home


def test_folder_snapshot_is_the_records_fingerprint_and_leaves_out_what_the_record_leaves_out(tmp_path):
    home = _home(tmp_path)
    store = AttemptStore(tmp_path / "state", IGNORE)
    snap = store.take_from_folder(home)
    (home / "solution" / "same.py").unlink()
    assert store.take_from_folder(home).fingerprint == fingerprint(scan(home, IGNORE))[0]  # the recorder's set
    (home / "solution" / "same.py").symlink_to("solution.py")
    assert set(snap.manifest) == {"solution/solution.py", "solution/pkg/k.py", "solution/run.sh", "solution/same.py"}
    assert snap.manifest["solution/same.py"] == {"link": "solution.py", "size": len("solution.py")}
    assert snap.manifest["solution/run.sh"]["mode"] & 0o111
    assert store.has(snap.fingerprint) and store.load(snap.fingerprint).manifest == snap.manifest


def test_tar_snapshot_equals_folder_snapshot(tmp_path):
    home = _home(tmp_path)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(home, arcname="agent")
    store = AttemptStore(tmp_path / "state", IGNORE)
    from_tar = store.take_from_tar(iter([buf.getvalue()[i:i + 4096] for i in range(0, len(buf.getvalue()), 4096)]),
                                   prefix="agent")
    assert from_tar.fingerprint == store.take_from_folder(home).fingerprint


@pytest.mark.parametrize("make, word", [
    (lambda p: os.mkfifo(p), "named pipe"),
    (lambda p: p.symlink_to("/protected/assets/answers.json"), "symbolic link out of your home"),
    (lambda p: p.symlink_to("../../../etc/passwd"), "symbolic link out of your home"),
])
def test_special_files_and_links_out_end_the_scoring_naming_the_file(tmp_path, make, word):
    home = _home(tmp_path)
    make(home / "solution" / "odd")
    store = AttemptStore(tmp_path / "state", IGNORE)
    with pytest.raises(SnapshotRefused) as err:
        store.take_from_folder(home)
    assert "solution/odd" in str(err.value) and word in str(err.value)


def test_a_named_pipe_in_a_tar_stream_is_refused(tmp_path):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("agent/solution/pipe")
        info.type = tarfile.FIFOTYPE
        tar.addfile(info)
    with pytest.raises(SnapshotRefused, match="solution/pipe is a named pipe"):
        AttemptStore(tmp_path / "s", IGNORE).take_from_tar(io.BytesIO(buf.getvalue()), prefix="agent")


def test_room_copy_round_trips_and_a_changed_store_is_caught(tmp_path):
    home = _home(tmp_path)
    store = AttemptStore(tmp_path / "state", IGNORE)
    snap = store.take_from_folder(home)
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        store.add_to_tar(snap, tar, "home/agent")
    buf.seek(0)
    out = tmp_path / "room"
    with tarfile.open(fileobj=buf) as tar:
        tar.extractall(out, filter="tar")
        owners = {m.uid for m in tar.getmembers()}
    assert owners == {1000}
    assert AttemptStore(tmp_path / "other", IGNORE).take_from_folder(out / "home" / "agent").fingerprint == snap.fingerprint
    manifest = store.root / f"{snap.fingerprint}.json"
    manifest.write_text(manifest.read_text().replace('"solution/pkg/k.py"', '"solution/pkg/j.py"', 1))
    with pytest.raises(Exception, match="does not match its fingerprint"):
        store.load(snap.fingerprint)


def test_unchanged_files_are_stored_once(tmp_path):
    home = _home(tmp_path)
    store = AttemptStore(tmp_path / "state", IGNORE)
    store.take_from_folder(home)
    n = len(list(store.objects.iterdir()))
    (home / "solution" / "note.txt").write_text("X = 1\n")  # the same bytes as pkg/k.py
    store.take_from_folder(home)
    assert len(list(store.objects.iterdir())) == n
