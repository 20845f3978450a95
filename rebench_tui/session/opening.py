"""Making a new session (folder, sandbox, first record) and reopening one (lock, sandbox,
settling an interrupted scoring, the resume row)."""

from __future__ import annotations

import getpass
import platform
import shutil
import socket
from pathlib import Path
from secrets import randbelow
from typing import Callable

from .. import __version__
from ..assets import AssetStatus, AssetStore
from ..catalog import Anchors, Environment, Profile, Rehearsal, manifest_anchors
from ..catalog.setting import setting_record, setting_words
from ..clock import Clock, SystemClock, check_time_limit, format_hms
from ..errors import SessionError
from ..runtime import Runtime, Sandbox, SandboxSpec
from ..store import Store
from ..trajectory import score_log
from ..trajectory.audit import RecordClosed, read_entries
from ..trajectory.entries import INT32_MAX, log
from ..trajectory.records import ClockModel, Participant, SessionMeta
from ..trajectory.rules import restore_rules
from ..trajectory.sealing import CLEAR_WARNING, configured_public_key
from ..trajectory.state import chain_state
from ..trajectory.verify import Report, check_score_log
from .layout import AUDIT, LOCK, META, SCORE_LOG, STATE, WORKSPACE, new_session_id
from .lock import SessionLock
from .opened import OpenedSession, S
from .recount import restore_after_recount

Progress = Callable[[str], None]


def create_session(cls: type[S], env: Environment, profile_name: str, runtime: Runtime, sessions_dir: Path, *,
                   time_limit_s: float | None, clock: Clock | None, store: Store | None, progress: Progress,
                   extra_env: dict[str, str] | None, asset_store: AssetStore | None, secrets: dict[str, str] | None,
                   anchors: Anchors | None, rehearsal: Rehearsal | None = None,
                   participant: Participant | None = None) -> S:
    """A new session. ``anchors``: what its scores are normalized with (default: the manifest's; the
    CLI passes ``catalog.anchors_in_effect``). ``rehearsal``: fewer GPUs or stand-ins for outside
    services (recorded). ``participant``: who works, under which conditions (recorded)."""
    clock = clock or SystemClock()
    if time_limit_s is not None:
        try:
            check_time_limit(time_limit_s)
        except ValueError as exc:
            raise SessionError(f"time limit refused: {exc}", kept="nothing was started",
                               fix="give a working time of at most 7 days (the paper's sessions are 8h, the default)") from None
    profile = rehearsed(env.profile(profile_name), rehearsal)
    anchors = anchors or manifest_anchors(env, profile.name)
    assets = _required_assets(env, profile, asset_store)
    secrets = _required_secrets(env, profile, secrets)
    seal_to = configured_public_key() if env.manifest.score.visibility == "hidden" else None  # a bad key: refused now
    image = runtime.ensure_image(env, profile, progress)
    now = clock.time()
    sid = new_session_id(env.id, now)
    folder = sessions_dir / sid
    spec = _lay_out(folder, sid, env, profile, extra_env, assets, secrets)
    try:
        sandbox = runtime.create(spec, image, progress)
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)  # nothing was recorded yet; leave no half session
        raise
    meta = _new_meta(sid, now, env, profile, runtime, sandbox, image, time_limit_s, anchors, assets)
    meta.participant = participant or Participant()
    meta.seal_to = seal_to
    meta.save(folder / META)
    score_log.ensure(folder / SCORE_LOG)
    session = cls(folder, meta, env, sandbox, clock, store, secrets=spec.secrets)
    session.lock.acquire()
    session.wclock.resume()
    session.core.save()
    session.audit.append(_started_row(session, runtime, anchors))
    session.core.index()
    return session


def rehearsed(profile: Profile, rehearsal: Rehearsal | None) -> Profile:
    """The profile as the rehearsal asks (fewer GPUs, stand-ins); what it cannot take is refused."""
    try:
        return (rehearsal or Rehearsal()).apply(profile)
    except ValueError as exc:
        raise SessionError(str(exc), kept="nothing was started", fix="leave out --gpus or --stand-ins, or change them") from None


def _required_assets(env: Environment, profile: Profile, asset_store: AssetStore | None) -> AssetStatus | None:
    if env.manifest.assets is None:
        return None
    if asset_store is None:
        raise SessionError(f"{env.id} needs prepared assets and no asset store was given")
    return asset_store.require(env, profile.name)  # fails fast, naming the prepare command


