"""``rebench-tui calibrate``: measure a profile's anchors on this host.

The starting solution and the reference solution go through the real scorer in the real sandbox
(a container, or the local runtime on a GPU host without Docker), ``runs`` times each, in one
session kept under the cache folder (``calibration-sessions/``; its audit log holds every
scoring). Where the reference is files only, the two take turns (start, reference, start, ...)
so that a change in the machine's load falls on both; where a command builds it (a training
run), every start scoring comes first. How the reference is put in place is data in the manifest (``[profiles.<p>.calibration]``:
repository files copied into the home, then an optional command run as the participant), so
nothing here knows any environment. The medians become the anchors, written with each run's raw
score, their spread and the host's facts (GPU model, count and driver, image id, package
versions, scorer digest, prepared assets, date, rebench-tui version, git commit) to
``<config>/calibration/<env>/<profile>.json`` (:mod:`.catalog.calibration`).
"""

from __future__ import annotations

import json
import platform
import shutil
import socket
import subprocess
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from secrets import token_urlsafe
from typing import Any, Callable

from . import __version__
from .assets import AssetStore
from .catalog import Environment, Profile
from .catalog.anchors import manifest_anchors
from .catalog.calibration import Calibration, SolutionRuns, calibration_path
from .catalog.manifest import CalibrationSpec, SetupSpec
from .errors import RebenchError
from .runtime import Runtime
from .scoring import Direction

SESSIONS = "calibration-sessions"
Progress = Callable[[str], None]

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


class CalibrationError(RebenchError):
    """A calibration that could not run or did not give usable anchors."""


@dataclass
class Outcome:
    calibration: Calibration
    path: Path
    previous: Calibration | None  # the file this one replaced, if any
    manifest_start: float
    manifest_reference: float

    def drift(self) -> list[str]:
        """Where the manifest's figures lie outside the profile's tolerance of these medians."""
        return drift_lines(self.calibration, self.manifest_start, self.manifest_reference, self.tolerance)

    tolerance: tuple[float, float] | None = None


def drift_lines(cal: Calibration, start: float, reference: float, tolerance: tuple[float, float] | None) -> list[str]:
    if tolerance is None:
        return []
    out = []
    for side, figure, runs, tol in (("start", start, cal.start, tolerance[0]), ("reference", reference, cal.reference, tolerance[1])):
        if abs(figure - runs.median) > tol:
            out.append(f"the manifest's {side} {figure:g} is {abs(figure - runs.median):.3g} from the calibrated median "
                       f"{runs.median:.6g} (tolerance {tol:g})")
    return out


