"""Measuring: the probe of the sandbox's Python packages and GPUs, and the scorings of the
starting and reference solutions, ``runs`` times each, taking turns where the reference is files
only (so a change in the machine's load falls on both), all starts first where a command builds
the reference."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from ..catalog import Environment
from ..catalog.manifest import CalibrationSpec, SetupSpec
from .outcome import CalibrationError, Progress
from .solutions import give_home, put_in_place

# Run in the sandbox as root with its Python: what the scores were measured with.
PROBE = r'''
import json, os, platform, shutil, subprocess
out = {"python": platform.python_version(), "machine": platform.machine(), "cpus": os.cpu_count()}
try:
    with open("/proc/cpuinfo") as fh:
        out["cpu"] = next((l.split(":", 1)[1].strip() for l in fh if l.startswith("model name")), None)
except OSError:
    pass
try:
    from importlib import metadata
    out["packages"] = {d.metadata["Name"]: d.version for d in metadata.distributions() if d.metadata["Name"]}
except Exception as exc:
    out["packages_error"] = str(exc)
gpus = []
smi = shutil.which("nvidia-smi")
if smi:
    try:
        text = subprocess.run([smi, "--query-gpu=index,name,driver_version,memory.total,uuid", "--format=csv,noheader,nounits"],
                              capture_output=True, text=True, timeout=60).stdout
        for line in text.splitlines():
            p = [x.strip() for x in line.split(",")]
            if len(p) >= 5:
                gpus.append({"index": p[0], "name": p[1], "driver": p[2], "memory_mib": p[3], "uuid": p[4]})
    except Exception as exc:
        out["nvidia_smi_error"] = str(exc)
visible = os.environ.get("CUDA_VISIBLE_DEVICES")
if visible is not None and gpus:
    keep = {v.strip() for v in visible.split(",") if v.strip()}
    gpus = [g for g in gpus if g["index"] in keep or g["uuid"] in keep]
out["gpus"] = gpus
print(json.dumps(out))
'''
# Scorer details that are bookkeeping, not facts of the setting.
_NOT_FACTS = {"attempt", "duration_s", "final", "scorer_sha256", "scorer_sha256_expected", "scorer_matches_catalog",
              "stdout_tail", "stderr_tail", "exit_code", "seed"}


def probe(session, progress: Progress) -> dict[str, Any]:
    """The sandbox's Python, packages and GPUs as :data:`PROBE` prints them (or why it could not)."""
    progress("reading the sandbox's Python packages and GPUs")
    r = session.sandbox.exec([session.sandbox.python, "-c", PROBE], user="root", timeout=180)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.exit_code != 0 or not lines:
        return {"probe_error": (r.stderr or r.stdout)[-1000:] or f"exit {r.exit_code}"}
    try:
        return json.loads(lines[-1])
    except ValueError as exc:
        return {"probe_error": f"unreadable probe output: {exc}"}


class _Runs:
    """One solution's scorings as they come in."""

    def __init__(self, label: str, runs: int) -> None:
        self.label, self.runs = label, runs
        self.scores: list[float] = []
        self.durations: list[float] = []
        self.messages: list[dict[str, Any]] = []
        self.details: dict[str, Any] = {}

    def score_once(self, session, progress: Progress) -> None:
        i = len(self.scores) + 1
        progress(f"{self.label}: scoring {i} of {self.runs}")
        rec = session.score()
        if rec is None:
            raise CalibrationError(f"{self.label}: scoring {i} was cancelled", kept=f"the calibration session in {session.folder}")
        if not rec.valid:
            raise CalibrationError(f"{self.label}: scoring {i} of {self.runs} gave no valid score: "
                                   f"{json.dumps(rec.message, default=str)[:800]}",
                                   kept=f"the calibration session's records in {session.folder} (its audit.jsonl has the "
                                        "scorer's output); no calibration file was written (an earlier one is unchanged)",
                                   fix="look at that scoring's details, fix the environment or its reference, then calibrate again")
        self.scores.append(rec.score)
        self.durations.append(round(rec.duration_s, 3))
        self.messages.append(rec.message)
        if not self.details:
            self.details = {k: v for k, v in rec.details.items()
                            if k not in _NOT_FACTS and isinstance(v, (str, int, float, bool))}
            self.details["scorer_sha256"] = rec.details.get("scorer_sha256")
        progress(f"{self.label}: scoring {i} of {self.runs}: {rec.score:.6g} ({rec.duration_s:.1f} s)")


