"""Shared helpers for the benchmark scripts: machine facts, load, percentiles, a uniform report.

Every script prints its figure beside a baseline measured in the same run, with the load
average (the machine is shared), and repeats the measurement ``--runs`` times (medians).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def load() -> str:
    one, five, _fifteen = os.getloadavg()
    return f"load {one:.2f}/{five:.2f}"


def machine() -> str:
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    docker = "no docker CLI"
    if shutil.which("docker"):
        try:
            docker = "Docker " + subprocess.run(["docker", "version", "--format", "{{.Server.Version}}"], capture_output=True,
                                                text=True, timeout=10).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            pass
    distro = ""
    try:
        distro = next(line.split("=", 1)[1].strip().strip('"') for line in open("/etc/os-release") if line.startswith("PRETTY_NAME="))
    except (OSError, StopIteration):
        pass
    return (f"{os.cpu_count()} cores, {mem_gib:.0f} GiB, {distro or platform.system()}, {docker}, "
            f"Python {platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M %Z')}")


def pct(values: list[float], p: float) -> float:
    """The p-th percentile (nearest rank) of values."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = max(0, min(len(s) - 1, int(round(p / 100 * len(s) + 0.5)) - 1))
    return s[k]


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def parser(doc: str, runs: int = 3) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc)
    ap.add_argument("--runs", type=int, default=runs, help=f"repetitions; medians are reported (default {runs})")
    ap.add_argument("--json", type=Path, help="also write the figures as JSON here")
    return ap


def header(title: str) -> None:
    print(f"== {title}")
    print(f"   machine: {machine()}")
    print(f"   {load()}")


def verdict(ok: bool) -> str:
    return "MET" if ok else "MISSED"


def dump(path: Path | None, data: dict) -> None:
    if path is not None:
        path.write_text(json.dumps(data, indent=2, default=str))


# -- the audit writer under test: the current one, or the group-commit one it replaced ------------
BASELINE_AUDIT = Path(__file__).resolve().parent / "baseline" / "audit_group_commit.py"
AUDIT_CHOICES = {"both": ("old", "new"), "old": ("old",), "new": ("new",)}


def audit_class(which: str | Path):
    """``AuditLog`` of this checkout ("new"), of the copy of the previous writer kept under
    ``benchmarks/baseline/`` ("old"), or of any other ``audit.py`` given as a path."""
    if which == "new":
        from rebench_tui.trajectory.audit import AuditLog
        return AuditLog
    path = BASELINE_AUDIT if which == "old" else Path(which)
    name = f"rebench_tui.trajectory._audit_{'old' if which == 'old' else path.stem}"
    if name not in sys.modules:  # loaded inside the package, so its relative imports resolve
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod
        spec.loader.exec_module(mod)
    return sys.modules[name].AuditLog


def audit_option(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--audit", choices=sorted(AUDIT_CHOICES), default="both",
                    help="audit writer to measure: the current one (new), the previous group commit kept in "
                         "benchmarks/baseline/ (old), or both, runs alternating (default)")


@contextlib.contextmanager
def sessions_use_audit(which: str):
    """Sessions created inside the block write their audit log with that writer."""
    import inspect

    try:  # where the session makes its audit log: session/core.py since the session was split into services
        import rebench_tui.session.core as session_mod
    except ImportError:  # an older tree measured as "before"
        import rebench_tui.session.session as session_mod  # type: ignore[no-redef]

    cls = audit_class(which)
    accepted = set(inspect.signature(cls).parameters)

    def make(*args, **kwargs):  # arguments newer sessions pass and this writer lacks, while unused (e.g. held=())
        extra = {k: v for k, v in kwargs.items() if k not in accepted}
        if any(extra.values()):
            raise RuntimeError(f"the {which} audit writer cannot take {sorted(extra)}")
        return cls(*args, **{k: v for k, v in kwargs.items() if k in accepted})

    real = session_mod.AuditLog
    session_mod.AuditLog = make
    try:
        yield
    finally:
        session_mod.AuditLog = real
