"""Score round trip: key ``s`` to the result on screen, against a raw ``docker exec`` of the
same scorer in the same container.

A real session of the toy_score fixture in a Docker container (image cached) is shown by the
real app under Textual's Pilot, file watcher on, as a participant runs it. One round trip is
from the key event entering the app (through Pilot's driver) to the score table showing the new
row with every widget's pending messages and refreshes processed. On that path: the watcher
flush (file changes made before the key are recorded before the score), the reserved audit row,
the scorer run through the in-container supervisor (timeout, cancel, process group), the parsed
result, the fsynced audit row, the score log, the SQLite index and the screen update.

Baseline, same run, same container, interleaved with the measured presses:
``docker exec -u root -w /home/agent <container> python3 /protected/score.py`` (the CLI; also
reported: the same exec through the Docker SDK the app uses). Goal: <= 1.5x baseline + 50 ms.

Audit writers, same run (``--audit both``, the default): each run is done with the current writer
(``new``) and with the previous group commit kept in ``benchmarks/baseline/`` (``old``), back to
back, each in a session and container of its own.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import AUDIT_CHOICES, ROOT, audit_option, dump, header, load, median, parser, sessions_use_audit, verdict  # noqa: E402

SIZE = (140, 42)


def docker_session(sessions: Path):
    from rebench_tui.catalog import load_catalog
    from rebench_tui.config import Settings
    from rebench_tui.runtime.docker_runtime import DockerRuntime
    from rebench_tui.runtime.images import Recipes
    from rebench_tui.session import Session
    from rebench_tui.store import Store

    settings = Settings(root=ROOT, sessions_dir=sessions)
    rt = DockerRuntime.connect(None, settings.images, settings.cache_dir)
    env = load_catalog(ROOT / "tests" / "fixtures" / "environments", Recipes.load(ROOT / "images").names).get("toy_score")
    return Session.create(env, "smoke", rt, sessions, store=Store(sessions)), rt


async def key_to_screen(pilot, app, key: str, changed, limit: float = 60) -> float:
    from textual import events

    t = time.perf_counter()
    ev = events.Key(key, key)
    ev.set_sender(app)
    app._driver.send_message(ev)
    while not changed():
        if time.perf_counter() - t > limit:
            raise RuntimeError(f"the key {key!r} did not reach the screen in {limit} s")
        await asyncio.sleep(0.0005)
    await pilot._wait_for_screen()
    return time.perf_counter() - t


def raw_cli(container: str) -> float:
    t = time.perf_counter()
    out = subprocess.run(["docker", "exec", "-u", "root", "-w", "/home/agent", container, "python3", "/protected/score.py"],
                         capture_output=True, text=True, check=True).stdout
    dt = time.perf_counter() - t
    assert '"score"' in out, out
    return dt


def raw_sdk(rt, container: str) -> float:
    c = rt.client.containers.get(container)
    t = time.perf_counter()
    rc, out = c.exec_run(["python3", "/protected/score.py"], user="root", workdir="/home/agent")
    dt = time.perf_counter() - t
    assert rc == 0 and b'"score"' in out, out
    return dt


async def one_run(base: Path, n: int) -> dict:
    from rebench_tui.tui.app import RebenchApp
    from rebench_tui.tui.widgets.score_history import ScoreTable

    s, rt = docker_session(base / "sessions")
    container = s.sandbox.container.id
    out: dict = {"app": [], "cli": [], "sdk": []}
    try:
        app = RebenchApp(s, watch_files=True)
        async with app.run_test(size=SIZE) as pilot:
            await app.workers.wait_for_complete()  # watcher and command capture running
            table = app.query_one(ScoreTable)
            raw_cli(container)  # warm both paths once (page cache, python in the container)
            await key_to_screen(pilot, app, "s", lambda: table.row_count >= 1)
            for i in range(n):
                (s.workspace / "solution" / "answer.txt").write_text(f"{5 + i}\n")
                out["cli"].append(raw_cli(container))
                out["sdk"].append(raw_sdk(rt, container))
                rows = table.row_count
                await asyncio.sleep(0.3)  # let the watcher record the edit first, as a person's pause would
                out["app"].append(await key_to_screen(pilot, app, "s", lambda: table.row_count > rows))
            app.exit()
    finally:
        if s.lock.held:
            s.close()
        s.sandbox.stop(remove=True)
    return out


def main() -> None:
    ap = parser(__doc__.splitlines()[0], runs=3)
    ap.add_argument("-n", type=int, default=8, help="round trips per run (default 8)")
    audit_option(ap)
    args = ap.parse_args()
    writers = AUDIT_CHOICES[args.audit]
    header(f"score round trip: key to result on screen vs raw docker exec (toy_score, Docker), audit writer {' vs '.join(writers)}")
    base = Path(__file__).resolve().parent / ".tmp"
    base.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[dict]] = {w: [] for w in writers}
    for r in range(args.runs):
        for w in (writers if r % 2 == 0 else writers[::-1]):  # alternate which goes first
            with tempfile.TemporaryDirectory(dir=base) as d, sessions_use_audit(w):
                res = asyncio.run(one_run(Path(d), args.n))
            m = {k: median(v) * 1e3 for k, v in res.items()}
            m["load"] = load()
            runs[w].append({**m, "samples_ms": {k: [round(x * 1e3, 1) for x in v] for k, v in res.items()}})
            print(f"   run {r + 1} [{w}]: app {m['app']:.0f} ms, docker exec (CLI) {m['cli']:.0f} ms, SDK exec {m['sdk']:.0f} ms "
                  f"(medians of {args.n}); {m['load']}", flush=True)
    summary = {}
    for w in writers:
        app, cli, sdk = (median([x[k] for x in runs[w]]) for k in ("app", "cli", "sdk"))
        allowed = 1.5 * cli + 50
        summary[w] = {"app_ms": app, "cli_ms": cli, "sdk_ms": sdk, "runs": runs[w]}
        print(f"   [{w}] median of {len(runs[w])} runs: app {app:.0f} ms vs docker exec {cli:.0f} ms = {app / cli:.2f}x "
              f"(+{app - cli:.0f} ms); SDK exec {sdk:.0f} ms")
        print(f"   [{w}] goal <= 1.5x + 50 ms = {allowed:.0f} ms: {verdict(app <= allowed)}")
    dump(args.json, summary)


if __name__ == "__main__":
    main()
