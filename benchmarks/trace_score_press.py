"""One score key press, followed through the code: how many calls into the package it takes, in how
many of its files, on how many threads, and how many requests to the Docker engine, from the key
event to the new row on screen. Printed for this checkout beside another revision of the package
(default: the one before the package was regrouped), measured the same way in the same run.

A real session of the toy_score fixture in a Docker container, shown by the real app under
Textual's Pilot (as bench_score does); one untraced press first, so both sides are warm. A profile
hook on every thread counts each call whose code lies in the package's folder; the engine's
requests are counted at the HTTP adapter the Docker SDK sends them through. Each revision runs in
a fresh interpreter with only its own tree on the path.

    .venv/bin/python benchmarks/trace_score_press.py                 # this checkout vs 696e013
    .venv/bin/python benchmarks/trace_score_press.py --base-ref main
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASE_REF = "696e013"  # main before the CLI, the session's file watcher, the runtime and the big modules were split


def measure(tree: Path) -> dict:
    """Run inside a fresh interpreter whose sys.path starts with ``tree``."""
    pkg = str(tree / "rebench_tui") + os.sep
    sys.path.insert(0, str(tree))
    import requests.adapters

    from rebench_tui.catalog import load_catalog
    from rebench_tui.config import Settings
    from rebench_tui.runtime.docker_runtime import DockerRuntime
    from rebench_tui.runtime.images import Recipes
    from rebench_tui.session import Session
    from rebench_tui.store import Store
    from rebench_tui.tui.app import RebenchApp

    assert (Path(sys.modules["rebench_tui"].__file__).parent / "").as_posix().startswith(tree.as_posix()), "wrong tree"
    sessions = Path(tempfile.mkdtemp(prefix="trace-press-"))
    settings = Settings(root=ROOT, sessions_dir=sessions)
    rt = DockerRuntime.connect(None, settings.images, settings.cache_dir)
    env = load_catalog(ROOT / "tests" / "fixtures" / "environments", Recipes.load(ROOT / "images").names).get("toy_score")
    session = Session.create(env, "smoke", rt, sessions, store=Store(sessions))
    calls: Counter = Counter()
    threads: set[str] = set()
    engine = Counter()
    on = threading.Event()
    send = requests.adapters.HTTPAdapter.send

    def counted_send(self, request, *a, **kw):
        if on.is_set():
            last = request.path_url.split("?")[0].rsplit("/", 1)[-1]
            engine[f"{request.method} {'<container>' if len(last) == 64 else last}"] += 1
        return send(self, request, *a, **kw)

    def hook(frame, event, _arg):
        if event == "call" and on.is_set():
            f = frame.f_code.co_filename
            if f.startswith(pkg):
                calls[f[len(pkg):]] += 1
                threads.add(threading.current_thread().name.split(" ")[0].rstrip("0123456789_-"))

    requests.adapters.HTTPAdapter.send = counted_send
    # Textual's thread workers and the audit log's writer run on pool threads started before the
    # traced press (a profile hook set now would not reach them): the hook is set on entry to the
    # work each thread is handed, and taken off when it returns.
    from rebench_tui.trajectory.audit import AuditLog

    def profiled(fn):
        def run(*a, **kw):
            old = sys.getprofile()
            sys.setprofile(hook)
            try:
                return fn(*a, **kw)
            finally:
                sys.setprofile(old)
        return run

    Session.score = profiled(Session.score)
    AuditLog._write_queued = profiled(AuditLog._write_queued)

    async def drive() -> float:
        app = RebenchApp(session, tick_s=3600)
        async with app.run_test(size=(140, 42)) as pilot:
            await pilot.pause()
            await app.workers.wait_for_complete()
            for traced in (False, True):
                before = len(session.history)
                if traced:
                    sys.setprofile(hook)
                    on.set()
                t = time.perf_counter()
                await pilot.press("s")
                while len(session.history) == before:
                    await asyncio.sleep(0.005)
                await app.workers.wait_for_complete()
                await pilot.pause()
                on.clear()
                sys.setprofile(None)
            return time.perf_counter() - t

    try:
        took = asyncio.run(drive())
    finally:
        session.close()
        session.sandbox.stop(remove=True)
    return {"calls": sum(calls.values()), "files": len(calls), "threads": sorted(threads),
            "engine_requests": sum(engine.values()), "engine": dict(engine.most_common()),
            "top_files": calls.most_common(12), "s": round(took, 2)}


def tree_of(ref: str, into: Path) -> Path:
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "rebench_tui"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def run_side(tree: Path) -> dict:
    out = subprocess.run([sys.executable, __file__, "--measure", str(tree)], capture_output=True, text=True, cwd=tempfile.gettempdir())
    if out.returncode != 0:
        raise SystemExit(f"the trace of {tree} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-ref", default=BASE_REF)
    p.add_argument("--measure", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a.measure:
        print(json.dumps(measure(Path(a.measure))))
        return
    base = tree_of(a.base_ref, Path(tempfile.mkdtemp(prefix="trace-base-")))
    sides = {f"{a.base_ref} (before)": run_side(base), "this checkout": run_side(ROOT)}
    print(f"one score key press of the toy_score fixture in Docker, load {os.getloadavg()[0]:.2f}")
    print(f"{'':<22}{'calls':>8}{'files':>7}{'engine requests':>17}  threads")
    for name, s in sides.items():
        print(f"{name:<22}{s['calls']:>8}{s['files']:>7}{s['engine_requests']:>17}  {', '.join(s['threads'])}")
    for name, s in sides.items():
        print(f"\n{name}: engine requests {s['engine']}")
        print(f"{name}: busiest files " + ", ".join(f"{f} {n}" for f, n in s["top_files"]))


if __name__ == "__main__":
    main()