class _Swap:
    """Switches the home between the starting and the reference solution, where the reference is
    files only: what the reference's files replace is kept aside, and put back for the start."""

    def __init__(self, session, setup: SetupSpec, owner: int | None = None) -> None:
        import tempfile

        self.session = session
        self.owner = owner
        self.kept = Path(tempfile.mkdtemp(prefix="rebench-calibration-"))
        self.dests = list(setup.files)
        for n, dest in enumerate(self.dests):
            src = session.workspace / dest
            if src.is_dir():
                shutil.copytree(src, self.kept / str(n), symlinks=True)
            elif src.exists():
                shutil.copy2(src, self.kept / str(n))

    def restore_start(self) -> None:
        for n, dest in enumerate(self.dests):
            target, saved = self.session.workspace / dest, self.kept / str(n)
            if target.is_dir() and not target.is_symlink():
                shutil.rmtree(target)
            else:
                target.unlink(missing_ok=True)
            if saved.is_dir():
                shutil.copytree(saved, target, symlinks=True)
            elif saved.exists():
                shutil.copy2(saved, target)
        sb = self.session.sandbox
        give_home(self.session, self.owner)
        if sb.isolated:
            sb.exec(["chown", "-R", "agent:agent", *[f"{sb.home}/{d}" for d in self.dests]], user="root", timeout=120)

    def close(self) -> None:
        shutil.rmtree(self.kept, ignore_errors=True)


def _score_taking_turns(session, env: Environment, setup: SetupSpec, s_runs: _Runs, r_runs: _Runs, runs: int,
                        progress: Progress, owner: int | None) -> dict[str, Any]:
    """Files only: the two solutions take turns (start, reference, start, ...), so a change in the
    machine's load while they are measured falls on both alike. Returns the reference's set-up."""
    swap = _Swap(session, setup, owner=owner)
    try:
        for i in range(runs):
            if i:
                swap.restore_start()
            s_runs.score_once(session, progress)
            ref_setup = put_in_place(session, env, setup, "reference",
                                     progress if i == 0 else (lambda _m: None), owner=owner)
            r_runs.score_once(session, progress)
    finally:
        swap.close()
    return ref_setup


def _score_starts_first(session, env: Environment, setup: SetupSpec, s_runs: _Runs, r_runs: _Runs, runs: int,
                        progress: Progress, owner: int | None) -> dict[str, Any]:
    """A command builds the reference (training, say): all starts first, then all references."""
    for _ in range(runs):
        s_runs.score_once(session, progress)
    ref_setup = put_in_place(session, env, setup, "reference", progress, owner=owner)
    for _ in range(runs):
        r_runs.score_once(session, progress)
    return ref_setup


def score_both(session, env: Environment, spec: CalibrationSpec, runs: int, progress: Progress,
                owner: int | None) -> tuple[_Runs, _Runs, dict[str, Any]]:
    """Score the start (already in place) and the reference ``runs`` times each; returns both
    solutions' runs and the reference's set-up, with the order they were scored in."""
    s_runs, r_runs = _Runs("start", runs), _Runs("reference", runs)
    if spec.reference.command is None:
        ref_setup = _score_taking_turns(session, env, spec.reference, s_runs, r_runs, runs, progress, owner)
        order = "alternating"
    else:
        ref_setup = _score_starts_first(session, env, spec.reference, s_runs, r_runs, runs, progress, owner)
        order = "starts first"
    ref_setup["order"] = order
    return s_runs, r_runs, ref_setup
