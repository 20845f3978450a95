"""`rebench-tui collector serve` ends cleanly on Ctrl-C and on SIGTERM, also when it was started
as a shell's background job (which starts with SIGINT ignored, and Python then never raises
KeyboardInterrupt): it stops serving, closes its database and says so."""

from __future__ import annotations

import signal
import sqlite3

import pytest

from tests.study_collector import serve_process, stop_process


@pytest.mark.parametrize("sig, inherited_ignore", [(signal.SIGINT, False), (signal.SIGINT, True), (signal.SIGTERM, True)],
                         ids=["ctrl-c", "ctrl-c-in-a-background-job", "sigterm"])
def test_serve_stops_cleanly_on_a_signal(tmp_path, sig, inherited_ignore):
    db, log = tmp_path / "study.db", tmp_path / "collector.log"
    ignore = (lambda: signal.signal(signal.SIGINT, signal.SIG_IGN)) if inherited_ignore else None
    p = serve_process(db, 0, log, preexec_fn=ignore)
    stop_process(p, sig, log)
    assert p.returncode == 0, log.read_text()
    assert f"collector stopped ({sig.name}); every witnessed row is in the database" in log.read_text()
    with sqlite3.connect(db) as conn:  # closed and readable by another process
        assert conn.execute("pragma integrity_check").fetchone() == ("ok",)