def _required_secrets(env: Environment, profile: Profile, secrets: dict[str, str] | None) -> dict[str, str]:
    secrets = {**(secrets or {}), **profile.standin_secrets()}
    missing = [n for n in profile.secrets if n not in secrets]
    if missing:
        raise SessionError(f"{env.id} ({profile.name}) needs secrets that were not given: {', '.join(missing)}",
                           kept="nothing was started", fix="pass them (the CLI reads them from the environment or the secrets file)")
    return secrets


def _lay_out(folder: Path, sid: str, env: Environment, profile: Profile, extra_env: dict[str, str] | None,
             assets: AssetStatus | None, secrets: dict[str, str]) -> SandboxSpec:
    """The new session's folder: the starting solution and the instructions in its workspace."""
    workspace, state = folder / WORKSPACE, folder / STATE
    workspace.mkdir(parents=True)
    state.mkdir()
    shutil.copytree(env.solution_dir, workspace / "solution")
    (workspace / "instructions.txt").write_text(env.instructions, encoding="utf-8")
    return SandboxSpec(session_id=sid, env=env, profile=profile, workspace=workspace, state_dir=state,
                       extra_env=dict(extra_env or {}), assets=None if assets is None else assets.folder,
                       secrets={n: secrets[n] for n in profile.secrets})


def _new_meta(sid: str, now: float, env: Environment, profile: Profile, runtime: Runtime, sandbox: Sandbox, image: str,
              time_limit_s: float | None, anchors: Anchors, assets: AssetStatus | None) -> SessionMeta:
    m = env.manifest
    desc = sandbox.describe()
    return SessionMeta(
        id=sid, run_id=randbelow(INT32_MAX) + 1, env_id=env.id, task_id=m.task_id, task_version=m.version,
        title=m.title, profile=profile.name, runtime=runtime.kind, host=runtime.host, isolated=sandbox.isolated,
        image=image, container=desc.get("container"), created_at=int(now * 1000), started_at=int(now * 1000),
        clock=ClockModel(limit_s=time_limit_s or m.time.limit), direction=m.score.direction.value,
        aggregation=m.score.aggregation.value, visibility=m.score.visibility, start_score=anchors.start,
        reference_score=anchors.reference, anchors=anchors.to_record(), score_timeout_s=profile.score_timeout,
        setting=setting_record(m.paper, profile.setting), timing=m.score.timing, recount_runs=m.score.recount,
        gpus=None if profile.gpus == env.profile(profile.name).gpus else profile.gpus,
        metadata={"rebench_tui": __version__, "python": platform.python_version(), "hostname": socket.gethostname(),
                  "user": getpass.getuser(), "isInteractive": True, "environment_path": str(env.path), "sandbox": desc,
                  "assets": None if assets is None else {"folder": str(assets.folder), "mode": assets.mode,
                                                         "manifest_sha256": assets.digest},
                  "secrets": list(profile.secrets), "services": [list(c) for c in profile.services],
                  **({"standins": True} if profile.standing_in else {})},
    )


def _started_row(session: OpenedSession, runtime: Runtime, anchors: Anchors) -> dict:
    meta, sandbox, m = session.meta, session.sandbox, session.env.manifest
    return log(
        f"session started: {m.title} ({m.task_id} {m.version}), profile {meta.profile}"
        + (f" on {meta.gpus} GPU(s) instead of {session.env.profile(meta.profile).gpus} (a rehearsal)" if meta.gpus else "") + ", "
        f"time limit {format_hms(meta.clock.limit_s)}, runtime {runtime.kind} on {runtime.host}"
        + ("" if sandbox.isolated else " — NOT ISOLATED: commands and the scorer run as you on this machine")
        + f"; scores normalized between start {anchors.start:g} and reference {anchors.reference:g}, {anchors.summary}"
        + f"; {setting_words(meta.setting)}; {meta.participant.words()}" + _sealing_words(meta),
        {"event": "session_started", "session_id": meta.id, "env": meta.env_id, "profile": meta.profile,
         "participant": meta.participant.model_dump(mode="json"),
         "sandbox": meta.metadata["sandbox"], "time_limit_s": meta.clock.limit_s, "score": m.score.model_dump(mode="json"),
         "anchors": anchors.to_record(), "setting": meta.setting,
         **({"seal_to": meta.seal_to} if meta.visibility == "hidden" else {})},
        title="session",
    )


