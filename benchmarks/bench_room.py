"""What a scoring room costs, beside the scoring it replaced, and why the participant stays frozen.

A real session of the toy_score fixture in a Docker container (image cached). Measured, same run,
cases alternating:

- ``room``: ``Session.score()`` as the app runs it: the participant's container frozen (``docker
  pause``), the home's snapshot (the engine's tar stream into the content-addressed store), a new
  container from the session's image with the tools, protected data and the attempt's copy, the
  scorer in it, the room removed, the thaw. The parts are in each record's ``details.room``.
- ``in place`` (the baseline, today's path before the room): the same scorer exec'd in the
  session's own container through the supervisor, with the link guard and the participant's
  processes stopped around it, as scorings ran before.

Then the snapshot alone at three home sizes (1, 50 and 200 MB of incompressible files), and the
freeze's reason in figures: a CPU-timed scorer (the toy's ``spin`` answer: a fixed loop, timed
by itself) with two busy processes of the participant's running, frozen through the scoring
(what the app does) and not frozen (the room alone), beside it with nothing running.

Goal: room overhead <= 1 s a scoring over the in-place path.
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
from contextlib import nullcontext
from pathlib import Path
from secrets import token_hex

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, dump, header, median, parser, verdict  # noqa: E402

SPIN = '''
if answer == "spin":
    t0 = time.perf_counter()
    x = 0
    for i in range(6_000_000):
        x += i * i
    report({"score": time.perf_counter() - t0, "message": {"seconds": time.perf_counter() - t0}, "details": {}})
    sys.exit(0)
'''


def toy_env(scratch: Path):
    import shutil

    from rebench_tui.catalog import load_catalog
    from rebench_tui.runtime.images import Recipes

    src = ROOT / "tests" / "fixtures" / "environments" / "toy_score"
    dest = scratch / "envs" / "toy_score"
    shutil.copytree(src, dest, ignore=shutil.ignore_patterns("__pycache__"))
    score = dest / "protected" / "score.py"
    anchor = 'secret_ok = open(os.path.join(protected, "secret.txt")).read().startswith("held-out")\n'
    score.write_text(score.read_text().replace(anchor, anchor + SPIN))
    return load_catalog(dest.parent, Recipes.load(ROOT / "images").names).get("toy_score")


def in_place(s) -> float:
    """The scoring as it ran before the room: the scorer in the session's container, guarded."""
    sb = s.sandbox
    t = time.perf_counter()
    r = sb.exec([sb.python, f"{sb.protected}/score.py"], user="root", timeout=30, workdir=sb.home, guard_links=True,
                token=token_hex(16))
    assert r.result, r.stderr[-500:]
    return time.perf_counter() - t


def timed_score(s) -> tuple[float, dict]:
    t = time.perf_counter()
    rec = s.score()
    return time.perf_counter() - t, rec.details


def main() -> int:
    ap = parser(__doc__, runs=5)
    args = ap.parse_args()
    from rebench_tui.config import Settings
    from rebench_tui.runtime.docker_runtime import DockerRuntime
    from rebench_tui.session import Session
    from rebench_tui.store import Store

    header("scoring room: per-scoring cost and the freeze")
    out: dict = {}
    with tempfile.TemporaryDirectory() as tmp:
        scratch = Path(tmp)
        settings = Settings(root=ROOT, sessions_dir=scratch / "sessions")
        rt = DockerRuntime.connect(None, settings.images, settings.cache_dir)
        s = Session.create(toy_env(scratch), "smoke", rt, settings.sessions, store=Store(settings.sessions))
        try:
            (s.workspace / "solution" / "answer.txt").write_text("3")
            s.score()  # warm: the image's files in the page cache, the store made
            room, base, parts = [], [], []
            for _ in range(args.runs):
                took, details = timed_score(s)
                room.append(took)
                parts.append(details["room"])
                base.append(in_place(s))
            over = median(room) - median(base)
            print(f"   scoring, median of {args.runs}: room {median(room):.3f} s, in place {median(base):.3f} s "
                  f"(baseline, same run): overhead {over:+.3f} s  [goal <= 1 s: {verdict(over <= 1.0)}]")
            print(f"     of which snapshot {median([p['snapshot_s'] for p in parts]):.3f} s, room made and filled "
                  f"{median([p['open_s'] for p in parts]):.3f} s (the rest: freeze, scorer, removal, thaw, record)")
            out.update(room_s=room, in_place_s=base, parts=parts)

            sizes = {}
            for mb in (1, 50, 200):
                blob = s.workspace / "solution" / "blob.bin"
                blob.write_bytes(os.urandom(mb * 2**20))
                t = time.perf_counter()
                with s.sandbox.frozen():
                    snap = s.scorer._take_snapshot()
                sizes[mb] = time.perf_counter() - t
                print(f"   snapshot of a home with {mb} MB (frozen, tar stream, store): {sizes[mb]:.3f} s "
                      f"({snap.n_files} files)")
            blob.unlink()
            out["snapshot_s_by_mb"] = sizes

            (s.workspace / "solution" / "answer.txt").write_text("spin")
            quiet = [s.score().score for _ in range(args.runs)]
            burner = ("i=0; while [ $i -lt 2 ]; do (while :; do :; done) & i=$((i+1)); done; wait")
            s.sandbox.container.exec_run(["sh", "-c", burner], user="agent", detach=True)
            time.sleep(0.5)
            frozen = [s.score().score for _ in range(args.runs)]
            s.sandbox.frozen = lambda: nullcontext()  # type: ignore[method-assign]  # the room alone, no freeze
            thawed = [s.score().score for _ in range(args.runs)]
            print(f"   a CPU-timed scorer (fixed loop), median of {args.runs}: nothing running {median(quiet):.3f} s; "
                  f"two busy participant processes, frozen through the scoring {median(frozen):.3f} s, "
                  f"not frozen {median(thawed):.3f} s")
            out.update(spin_quiet_s=quiet, spin_frozen_s=frozen, spin_unfrozen_s=thawed)
        finally:
            if s.lock.held:
                s.close()
            s.sandbox.stop(remove=True)
    dump(args.json, out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
