"""A new login takes the participant's session over from an earlier one (real processes): the
earlier app gets a hang-up, then a kill if it ignores it; an app of another host, or none, is left
alone."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time

import pytest

from rebench_tui.session.layout import LOCK
from rebench_tui.session.lock import SessionLock
from rebench_tui.study.kiosk import takeover

HOST = socket.gethostname()


def _holder(folder, code: str) -> subprocess.Popen:
    """A process that runs ``code`` (its signal handling), then writes the session's lock as an app does and waits."""
    script = (f"import json, os, signal, time\n{code}\n"
              f"json.dump({{'pid': os.getpid(), 'host': {HOST!r}, 'since': time.time()}}, open({str(folder / LOCK)!r}, 'w'))\n"
              f"time.sleep(60)\n")
    proc = subprocess.Popen([sys.executable, "-c", script])
    end = time.monotonic() + 30
    while (SessionLock(folder / LOCK).holder() or {}).get("pid") != proc.pid and time.monotonic() < end:
        time.sleep(0.02)
    return proc


# The first sets the hang-up's default action itself: under `nohup` (a CI runner, say) it would be inherited as ignored.
@pytest.mark.parametrize("code, signal_seen", [("signal.signal(signal.SIGHUP, signal.SIG_DFL)", -1),
                                               ("signal.signal(signal.SIGHUP, signal.SIG_IGN)", -9)])
def test_the_earlier_login_s_app_is_ended(tmp_path, monkeypatch, code, signal_seen):
    monkeypatch.setattr(takeover, "HANG_UP_WAIT_S", 1.0)
    proc = _holder(tmp_path, code)
    try:
        said = takeover.end_earlier_login(tmp_path, HOST)
        assert said and f"PID {proc.pid}" in said
        assert proc.wait(5) == signal_seen  # -1: the hang-up ended it; -9: it ignored that and was killed
        assert SessionLock(tmp_path / LOCK).live_holder() is None
    finally:
        proc.kill()
        proc.wait()


def test_an_app_of_another_host_or_no_app_is_left_alone(tmp_path):
    assert takeover.end_earlier_login(tmp_path, HOST) is None  # no lock
    (tmp_path / LOCK).write_text(json.dumps({"pid": 1, "host": "elsewhere", "since": time.time()}))
    assert takeover.end_earlier_login(tmp_path, HOST) is None