def _sealing_words(meta: SessionMeta) -> str:
    """For a hidden environment: whether its scores are sealed, or (no key set) written in clear."""
    if meta.visibility != "hidden":
        return ""
    return "; hidden scores are sealed to the researcher's key" if meta.seal_to else f"; {CLEAR_WARNING}"


def open_session(cls: type[S], folder: Path, env: Environment, runtime: Runtime, *, clock: Clock | None,
                 store: Store | None, secrets: dict[str, str] | None) -> S:
    clock = clock or SystemClock()
    meta, rows = readable_records(folder)
    restored = restore_rules(meta, rows)  # the chain decides the score, never session.json alone
    lock = SessionLock(folder / LOCK)
    lock_note = lock.acquire()
    try:
        sandbox = _attach(folder, meta, env, runtime, secrets)
        last_wall = rows[-1]["calledAt"] / 1000 if rows else None
        session = cls(folder, meta, env, sandbox, clock, store, secrets=secrets)
    except BaseException:
        lock.release()
        raise
    session.lock = lock
    interrupted = session.settle_interrupted_scoring()
    restore_after_recount(session.core, session.scorer.snapshots)  # the app stopped during a recount
    gap = None if last_wall is None else clock.time() - last_wall
    w = session.wclock
    session.audit.append(log(
        f"session resumed on {socket.gethostname()}; working time {format_hms(w.used())}, clock "
        f"{'running' if w.running else 'paused'}" + (f"; {format_hms(gap)} since the last record" if gap is not None else ""),
        {"event": "session_resumed", "gap_s": gap, "clock_running": w.running, "lock": lock_note,
         **({"recovered": session.recovered} if session.recovered else {}),
         **({"interrupted_scoring": interrupted} if interrupted else {}),
         **({"rules_restored": restored} if restored else {})},
        title="session",
    ))
    session.core.save()
    session.core.index()
    return session


def readable_records(folder: Path) -> tuple[SessionMeta, list[dict]]:
    """session.json and the audit log's rows of a session that may be written to; before anything
    is written (the lock included), a SessionError where it may not: the audit log holds the finish
    row (nothing more is written to a finished session), session.json is damaged or disagrees with
    the audit log, or the score log does (``rebench-tui repair`` rebuilds those from the log)."""
    meta = SessionMeta.load(folder / META)  # a missing or damaged file: a SessionError naming repair
    try:
        rows = read_entries(folder / AUDIT)
    except (ValueError, UnicodeDecodeError) as exc:
        raise SessionError(f"session {meta.id}: its audit log has a damaged line ({str(exc)[:200]})",
                           kept="every file of the session, untouched",
                           fix=f"`rebench-tui verify {meta.id}` names the line; the session cannot be continued") from None
    state = chain_state(rows, folder)
    if state.finished:
        raise RecordClosed(meta.id, state.finish_line)
    repair = f"`rebench-tui repair {meta.id}` rebuilds it from the audit log, then try again"
    if meta.status != state.status:
        raise SessionError(f"session {meta.id}: {META} says {meta.status}, but its audit log says {state.detail}",
                           kept="every record, untouched (the audit log is the record of truth)", fix=repair)
    report = Report(folder)
    check_score_log(folder, rows, report)
    bad = [f for f in report.findings if not f.ok]
    if bad:
        raise SessionError(f"session {meta.id}: {SCORE_LOG} does not agree with the audit log: {bad[0].detail}",
                           kept="every record, untouched (the audit log is the record of truth)", fix=repair)
    return meta, rows


def _attach(folder: Path, meta: SessionMeta, env: Environment, runtime: Runtime,
            secrets: dict[str, str] | None) -> Sandbox:
    assets = (meta.metadata.get("assets") or {}).get("folder")
    spec = SandboxSpec(session_id=meta.id, env=env, profile=Rehearsal.of(meta.gpus, meta.metadata).apply(env.profile(meta.profile)), workspace=folder / WORKSPACE,
                       state_dir=folder / STATE, assets=None if assets is None else Path(assets),
                       secrets=dict(secrets or {}))
    sandbox = runtime.attach(spec)
    if sandbox is None:
        raise SessionError(
            f"the sandbox of session {meta.id} is gone (no container labelled with it on {runtime.host})",
            kept=f"every record and the workspace files in {folder}",
            fix="export or inspect the records; start a new session to keep working",
        )
    return sandbox
