"""Start to ready with the image cached, against a raw ``docker run`` of the same image.

Measured: ``Session.create`` for the toy_score fixture on the Docker engine, the image already
built (the recipe hash is still checked): the session folder and workspace, the container
(resources, labels, bind-mounted home), the command supervisor, the capture daemon and shell
hooks, the pristine solution under /protected, ownership, the first fsynced audit row and the
SQLite index. Ready = the session could take a key press (what ``rebench-tui start`` waits for
before it draws the screen). A timing split (from the progress messages and the runtime's
steps) is printed for the median run.

Baseline, same run, interleaved: ``docker run -d --init <same image> sleep infinity`` (the CLI
returns once the container is started), then removal. Goal: <= 2x baseline.
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, dump, header, load, median, parser, verdict  # noqa: E402


def raw_run(image: str) -> float:
    t = time.perf_counter()
    cid = subprocess.run(["docker", "run", "-d", "--init", image, "sleep", "infinity"], capture_output=True, text=True,
                         check=True).stdout.strip()
    dt = time.perf_counter() - t
    subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=True)
    return dt


def app_start(base: Path, env, rt) -> tuple[float, list[tuple[float, str]], str]:
    from rebench_tui.session import Session
    from rebench_tui.store import Store

    marks: list[tuple[float, str]] = []
    t = time.perf_counter()
    s = Session.create(env, "smoke", rt, base, store=Store(base), progress=lambda m: marks.append((time.perf_counter() - t, m)))
    dt = time.perf_counter() - t
    image = s.meta.image
    s.close()
    s.sandbox.stop(remove=True)
    return dt, marks, image


def main() -> None:
    ap = parser(__doc__.splitlines()[0], runs=5)
    args = ap.parse_args()
    from rebench_tui.catalog import load_catalog
    from rebench_tui.config import Settings
    from rebench_tui.runtime.docker_runtime import DockerRuntime
    from rebench_tui.runtime.images import Recipes

    header("start to ready (image cached) vs raw docker run (toy_score, Docker)")
    base = Path(__file__).resolve().parent / ".tmp"
    base.mkdir(parents=True, exist_ok=True)
    settings = Settings(root=ROOT)
    rt = DockerRuntime.connect(None, settings.images, settings.cache_dir)
    env = load_catalog(ROOT / "tests" / "fixtures" / "environments", Recipes.load(ROOT / "images").names).get("toy_score")
    with tempfile.TemporaryDirectory(dir=base) as d:
        _dt, _m, image = app_start(Path(d), env, rt)  # builds the image if it is not cached yet; not counted
        raw_run(image)
        runs = []
        for r in range(args.runs):
            raw = raw_run(image)
            app, marks, _ = app_start(Path(d), env, rt)
            runs.append({"app_s": app, "raw_s": raw, "marks": marks, "load": load()})
            print(f"   run {r + 1}: start-to-ready {app * 1e3:.0f} ms, docker run -d {raw * 1e3:.0f} ms; {runs[-1]['load']}")
    app, raw = median([x["app_s"] for x in runs]), median([x["raw_s"] for x in runs])
    mid = sorted(runs, key=lambda x: x["app_s"])[len(runs) // 2]
    print("   split of the median run (ms since start: progress message):")
    for at, msg in mid["marks"]:
        print(f"     {at * 1e3:7.0f}  {msg}")
    print(f"   median of {len(runs)}: start-to-ready {app * 1e3:.0f} ms vs docker run {raw * 1e3:.0f} ms = {app / raw:.2f}x")
    print(f"   goal <= 2x: {verdict(app <= 2 * raw)}")
    dump(args.json, {"app_s": app, "raw_s": raw, "runs": runs})


if __name__ == "__main__":
    main()
