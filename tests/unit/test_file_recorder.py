"""The file watcher in its own process: changes arrive as before, and a crash of either side
loses nothing and records nothing twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from rebench_tui.secrets import Redactor
from rebench_tui.session.files import FileRecorder, FileWatcher
from rebench_tui.session.files.recorder import CHILD, PACKAGE_PARENT
from rebench_tui.session.files.workspace import MARKER


class Sink:
    def __init__(self) -> None:
        self.changes: list = []
        self.threads: set[str] = set()
        self.fail = False

    def __call__(self, changes, raw) -> None:
        self.threads.add(threading.current_thread().name)
        if self.fail:
            raise OSError(28, "No space left on device")
        self.changes.extend(changes)

    def paths(self) -> list[str]:
        return [c.path for c in self.changes]


def _recorder(tmp_path: Path, sink: Sink, **kw) -> FileRecorder:
    ws = tmp_path / "ws"
    ws.mkdir(exist_ok=True)
    return FileRecorder(ws, sink, tmp_path / "state" / "files.json", interval=0.05, **kw)


def test_changes_cross_from_the_child_with_diffs_and_flush_waits_for_them(tmp_path):
    sink = Sink()
    r = _recorder(tmp_path, sink)
    (r.root / "before.txt").write_text("made before start\n")
    r.start()  # the first start takes the workspace as found as its baseline
    try:
        assert r.alive and r._proc.pid != os.getpid()
        (r.root / "train.py").write_text("lr = 3e-4\n")
        r.flush()
        (r.root / "train.py").write_text("lr = 1e-3\n")
        r.flush()
        assert sink.paths() == ["train.py", "train.py"]
        assert sink.changes[0].event == "created" and sink.changes[1].event == "modified"
        assert "-lr = 3e-4" in sink.changes[1].diff and "+lr = 1e-3" in sink.changes[1].diff
        assert sink.threads == {"rebench-file-recorder"}  # called here, from the reader thread
        assert not [p for p in os.listdir(r.root) if p.startswith(MARKER)]  # flush barriers leave nothing behind
    finally:
        r.stop()
    assert not r.alive
    assert json.loads(r.state_path.read_text())["train.py"]["size"] == len("lr = 1e-3\n")


def test_the_child_answers_with_the_fingerprint_of_what_it_has_recorded(tmp_path):
    from rebench_tui.session.files import fingerprint, scan

    sink = Sink()
    r = _recorder(tmp_path, sink)
    (r.root / "model.py").write_text("w = 1\n")
    r.start()
    try:
        first = r.state_fingerprint()
        assert first == fingerprint(scan(r.root)) and first[1] == 1
        (r.root / "model.py").write_text("w = 2\n")
        r.flush()
        assert r.state_fingerprint() == fingerprint(scan(r.root)) != first
        os.kill(r._proc.pid, signal.SIGKILL)  # no answer from a dead child: None (the session then scans)
        r._proc.wait()
        assert r.state_fingerprint(timeout=2.0) in (None, fingerprint(scan(r.root)))  # or its replacement's
    finally:
        r.stop()


def test_a_killed_child_is_replaced_and_what_changed_meanwhile_is_recorded_once(tmp_path):
    sink = Sink()
    errors: list[Exception] = []
    r = _recorder(tmp_path, sink, on_error=errors.append)
    r.start()
    try:
        (r.root / "a.txt").write_text("a\n")
        r.flush()
        time.sleep(1.3)  # the state is saved within a second of the last recorded change
        old = r._proc
        old.send_signal(signal.SIGKILL)
        (r.root / "b.txt").write_text("made while no child ran\n")
        deadline = time.monotonic() + 20
        while not (r.alive and r._proc is not old and r._ready_seen) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert r.restarts == 1 and "restarted" in str(errors[0])
        r.flush()
        (r.root / "c.txt").write_text("c\n")
        r.flush()
    finally:
        r.stop()
    assert sorted(sink.paths()) == ["a.txt", "b.txt", "c.txt"]  # b once, a not again
    assert [c.note for c in sink.changes if c.path == "b.txt"] == ["changed while no watcher ran"]


def test_a_batch_the_app_did_not_acknowledge_is_recorded_by_the_next_start(tmp_path):
    """The app dies after the child sent a batch but before its rows were durable: the child
    exits without saving its state, so the next catch-up records the change."""
    ws, state = tmp_path / "ws", tmp_path / "state" / "files.json"
    ws.mkdir()
    state.parent.mkdir()
    FileWatcher(ws, lambda c, n: None, state).catch_up()  # a recorded baseline: the empty workspace
    child = subprocess.Popen([sys.executable, "-I", "-c", CHILD.format(path=json.dumps(PACKAGE_PARENT))],
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=tmp_path)
    child.stdin.write((json.dumps({"config": {"root": str(ws), "state": str(state), "ignore": [], "interval": 0.05,
                                              "redact": []}}) + "\n").encode())
    child.stdin.flush()
    assert json.loads(child.stdout.readline()) == {"ready": True}
    (ws / "unacked.txt").write_text("sent, never acknowledged\n")
    msg = json.loads(child.stdout.readline())
    assert [c["path"] for c in msg["changes"]] == ["unacked.txt"]
    child.stdin.close()  # the app is gone
    assert child.wait(10) == 0
    assert "unacked.txt" not in json.loads(state.read_text())
    seen: list = []
    FileWatcher(ws, lambda c, n: seen.extend(c), state).catch_up()
    assert [c.path for c in seen] == ["unacked.txt"] and seen[0].note == "changed while no watcher ran"


def test_a_batch_the_app_could_not_write_is_reported_and_the_recorder_goes_on(tmp_path):
    """The session's sink keeps rows it could not write queued in the audit log (tests of a full
    disk under a real session: test_hostile_inputs); here: the failure is reported, the child lives."""
    sink = Sink()
    errors: list[Exception] = []
    r = _recorder(tmp_path, sink, on_error=errors.append)
    r.start()
    try:
        sink.fail = True
        (r.root / "during.txt").write_text("the disk is full\n")
        r.flush()
        assert len(errors) == 1 and "No space left" in str(errors[0]) and r.alive and r.errors == 1
        sink.fail = False
        (r.root / "after.txt").write_text("written\n")
        r.flush()
    finally:
        r.stop()
    assert sink.paths() == ["after.txt"]


def test_the_childs_diff_bases_hold_no_secret(tmp_path):
    secret = "sk-live-0123456789abcdef"
    sink = Sink()
    r = _recorder(tmp_path, sink, redact_pairs=Redactor({"API_KEY": secret}).pairs)
    r.start()
    try:
        (r.root / "notes.txt").write_text(f"key = {secret}\n")
        r.flush()
    finally:
        r.stop()
    blobs = list((r.state_path.parent / "blobs").rglob("*"))
    texts = [b.read_text() for b in blobs if b.is_file()]
    assert texts and all(secret not in t for t in texts) and any("[redacted:API_KEY]" in t for t in texts)


def test_nothing_in_the_workspace_is_imported_by_the_child(tmp_path):
    """The child starts in isolated mode away from the workspace: a planted package is not run."""
    sink = Sink()
    r = _recorder(tmp_path, sink)
    planted = r.root / "rebench_tui" / "session"
    planted.mkdir(parents=True)
    flag = tmp_path / "pwned"
    for d in (r.root / "rebench_tui", planted):
        (d / "__init__.py").write_text(f"open({str(flag)!r}, 'w').write('ran')\n")
    (planted / "file_recorder.py").write_text(f"open({str(flag)!r}, 'w').write('ran')\n")
    r.start()
    r.stop()
    assert not flag.exists()


@pytest.mark.parametrize("separate", [True, False])
def test_session_records_through_either_watcher(separate, toy_session):
    from rebench_tui.trajectory.audit import read_entries

    s = toy_session()
    w = s.start_watching(interval=0.05, separate_process=separate)
    assert isinstance(w, FileRecorder) == separate
    (s.workspace / "solution" / "answer.txt").write_text("7\n")
    s.watcher.flush()
    rows = read_entries(s.folder / "audit.jsonl")
    files = [r["content"]["content"][1] for r in rows if r["content"].get("attributes", {}).get("title") == "file"]
    assert [f["path"] for f in files] == ["solution/answer.txt"] and files[0]["event"] == "modified"


def test_the_child_ends_when_the_app_is_killed(tmp_path):
    ws = tmp_path / "ws"
    ws.mkdir()
    app = subprocess.Popen([sys.executable, "-c", f"""
import sys, time
from pathlib import Path
from rebench_tui.session.files import FileRecorder
r = FileRecorder(Path({str(ws)!r}), lambda c, n: None, Path({str(tmp_path / 'state' / 'files.json')!r}))
r.start()
print(r._proc.pid, flush=True)
time.sleep(600)
"""], stdout=subprocess.PIPE, text=True)
    child = int(app.stdout.readline())
    os.kill(child, 0)  # running
    app.send_signal(signal.SIGKILL)
    app.wait(10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        try:
            with open(f"/proc/{child}/stat") as fh:  # an exited child not yet reaped by init counts as gone
                if fh.read().split(") ")[1][0] == "Z":
                    break
        except FileNotFoundError:
            break
        time.sleep(0.05)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the file recorder outlived the app by 10 s")


def test_a_child_that_cannot_start_is_an_error_not_a_restart_loop(tmp_path):
    from rebench_tui.errors import RebenchError

    r = _recorder(tmp_path, Sink(), python="/bin/false")
    with pytest.raises(RebenchError, match="could not start"):
        r.start()
    time.sleep(0.3)
    assert r.restarts == 0 and not r.alive
