"""Can pressing the score key more often, with trivial edits, farm a timing score's luck? Measured
through the real app under Textual's Pilot, in a real container.

    python -m tests.farming_driver [ENV] [--profile smoke] [--presses 6] [--sessions-dir DIR] [--out FILE]

Two sessions of the same starting solution, run at the same time (two processes, so a change in
the machine's load falls on both). In the *farmed* one, every press of ``s`` follows a comment
line appended to ``solution/solution.py`` (each press a new attempt of one scoring); in the
*unfarmed* one the files never change (one attempt, re-scored). Each then submits (``x``): one
final scoring, then the finish's recount of the leading attempt. ``--pairs N`` repeats the pair. Prints, for each session,
every scoring, the score by the paper's rule (the best single scoring), the in-session counting
score just before the finish, and the score that counts after the recount with its spread; writes
the same as JSON to ``--out``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import statistics
import subprocess
import sys
import tempfile
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
            "sd_of_scorings": statistics.stdev([v for v in own if math.isfinite(v)]) if len(own) > 2 else None}


def _line(r: dict[str, Any]) -> str:
    name = "farmed" if r["farmed"] else "unfarmed"
    fmt = ", ".join(f"{v:.3f}" for v in r["scorings"])
    return (f"{name}: scorings {fmt}; paper rule {r['paper_rule']:.3f}; in-session counting "
            f"{r['in_session_counting']:.3f}; recount {', '.join(f'{v:.3f}' for v in r['recount'])}; "
            f"counts {r['counts']:.3f} ({r['low']:.3f} to {r['high']:.3f})")


async def one(args: argparse.Namespace) -> int:
    from rebench_tui import workstation
    from rebench_tui.config import Settings

    settings = Settings()
    if args.sessions_dir:
        settings.sessions_dir = Path(args.sessions_dir)
    env = workstation.catalog(settings).get(args.env)
    choice = workstation.choose(env, settings, runtime="docker", profile=args.profile, say=lambda m: None)
    r = await one_session(env, choice.profile, choice.runtime, settings, args.presses, args.one == "farmed")
    Path(args.out).write_text(json.dumps(r, indent=2))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("env", nargs="?", default="triton_cumsum")
    p.add_argument("--profile", default="smoke")
    p.add_argument("--presses", type=int, default=6)
    p.add_argument("--pairs", type=int, default=1)
    p.add_argument("--sessions-dir", default=None)
    p.add_argument("--out", default=None)
    p.add_argument("--one", choices=["farmed", "unfarmed"], default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.one:
        return asyncio.run(one(args))
    work = Path(tempfile.mkdtemp(prefix="farming-"))
    results, within = [], True
    for pair in range(args.pairs):
        procs = {}
        for which in ("farmed", "unfarmed"):
            cmd = [sys.executable, "-m", "tests.farming_driver", args.env, "--profile", args.profile, "--presses",
                   str(args.presses), "--one", which, "--out", str(work / f"{pair}-{which}.json")]
            procs[which] = subprocess.Popen(cmd + (["--sessions-dir", args.sessions_dir] if args.sessions_dir else []))
        if any(p.wait() != 0 for p in procs.values()):
            print("a session failed; see above", file=sys.stderr)
            return 2
        farmed, plain = (json.loads((work / f"{pair}-{w}.json").read_text()) for w in ("farmed", "unfarmed"))
        results += [farmed, plain]
        diff = farmed["counts"] - plain["counts"]
        noise = statistics.stdev(farmed["scorings"] + plain["scorings"])
        within &= abs(diff) <= noise
        print(f"pair {pair + 1}\n  {_line(farmed)}\n  {_line(plain)}\n  farmed minus unfarmed: by the counting rule "
              f"{diff:+.3f}, by the paper's rule {farmed['paper_rule'] - plain['paper_rule']:+.3f}, by the in-session "
              f"rule {farmed['in_session_counting'] - plain['in_session_counting']:+.3f}; one scoring's noise (sd of "
              f"both sessions' scorings): {noise:.3f}", flush=True)
    if args.out:
        Path(args.out).write_text(json.dumps(results, indent=2))
    return 0 if within else 1


if __name__ == "__main__":
    sys.exit(main())