def _git(root: Path, env: Environment) -> dict[str, Any]:
    def run(*args: str) -> str | None:
        try:
            r = subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=20)
        except (OSError, subprocess.SubprocessError):
            return None
        return r.stdout.strip() if r.returncode == 0 else None

    commit = run("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "note": "not a git checkout"}
    changed = run("status", "--porcelain", "--", str(env.path))
    return {"commit": commit, "environment_changed": bool(changed), "changes": (changed or "").splitlines()[:20]}


def _probe(session, progress: Progress) -> dict[str, Any]:
    progress("reading the sandbox's Python packages and GPUs")
    r = session.sandbox.exec([session.sandbox.python, "-c", PROBE], user="root", timeout=180)
    lines = [line for line in r.stdout.splitlines() if line.startswith("{")]
    if r.exit_code != 0 or not lines:
        return {"probe_error": (r.stderr or r.stdout)[-1000:] or f"exit {r.exit_code}"}
    try:
        return json.loads(lines[-1])
    except ValueError as exc:
        return {"probe_error": f"unreadable probe output: {exc}"}


def closed_to(path: Path, uid: int) -> Path | None:
    """The first existing folder on the way to ``path`` that ``uid`` cannot pass through (it owns
    it without search permission, or does not own it and others have none), or None. Folders
    still to be made get the umask's usual 755."""
    import os
    import stat

    for folder in [*reversed(path.parents), path]:
        try:
            st = folder.stat()
        except FileNotFoundError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return None
        need = stat.S_IXUSR if st.st_uid == uid else stat.S_IXOTH
        if not st.st_mode & need and not (os.getuid() == uid == 0):
            return folder
    return None


def give_home(session, uid: int | None) -> None:
    """Local runtime run as root: hand the home to ``uid`` (the participant's scorer helpers run the
    solution as its owner), so the solution runs as that user, as in a container (uid 1000)."""
    if uid is None or session.sandbox.isolated:
        return
    import os

    home = session.workspace
    for root, dirs, files in os.walk(home):
        for name in dirs + files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                os.chown(path, uid, uid)
        dirs[:] = [d for d in dirs if not os.path.islink(os.path.join(root, d))]
    os.chown(home, uid, uid)


def copy_setup_files(env: Environment, setup: SetupSpec, home: Path,
                     said: Callable[[str, str], None] = lambda _src, _dest: None) -> None:
    """Copy a set-up's files from the environment folder into ``home`` (a folder merged into place)."""
    for dest, src in setup.files.items():
        source, target = env.path / src, home / dest
        said(src, dest)
        if source.is_dir():
            shutil.copytree(source, target, dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
            shutil.copymode(source, target)


def put_in_place(session, env: Environment, setup: SetupSpec, label: str, progress: Progress = lambda _m: None,
                 owner: int | None = None) -> dict[str, Any]:
    """Put one solution in place: copy its files into the home, then run its command as the participant."""
    info: dict[str, Any] = {"files": dict(setup.files), "command": setup.command, "workdir": setup.workdir}
    copy_setup_files(env, setup, session.workspace, lambda src, dest: progress(f"{label}: {src} -> ~/{dest}"))
    sb = session.sandbox
    give_home(session, owner)
    if setup.files and sb.isolated:  # copied in by this process: the participant owns their files
        owned = [f"{sb.home}/{dest}" for dest in setup.files]
        r = sb.exec(["chown", "-R", "agent:agent", *owned], user="root", timeout=120)
        if r.exit_code != 0:
            raise CalibrationError(f"{label}: could not give the copied files to the participant: {r.stderr.strip()[-500:]}",
                                   kept=f"the calibration session in {session.folder}")
    if setup.command:
        argv = [sb.python if setup.command[0] == "python3" else setup.command[0], *setup.command[1:]]
        workdir = sb.home if not setup.workdir else f"{sb.home}/{setup.workdir}"
        progress(f"{label}: running `{' '.join(setup.command)}` as the participant in ~/{setup.workdir} "
                 f"(up to {setup.timeout:g} s)")
        started = time.monotonic()
        r = sb.exec(argv, user="agent", workdir=workdir, timeout=setup.timeout)
        info["command_s"] = round(time.monotonic() - started, 3)
        info["output_tail"] = (r.stdout[-1500:] + r.stderr[-1500:])
        if not r.ok:
            why = "timed out" if r.timed_out else f"exited with status {r.exit_code}"
            raise CalibrationError(f"{label}: `{' '.join(setup.command)}` {why}: {(r.stderr or r.stdout).strip()[-800:]}",
                                   kept=f"the calibration session's records and files in {session.folder}; "
                                        "no calibration file was written (an earlier one is unchanged)",
                                   fix="run the command by hand in that folder's workspace to see why, fix the "
                                       "environment's reference, then calibrate again")
        progress(f"{label}: command done in {info['command_s']:.1f} s")
    return info


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


def calibration_secrets(env: Environment, profile: str, given: dict[str, str] | None) -> tuple[dict[str, str], list[str]]:
    """The secrets a calibration runs with: those given, plus random values for the ones the
    profile's calibration table says only a stand-in checks; returns them and the names drawn."""
    prof = env.profile(profile)
    secrets = dict(given or {})
    spec = prof.calibration
    drawn = [n for n in (spec.random_secrets if spec else []) if n in prof.secrets and n not in secrets]
    for name in drawn:
        secrets[name] = "calibration-" + token_urlsafe(18)
    return secrets, drawn


def _calibration_spec(env: Environment, profile: str, prof: Profile, runtime: Runtime, runs: int,
                      participant_uid: int | None) -> CalibrationSpec:
    """The profile's calibration table, once every reason not to calibrate here is ruled out."""
    spec = prof.calibration
    if spec is None:
        raise CalibrationError(f"{env.id} ({profile}) says nothing about how to calibrate it",
                               fix=f"add [profiles.{profile}.calibration] to {env.path / 'environment.toml'} "
                                   "(reference = {{ files = {{...}}, command = [...] }}; see environments/README.md)")
    if spec.unavailable:
        raise CalibrationError(f"{env.id} ({profile}) cannot be calibrated on this project's machines: {spec.unavailable}",
                               kept=f"its anchors stay the manifest's ({prof.anchors})")
    assert spec.reference is not None  # the manifest's validation guarantees one
    if runs < 1:
        raise CalibrationError("--runs must be at least 1")
    if runtime.remote:
        raise CalibrationError("calibrate runs on this machine's engine or the local runtime, not on a remote engine",
                               fix="run it on the GPU host itself (`--runtime local` where it has no Docker)")
    if participant_uid is not None:
        import os

        if runtime.kind != "local" or os.geteuid() != 0:
            raise CalibrationError("--participant-uid is for the local runtime run as root (in a container the participant "
                                   "is uid 1000 already)", fix="leave it out, or run as root with --runtime local")
    return spec


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


def _score_both(session, env: Environment, spec: CalibrationSpec, runs: int, progress: Progress,
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


def _close_session(session, progress: Progress) -> None:
    session.close(pause_clock=None)
    try:
        session.sandbox.stop(remove=True)
    except Exception as exc:  # noqa: BLE001 - said, not raised over the calibration's own outcome
        progress(f"could not remove the calibration sandbox: {exc}")


def _require_reference_better(env: Environment, start: SolutionRuns, reference: SolutionRuns, session) -> None:
    direction = env.manifest.score.direction
    better = reference.median < start.median if direction is Direction.LOWER else reference.median > start.median
    if not better:
        raise CalibrationError(f"the reference solution did not beat the starting one: start median {start.median:.6g}, "
                               f"reference median {reference.median:.6g} ({direction.value} is better)",
                               kept=f"the calibration session's records in {session.folder}; no calibration file was written",
                               fix="check the reference set-up in the manifest's calibration table, then calibrate again")


def _host(runtime: Runtime, session, facts: dict[str, Any], prof: Profile, desc: dict[str, Any], participant_uid: int | None,
          started_wall: float) -> dict[str, Any]:
    return {"hostname": socket.gethostname(), "platform": platform.platform(), "runtime": runtime.kind,
            "engine": runtime.host, "isolated": session.sandbox.isolated, "cpus": facts.get("cpus"),
            "cpu": facts.get("cpu"), "python": facts.get("python"), "profile_gpus": prof.gpus,
            "container": desc.get("container"), "participant_uid": participant_uid,
            "started": datetime.fromtimestamp(started_wall, timezone.utc).isoformat(timespec="seconds"),
            **({"probe_error": facts["probe_error"]} if "probe_error" in facts else {})}


def _calibration_record(env: Environment, profile: str, prof: Profile, runtime: Runtime, session, *, runs: int,
                        start: SolutionRuns, reference: SolutionRuns, facts: dict[str, Any], image_id: str | None,
                        details: dict[str, Any], participant_uid: int | None, started_wall: float, started: float,
                        project_root: Path) -> Calibration:
    desc = session.sandbox.describe()
    image = None
    if session.meta.image is not None:
        image = {"tag": session.meta.image, "id": image_id, "base_image": prof.base_image}
    assets = session.meta.metadata.get("assets")
    date = datetime.now(timezone.utc).isoformat(timespec="seconds")
    duration_s = round(time.monotonic() - started, 1)
    return Calibration(
        env_id=env.id, profile=profile, env_version=env.manifest.version, task_id=env.manifest.task_id,
        direction=env.manifest.score.direction.value, runs=runs, start=start, reference=reference,
        date=date, duration_s=duration_s, host=_host(runtime, session, facts, prof, desc, participant_uid, started_wall),
        gpus=list(facts.get("gpus") or []), image=image, packages=dict(facts.get("packages") or {}),
        scorer_reported=details, scorer_sha256=env.scorer_sha256,
        scorer_sha256_reported=details.get("scorer_sha256"), assets=assets, rebench_tui=__version__,
        git=_git(project_root, env),
        manifest={"start": prof.start_score, "reference": prof.reference_score, "anchors": prof.anchors},
        session=str(session.folder),
    )


def _previous_calibration(path: Path) -> Calibration | None:
    """The calibration file ``path`` holds now, if it is there and readable."""
    if not path.is_file():
        return None
    try:
        from .catalog.calibration import load_calibration

        return load_calibration(path)
    except RebenchError:
        return None


def calibrate(env: Environment, profile: str, runtime: Runtime, *, runs: int, config_dir: Path, cache_dir: Path,
              project_root: Path, secrets: dict[str, str] | None = None, progress: Progress = lambda _m: None,
              participant_uid: int | None = None) -> Outcome:
    """Calibrate ``env``/``profile`` on ``runtime``; returns what was written where.

    ``participant_uid`` (local runtime run as root only): the home belongs to this user, so the
    scorer runs the solution as it does in a container (as uid 1000, not as root)."""
    from .session import Session

    prof = env.profile(profile)
    spec = _calibration_spec(env, profile, prof, runtime, runs, participant_uid)
    secrets, drawn = calibration_secrets(env, profile, secrets)
    if drawn:
        progress(f"drew random values for {', '.join(drawn)} (only a stand-in service checks them)")
    asset_store = AssetStore(cache_dir) if env.manifest.assets is not None else None
    started_wall, started = time.time(), time.monotonic()
    closed = closed_to(cache_dir / SESSIONS, participant_uid) if participant_uid is not None else None
    if closed is not None:
        raise CalibrationError(f"uid {participant_uid} could not reach the calibration's home under {cache_dir / SESSIONS}: "
                               f"{closed} is closed to it (mode {oct(closed.stat().st_mode & 0o777)})",
                               kept="nothing was run; no calibration file was written",
                               fix="put the cache where every user may pass, e.g. "
                                   "XDG_CACHE_HOME=/var/tmp/rebench-cache rebench-tui calibrate ...")
    progress(f"calibrating {env.id} ({profile}) on the {runtime.kind} runtime: {runs} scoring(s) of the starting solution, "
             f"then {runs} of the reference")
    session = Session.create(env, profile, runtime, cache_dir / SESSIONS, progress=progress, asset_store=asset_store,
                             secrets=secrets, anchors=manifest_anchors(env, profile))
    try:
        facts = _probe(session, progress)
        image_id = session.sandbox.image_id()
        start_setup = put_in_place(session, env, spec.start, "start", progress, owner=participant_uid)
        s_runs, r_runs, ref_setup = _score_both(session, env, spec, runs, progress, participant_uid)
        session.finish("calibrated")
    finally:
        _close_session(session, progress)
    start = SolutionRuns.of(s_runs.scores, s_runs.durations, setup=start_setup, messages=s_runs.messages)
    reference = SolutionRuns.of(r_runs.scores, r_runs.durations, setup=ref_setup, messages=r_runs.messages)
    _require_reference_better(env, start, reference, session)
    cal = _calibration_record(env, profile, prof, runtime, session, runs=runs, start=start, reference=reference,
                              facts=facts, image_id=image_id, details=s_runs.details, participant_uid=participant_uid,
                              started_wall=started_wall, started=started, project_root=project_root)
    path = calibration_path(config_dir, env.id, profile)
    previous = _previous_calibration(path)
    cal.save(path)
    tol = (spec.tolerance.start, spec.tolerance.reference) if spec.tolerance is not None else None
    return Outcome(cal, path, previous, prof.start_score, prof.reference_score, tol)
