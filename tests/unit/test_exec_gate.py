"""The exec gate: a freeze never meets one of the app's execs starting or ending."""

from __future__ import annotations

import threading
import time

import pytest

from rebench_tui.runtime import exec_gate
from rebench_tui.runtime.exec_gate import ExecGate, ExecsInFlight


def test_a_freeze_waits_for_execs_in_flight_to_end_and_settle():
    gate = ExecGate()
    events: list[tuple[str, float]] = []

    def an_exec():
        with gate.starting():
            time.sleep(0.3)
            events.append(("exec ended", time.monotonic()))

    t = threading.Thread(target=an_exec)
    t.start()
    time.sleep(0.05)
    with gate.freeze(lambda: events.append(("paused", time.monotonic())), lambda: events.append(("thawed", time.monotonic()))):
        pass
    t.join()
    names = [e[0] for e in events]
    assert names == ["exec ended", "paused", "thawed"]
    assert events[1][1] - events[0][1] >= exec_gate.SETTLE_S - 0.01  # the engine's deletion of the exec's process


def test_execs_wait_for_the_thaw():
    gate = ExecGate()
    order: list[str] = []
    with gate.freeze(lambda: order.append("paused"), lambda: order.append("thawed")):
        t = threading.Thread(target=lambda: (gate.starting().__enter__(), order.append("exec started")))
        t.start()
        time.sleep(0.2)
        order.append("scoring done")
    t.join(2)
    assert order == ["paused", "scoring done", "thawed", "exec started"]


def test_a_freeze_that_cannot_drain_gives_up_without_freezing(monkeypatch):
    monkeypatch.setattr(exec_gate, "DRAIN_S", 0.2)
    gate = ExecGate()
    paused = []
    held = gate.starting()
    held.__enter__()
    with pytest.raises(ExecsInFlight):
        with gate.freeze(lambda: paused.append(1), lambda: None):
            pass
    assert paused == [] and not gate.frozen
    held.__exit__(None, None, None)


def test_a_failed_pause_lets_execs_go():
    gate = ExecGate()

    def fail():
        raise RuntimeError("engine said no")

    with pytest.raises(RuntimeError):
        with gate.freeze(fail, lambda: None):
            pass
    assert not gate.frozen
    with gate.starting():
        pass
