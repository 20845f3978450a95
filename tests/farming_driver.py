"""Can pressing the score key more often, with trivial edits, farm a timing score's luck? Measured
through the real app under Textual's Pilot, in a real container.

    python -m tests.farming_driver [ENV] [--profile smoke] [--presses 6] [--sessions-dir DIR] [--out FILE]

Two sessions of the same starting solution. In the *farmed* one, every press of ``s`` follows a
comment line appended to ``solution/solution.py`` (each press a new attempt of one scoring); in
the *unfarmed* one the files never change (one attempt, re-scored). Each then submits (``x``):
one final scoring, then the finish's recount of the leading attempt. Prints, for each session,
every scoring, the score by the paper's rule (the best single scoring), the in-session counting
score just before the finish, and the score that counts after the recount with its spread; writes
the same as JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
from pathlib import Path
from typing import Any

SIZE = (140, 42)


async def one_session(env: Any, profile: str, runtime: Any, settings: Any, presses: int, farm: bool) -> dict[str, Any]:
    from textual.widgets import Input

    from rebench_tui.session import Session
    from rebench_tui.store import Store
    from rebench_tui.trajectory.session_records import SessionRecords
    from rebench_tui.tui.app import RebenchApp
    from rebench_tui.tui.screens.dialogs import QuitScreen, SubmitScreen

    session = Session.create(env, profile, runtime, settings.sessions, store=Store(settings.sessions))
    app = RebenchApp(session, tick_s=0.5)
    solution = session.workspace / "solution" / "solution.py"
    in_session = None
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        for i in range(presses):
            if farm:
                with solution.open("a") as fh:
                    fh.write(f"# trivial edit {i + 1}\n")
            await pilot.press("s")
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause()
        before = session.final()
        in_session = None if before is None else before.score
        await pilot.press("x")
        await pilot.pause()
        assert isinstance(app.screen, SubmitScreen)
        app.screen.query_one(Input).value = "farming measurement"
        await pilot.press("enter")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        shown = str(app.query_one("#best").render()) if app.query("#best") else ""
        await pilot.press("q")
        await pilot.pause()
        if isinstance(app.screen, QuitScreen):
            await pilot.press("enter")
            await pilot.pause()
    session.sandbox.stop(remove=True)
    rec = SessionRecords.load(session.folder)
    own = [s.value for s, r in zip(rec.scorings, rec.recounts) if not r]
    recount = [s.value for s, r in zip(rec.scorings, rec.recounts) if r]
    c = rec.counting
    return {"session": session.id, "farmed": farm, "scorings": own, "recount": recount,
            "paper_rule": rec.paper_score, "in_session_counting": in_session,
            "counts": None if c is None else c.score, "low": None if c is None else c.low,
            "high": None if c is None else c.high, "screen": shown,
            "sd_of_scorings": statistics.stdev([v for v in own if v == v]) if len(own) > 2 else None}


async def main(argv: list[str] | None = None) -> int:
    from rebench_tui import workstation
    from rebench_tui.config import Settings

    p = argparse.ArgumentParser()
    p.add_argument("env", nargs="?", default="triton_cumsum")
    p.add_argument("--profile", default="smoke")
    p.add_argument("--presses", type=int, default=6)
    p.add_argument("--sessions-dir", default=None)
    p.add_argument("--out", default=None)
    args = p.parse_args(argv)
    settings = Settings()
    if args.sessions_dir:
        settings.sessions_dir = Path(args.sessions_dir)
    env = workstation.catalog(settings).get(args.env)
    choice = workstation.choose(env, settings, runtime="docker", profile=args.profile, say=lambda m: None)
    results = []
    for farm in (True, False):
        r = await one_session(env, choice.profile, choice.runtime, settings, args.presses, farm)
        results.append(r)
        name = "farmed" if farm else "unfarmed"
        fmt = ", ".join(f"{v:.3f}" for v in r["scorings"])
        print(f"{name}: scorings {fmt}; paper rule {r['paper_rule']:.3f}; in-session counting "
              f"{r['in_session_counting']:.3f}; recount {', '.join(f'{v:.3f}' for v in r['recount'])}; "
              f"counts {r['counts']:.3f} ({r['low']:.3f} to {r['high']:.3f})", flush=True)
    diff = abs(results[0]["counts"] - results[1]["counts"])
    noise = results[1]["sd_of_scorings"]
    print(f"farmed minus unfarmed: {results[0]['counts'] - results[1]['counts']:+.3f}; one re-score's noise "
          f"(sd of the unfarmed session's scorings): {noise:.3f}; within it: {diff <= noise}")
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    return 0 if diff <= noise else 1


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
