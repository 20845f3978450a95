"""The command line's start-up: `rebench-tui --help` and `rebench-tui list`, this checkout's
package against another revision's (default: main), both measured in the same run.

The other revision's `rebench_tui/` is unpacked with `git archive` into a scratch folder under
benchmarks/.tmp/; each command runs as a fresh process with the same interpreter (the
console script's own call, `from rebench_tui.cli import main`), that tree first on its path,
runs alternating between the trees, after one untimed run of each (the unpacked tree's first
run compiles its .pyc files). Also measured: the import of `rebench_tui.cli` alone
(`python -X importtime`, its cumulative figure) and how many modules `--help` and `list` leave
loaded. Medians of ``--runs``.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, dump, header, load, median, parser  # noqa: E402

ENTRY = ("import sys; from rebench_tui.cli import main; sys.argv[0] = 'rebench-tui'; "
         "sys.exit(main(sys.argv[1:]))")
COUNT = ("import sys, atexit; atexit.register(lambda: print('MODULES', len(sys.modules), file=sys.stderr)); "
         "from rebench_tui.cli import main; sys.argv[0] = 'rebench-tui'; sys.exit(main(sys.argv[1:]))")
CASES = {"--help": ["--help"], "list": ["list"]}


def unpack(ref: str, dest: Path) -> Path:
    """``ref``'s rebench_tui/ in ``dest`` (the environments are read from this checkout's)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", ref, "rebench_tui"], capture_output=True, check=True)
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def _env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(tree), "REBENCH_ENVIRONMENTS_DIR": str(ROOT / "environments"),
            "COLUMNS": "100"}


def run(tree: Path, code: str, argv: list[str], *flags: str) -> tuple[float, subprocess.CompletedProcess]:
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, *flags, "-c", code, *argv], cwd=tree, env=_env(tree), capture_output=True,
                       text=True, timeout=300)
    return time.perf_counter() - t0, p


def import_us(tree: Path) -> int:
    """Cumulative microseconds of `import rebench_tui.cli`, as -X importtime reports it."""
    _t, p = run(tree, "import rebench_tui.cli", [], "-X", "importtime")
    line = next(x for x in reversed(p.stderr.splitlines()) if x.rstrip().endswith("| rebench_tui.cli"))
    return int(line.split("|")[1])


def modules_after(tree: Path, argv: list[str]) -> int:
    _t, p = run(tree, COUNT, argv)
    return int(next(x for x in p.stderr.splitlines() if x.startswith("MODULES")).split()[1])


def check_trees(trees: dict[str, Path]) -> None:
    """Each tree's `rebench_tui.cli` is the one it holds, and both print the same help."""
    helps = {}
    for name, tree in trees.items():
        _t, p = run(tree, "import rebench_tui.cli as c; print(c.__file__)", [])
        where = Path(p.stdout.strip())
        assert where.is_relative_to(tree), f"{name}: imported {where}, not from {tree}"
        helps[name] = run(tree, ENTRY, ["--help"])[1].stdout
        print(f"   {name}: {where.relative_to(tree)}")
    if len(set(helps.values())) != 1:
        print("   NOTE: the two trees print different --help texts")


def measure(trees: dict[str, Path], runs: int) -> dict:
    times: dict[str, dict[str, list[float]]] = {c: {n: [] for n in trees} for c in [*CASES, "import"]}
    codes: dict[str, dict[str, int]] = {c: {} for c in CASES}
    order = list(trees)
    for tree in trees.values():  # not timed: the unpacked tree compiles its .pyc files here
        for argv in CASES.values():
            run(tree, ENTRY, argv)
    for i in range(runs):
        for name in order if i % 2 == 0 else order[::-1]:  # alternate which tree goes first
            tree = trees[name]
            for case, argv in CASES.items():
                dt, p = run(tree, ENTRY, argv)
                times[case][name].append(dt * 1000)
                codes[case][name] = p.returncode
            times["import"][name].append(import_us(tree) / 1000)
    mods = {case: {n: modules_after(t, argv) for n, t in trees.items()} for case, argv in CASES.items()}
    return {"ms": {c: {n: median(v) for n, v in d.items()} for c, d in times.items()}, "exit": codes, "modules": mods}


def report(res: dict, old: str, new: str) -> None:
    labels = {"--help": "rebench-tui --help", "list": "rebench-tui list", "import": "import rebench_tui.cli (-X importtime)"}
    for case, label in labels.items():
        o, n = res["ms"][case][old], res["ms"][case][new]
        rc = f"   exit {res['exit'][case][old]}/{res['exit'][case][new]}" if case in res["exit"] else ""
        print(f"   {label:<40} {old} {o:7.0f} ms   {new} {n:7.0f} ms   {n / o:.2f}x{rc}")
    for case in CASES:
        m = res["modules"][case]
        print(f"   {'modules loaded by ' + case:<40} {old} {m[old]:7d}      {new} {m[new]:7d}")


def main() -> None:
    ap = parser(__doc__.splitlines()[0], runs=5)
    ap.add_argument("--base-ref", default="main", help="the revision measured beside this checkout (default: main)")
    args = ap.parse_args()
    header(f"command-line start-up: this checkout vs {args.base_ref}, {args.runs} runs each, medians")
    scratch = Path(__file__).resolve().parent / ".tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch) as d:
        old = f"{args.base_ref}"
        trees = {old: unpack(args.base_ref, Path(d)), "this": ROOT}
        check_trees(trees)
        res = measure(trees, args.runs)
    report(res, old, "this")
    print(f"   {load()} after")
    dump(args.json, {"base_ref": args.base_ref, **res})


if __name__ == "__main__":
    main()
