"""The status line says whether the study's witness is current, through a collector outage."""

from __future__ import annotations

import asyncio

from rebench_tui.study.witness import Witness
from rebench_tui.tui.app import RebenchApp
from tests.study_collector import Study


async def test_status_line_shows_the_witness_behind_and_current_again(toy_session, tmp_path):
    study = Study(tmp_path / "study.db")
    s = toy_session()
    w = Witness(s.folder, study.client("ada", timeout=1.0), retry_s=0.1).start(s.audit)
    app = RebenchApp(s, watch_files=False, witness=w)
    try:
        async with app.run_test(size=(160, 40)) as pilot:
            status = app.query_one("#status")
            await _until(pilot, lambda: "witness: current" in str(status.render()))
            study.stop()
            s.note("while the collector is down")
            await _until(pilot, lambda: "unreachable" in str(status.render()))
            assert status.has_class("witness-behind")
            study.restart()
            await _until(pilot, lambda: "witness: current" in str(status.render()))
            assert not status.has_class("witness-behind")
    finally:
        w.stop(1)
        study.close()


async def _until(pilot, cond, timeout_s: float = 10.0) -> None:
    for _ in range(int(timeout_s / 0.1)):
        if cond():
            return
        await asyncio.sleep(0.1)
        await pilot.pause()
    raise AssertionError("the status line never showed it")
