"""The study's view (GET /v1/study) is computed in the collector's view process, not on the
HTTP threads that take the participants' rows: the same figures as ``summarize`` on the
ledger, from a child process that reads the database while rows are being written, and that
is started again if it dies. The writers' connection leaves checkpoints to the collector's
checkpoint thread, which keeps the write-ahead log from growing without end."""

from __future__ import annotations

import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

import pytest

from bench_collector import session_lines
from rebench_tui.study.summary import summarize
from tests.study_collector import Study


@pytest.fixture
def study(tmp_path):
    s = Study(tmp_path / "study.db")
    yield s
    s.close()


def _without_age(lines):
    return [{k: v for k, v in line.items() if k != "last_row_age_s"} for line in lines]


def test_the_studys_view_comes_from_a_process_of_its_own_and_survives_its_death(study):
    ada, res = study.client("ada"), study.client("res")
    lines = session_lines(7, 120)
    ada.send("s-7", 0, lines[:60], {"run_id": 7, "env_id": "toy_score"})
    (first,) = res.study()
    assert first["rows"] == 60 and first["scorings"] == 1
    proc = study.server.views._proc
    assert proc is not None and proc.poll() is None and proc.pid != os.getpid()

    ada.send("s-7", 60, lines[60:], {"run_id": 7, "env_id": "toy_score"})
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    seen = res.study()  # a new view process answers
    assert _without_age(seen) == _without_age(summarize(study.ledger))
    assert seen[0]["rows"] == 120 and seen[0]["scorings"] == 2
    assert study.server.views._proc.pid != proc.pid


def test_the_view_process_ends_with_the_collector(study):
    study.client("res").study()
    proc = study.server.views._proc
    study.server.stop()
    assert proc.wait(timeout=10) == 0
    study.server.start = lambda: None  # already stopped: close() below only closes the ledger
    study.server.stop = lambda: None


def test_checkpoints_run_off_the_writers_connection(study):
    assert study.ledger.db.conn.execute("PRAGMA wal_autocheckpoint").fetchone() == (0,)
    ada = study.client("ada")
    lines = session_lines(8, 12_000)
    for k in range(0, len(lines), 1000):
        ada.send("s-8", k, lines[k:k + 1000], {"run_id": 8, "env_id": "toy_score"})
    deadline = time.monotonic() + 15
    while study.db.stat().st_size < 2 << 20 and time.monotonic() < deadline:
        time.sleep(0.1)
    # the writers never checkpoint, yet the rows reached the database file: the thread moved them
    assert study.db.stat().st_size >= 2 << 20
