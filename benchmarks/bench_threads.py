"""Containers side by side on a shared machine: PyTorch's threads as the profile gives them, against one each.

Measured: N sandboxes made by the Docker runtime for restricted_mlm's smoke profile (the torch-cpu
base image, 2 CPUs, as the smoke profiles of the PyTorch environments have), each running the same small training loop (an MLP, fixed
steps) at the same moment, as the test suite's parallel phase does. Figure: the wall time until
all N are done, with ``REBENCH_CONTAINER_THREADS=1`` (the runtime's ``threads=1``: one thread a
container). Baseline, same run, alternating which goes first: the runtime's default, the profile's
CPUs as the thread count (on a 2-core machine that is also what PyTorch picks by itself, so the
baseline is the behaviour before containers were told their thread count). Also printed: one
container alone, each way.
"""

from __future__ import annotations

import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, dump, header, load, median, parser  # noqa: E402

LOOP = """
import time, torch
torch.manual_seed(0)
net = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 256))
opt = torch.optim.SGD(net.parameters(), lr=1e-3)
x = torch.randn(64, 256)
t = time.perf_counter()
for _ in range({steps}):
    opt.zero_grad(); net(x).square().mean().backward(); opt.step()
print(torch.get_num_threads(), round(time.perf_counter() - t, 3))
"""


def side_by_side(rt, env, prof, base: Path, n: int, steps: int) -> tuple[float, list[str]]:
    from rebench_tui.runtime.base import SandboxSpec

    image = rt.ensure_image(env, prof, lambda _m: None)
    boxes = []
    try:
        for i in range(n):
            ws = base / f"ws{i}-{time.monotonic_ns()}"
            (ws / "solution").mkdir(parents=True)
            spec = SandboxSpec(f"bench-threads-{i}-{time.monotonic_ns() % 10**8}", env, prof, ws, ws.with_suffix(".state"))
            boxes.append(rt.create(spec, image, lambda _m: None))
        out: list[str] = [""] * n
        go = threading.Barrier(n + 1)

        def work(i: int) -> None:
            go.wait()
            out[i] = boxes[i].exec(["python3", "-c", LOOP.format(steps=steps)], timeout=600).stdout.strip()

        threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
        for t in threads:
            t.start()
        go.wait()
        started = time.perf_counter()
        for t in threads:
            t.join()
        return time.perf_counter() - started, out
    finally:
        for b in boxes:
            b.stop(remove=True)


def main() -> None:
    ap = parser(__doc__.splitlines()[0], runs=2)
    ap.add_argument("-n", type=int, default=3, help="containers side by side (default 3, the suite's processes)")
    ap.add_argument("--steps", type=int, default=300)
    args = ap.parse_args()
    from rebench_tui.catalog import load_catalog
    from rebench_tui.config import Settings
    from rebench_tui.runtime.docker_runtime import DockerRuntime
    from rebench_tui.runtime.images import Recipes

    header(f"{args.n} torch containers side by side (2-CPU profile): one thread each vs the profile's CPUs")
    settings = Settings(root=ROOT)
    env = load_catalog(ROOT / "environments", Recipes.load(ROOT / "images").names).get("restricted_mlm")
    prof = env.profile("smoke")
    ways = {"default": DockerRuntime.connect(None, settings.images, settings.cache_dir),
            "one thread": DockerRuntime.connect(None, settings.images, settings.cache_dir, threads=1)}
    base = Path(__file__).resolve().parent / ".tmp"
    base.mkdir(parents=True, exist_ok=True)
    runs: dict[str, list[float]] = {k: [] for k in ways}
    alone: dict[str, float] = {}
    with tempfile.TemporaryDirectory(dir=base) as d:
        side_by_side(ways["default"], env, prof, Path(d), 1, 10)  # the image is built (once) outside the figures
        for name, rt in ways.items():
            alone[name], out = side_by_side(rt, env, prof, Path(d), 1, args.steps)
            print(f"   alone, {name}: {alone[name]:.1f} s (threads, loop s: {out[0]}); {load()}")
        for r in range(args.runs):
            order = list(ways) if r % 2 == 0 else list(ways)[::-1]
            for name in order:
                took, out = side_by_side(ways[name], env, prof, Path(d), args.n, args.steps)
                runs[name].append(took)
                print(f"   run {r + 1}, {name}: all {args.n} done in {took:.1f} s (threads, loop s: {'; '.join(out)}); {load()}")
    new, old = median(runs["one thread"]), median(runs["default"])
    print(f"   median of {args.runs}: {args.n} side by side {new:.1f} s with one thread each vs {old:.1f} s with the "
          f"profile's CPUs = {new / old:.2f}x (alone: {alone['one thread']:.1f} s vs {alone['default']:.1f} s)")
    dump(args.json, {"one_thread_s": new, "default_s": old, "alone": alone, "runs": runs})


if __name__ == "__main__":
    main()
