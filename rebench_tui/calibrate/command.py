"""``rebench-tui calibrate`` from start to end: the checks that calibrating makes sense here,
the secrets it runs with, the calibration session (made, measured in, finished and closed), the
check that the reference beat the start, and the file written."""

from __future__ import annotations

import time
from pathlib import Path
from secrets import token_urlsafe

from ..assets import AssetStore
from ..catalog import Environment, Profile
from ..catalog.anchors import manifest_anchors
from ..catalog.calibration import SolutionRuns, calibration_path
from ..catalog.manifest import CalibrationSpec
from ..runtime import Runtime
from ..scoring import Direction
from .measure import probe, score_both
from .outcome import CalibrationError, Outcome, Progress
from .record import calibration_record, previous_calibration
from .solutions import closed_to, put_in_place

SESSIONS = "calibration-sessions"


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


def calibrate(env: Environment, profile: str, runtime: Runtime, *, runs: int, config_dir: Path, cache_dir: Path,
              project_root: Path, secrets: dict[str, str] | None = None, progress: Progress = lambda _m: None,
              participant_uid: int | None = None) -> Outcome:
    """Calibrate ``env``/``profile`` on ``runtime``; returns what was written where.

    ``participant_uid`` (local runtime run as root only): the home belongs to this user, so the
    scorer runs the solution as it does in a container (as uid 1000, not as root)."""
    from ..session import Session

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
        facts = probe(session, progress)
        image_id = session.sandbox.image_id()
        start_setup = put_in_place(session, env, spec.start, "start", progress, owner=participant_uid)
        s_runs, r_runs, ref_setup = score_both(session, env, spec, runs, progress, participant_uid)
        session.finish("calibrated")
    finally:
        _close_session(session, progress)
    start = SolutionRuns.of(s_runs.scores, s_runs.durations, setup=start_setup, messages=s_runs.messages)
    reference = SolutionRuns.of(r_runs.scores, r_runs.durations, setup=ref_setup, messages=r_runs.messages)
    _require_reference_better(env, start, reference, session)
    cal = calibration_record(env, profile, prof, runtime, session, runs=runs, start=start, reference=reference,
                              facts=facts, image_id=image_id, details=s_runs.details, participant_uid=participant_uid,
                              started_wall=started_wall, started=started, project_root=project_root)
    path = calibration_path(config_dir, env.id, profile)
    previous = previous_calibration(path)
    cal.save(path)
    tol = (spec.tolerance.start, spec.tolerance.reference) if spec.tolerance is not None else None
    return Outcome(cal, path, previous, prof.start_score, prof.reference_score, tol)
