"""A participant's session: `start`, `resume`, `score`, `finish`, `stop`, and opening the screen
on a session (with its study's witness, if any)."""

from __future__ import annotations

import time
from pathlib import Path

import click
from rich.markup import escape

from .. import workstation
from ..config import Settings
from ..errors import RebenchError, UsageError
from ..trajectory.records import META
from .common import (DURATION, _anchors_here, _bounded_time_limit, _settings, _steps, _store, err, out,
                     sessions_dir_opt)


def _witness(session, settings: Settings | None = None):
    """Stream the session's rows to its study's collector, if it belongs to a study."""
    from ..study.attach import witness_session

    return witness_session(session, settings or _settings())


def _unwitness(witness) -> None:
    if witness is not None:
        err.print(witness.stop().words(time.time()), highlight=False, markup=False)


def _keymap(settings: Settings) -> dict[str, str]:
    """The keymap file, checked before a session opens: a bad one is an error line, not a traceback."""
    from ..tui.app import RebenchApp
    from ..tui.keymap import load_keymap

    return load_keymap(settings.keymap_file, RebenchApp.binding_ids())


def _run_app(session, keymap: dict[str, str]) -> None:
    from ..tui.app import RebenchApp

    settings = _settings()
    witness = _witness(session, settings)
    app = RebenchApp(session, keymap=keymap, agent_runs=settings.agent_runs, witness=witness)
    try:
        app.run()
    finally:
        if session.lock.held:  # the app never mounted (e.g. no terminal): close the session cleanly
            session.close(pause_clock=True)
        _unwitness(witness)
    state = "finished" if session.finished else ("clock running" if session.wclock.running else "clock paused")
    err.print(f"session {session.id} ({state}); records in {session.folder}", highlight=False)
    if session.finished and session.sandbox.describe().get("gpus") and not session.sandbox.is_running():
        err.print("its container is stopped, so its GPUs are free for the next session (the home and the records stay)",
                  highlight=False)
    if app.return_code:  # a crash inside the screen (Textual printed its traceback above): never exit 0
        raise RebenchError(f"the screen stopped on an error (exit status {app.return_code}; the traceback is above)",
                           kept=f"every record of session {session.id} written before it ({state})",
                           fix=f"resume with `rebench-tui resume {session.id}`; if it happens again, report the traceback")
    if not session.finished:
        err.print(f"resume with: rebench-tui resume {session.id}", highlight=False)


@click.command()
@click.argument("env_id")
@click.option("--profile", type=click.Choice(["gpu", "smoke"]), default=None, help="default: gpu where Docker can give GPUs, else smoke")
@click.option("--time-limit", type=DURATION, default=None, help="working-time limit, e.g. 8h, 90m (default: the environment's)")
@click.option("--runtime", "runtime_kind", type=click.Choice(["auto", "docker", "local"]), default="auto",
              help="auto: Docker if an engine answers, else local (not isolated)")
@click.option("--host", default=None, help="a label from the hosts file or an engine URL, e.g. ssh://user@gpu-host (default: the first listed host with the GPUs free, else DOCKER_HOST or the local socket)")
@click.option("--study", "study_url", default=None, metavar="URL",
              help="a study's collector: every record is sent to it as it is written (token: REBENCH_STUDY_TOKEN "
                   "or ~/.config/rebench-tui/study-token)")
@click.option("--participant", "participant_id", default=None,
              help="who works in this session (an id, kept in the record; needed with --study)")
@click.option("--internet/--no-internet", default=None, help="whether the participant may use the internet (default: not stated)")
@click.option("--ai-tools", type=click.Choice(["yes", "no", "unknown"]), default="unknown",
              help="whether the participant may use AI tools (LLM assistants)")
@sessions_dir_opt
@click.option("--gpus", type=click.IntRange(min=1), default=None,
              help="rehearse on fewer GPUs than the profile asks for (recorded as a difference from the paper's setting)")
@click.option("--stand-ins", "standins", is_flag=True,
              help="rehearse without the outside service the profile needs (a judge, a code model): its stand-in answers instead (recorded)")
def start(env_id: str, profile: str | None, time_limit: float | None, runtime_kind: str, host: str | None,
          study_url: str | None, participant_id: str | None, internet: bool | None, ai_tools: str,
          sessions_dir: Path | None, gpus: int | None, standins: bool) -> None:
    """Open ENV_ID in a new session and start the clock."""
    from ..assets import AssetStore
    from ..catalog import Rehearsal
    from ..session import Session
    from ..trajectory.records import participant_of

    settings = _settings(sessions_dir)
    limit = _bounded_time_limit(time_limit)  # before anything is chosen or started
    keymap = _keymap(settings)  # before anything starts
    if study_url is not None:
        _check_study(study_url, participant_id, settings)
    env = workstation.catalog(settings).get(env_id)
    choice = workstation.choose(env, settings, runtime=runtime_kind, profile=profile, host=host, gpus=gpus,
                                say=lambda m: err.print(f"[yellow]note:[/yellow] {m}", highlight=False))
    if choice.embedded_default:
        err.print(f"[bold yellow]EMBEDDED DEFAULT[/bold yellow]: profile {choice.profile} on the {choice.runtime.kind} runtime"
                  + ("" if choice.runtime.isolated else " (NOT ISOLATED)") + ". Scores from it are not comparable with GPU runs.",
                  highlight=False)
    if gpus is not None and env.profile(choice.profile).gpus == 0:
        err.print(f"[yellow]note:[/yellow] --gpus {gpus} left out: the {choice.profile} profile uses no GPU", highlight=False)
        gpus = None
    if standins and env.profile(choice.profile).standins is None:
        raise RebenchError(f"the {choice.profile} profile of {env_id} has no stand-ins", kept="nothing was started",
                           fix="leave out --stand-ins (only profiles that reach an outside service have them)")
    _say_anchors_gpu(env, choice, settings)
    secret_values = workstation.resolve_secrets(env, choice.profile, settings, required=not standins)  # before anything starts
    with _steps(f"starting {env.id}") as step:  # image build and assets, on a first start: minutes
        session = Session.create(env, choice.profile, choice.runtime, settings.sessions, time_limit_s=limit,
                                 store=_store(settings), progress=step, asset_store=AssetStore(settings.cache_dir),
                                 secrets=secret_values, rehearsal=Rehearsal(gpus, standins),
                                 participant=participant_of(participant_id, internet, ai_tools))
    if study_url is not None:
        from ..study.attach import bind

        bind(session, study_url, participant_id)
    _run_app(session, keymap)


def _say_anchors_gpu(env, choice, settings: Settings) -> None:
    """Before a GPU session starts: a note where the host's GPUs are not the model the profile's
    anchors were measured on, offering `calibrate` (the listing runs a small container; a host
    that cannot list its GPUs is left to the session's own checks)."""
    from ..catalog.anchors import gpu_differs

    if not env.profile(choice.profile).gpus or not hasattr(choice.runtime, "gpu_inventory"):
        return
    anchors, _problem = _anchors_here(env, choice.profile, settings)
    try:
        names = [g.name for g in choice.runtime.gpu_inventory()]
    except Exception:  # noqa: BLE001 - only a note; starting finds any real GPU problem itself
        return
    line = gpu_differs(anchors, names, env.id, choice.profile) if anchors is not None else None
    if line:
        err.print(f"[yellow]note:[/yellow] {escape(line)}", highlight=False)


def _check_study(url: str, participant: str | None, settings: Settings) -> None:
    """Before anything starts: a participant id, a token that is theirs (a collector down now is only a note)."""
    from ..study.attach import check_participant, collector_for

    if not participant:
        raise UsageError("--study needs --participant", kept="nothing was started", fix="add --participant YOUR_ID")
    note = check_participant(collector_for(url, settings), participant)
    if note:
        err.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)


def _open_session(session_id: str | None, sessions_dir: Path | None):
    from ..session import Session, SessionMeta

    settings = _settings(sessions_dir)
    folder = workstation.find_session(settings.sessions, session_id)
    if sessions_dir is None and folder.parent.resolve() != settings.sessions.resolve():
        settings = _settings(folder.parent)  # a session named by its folder elsewhere: that folder's index
    meta = SessionMeta.load(folder / META)
    env = workstation.catalog(settings).get(meta.env_id)
    # Services still running keep their secrets; these are only needed to restart one (and to redact).
    secret_values = workstation.resolve_secrets(env, meta.profile, settings, required=False)
    session = Session.open(folder, env, workstation.runtime_for(meta, settings), store=_store(settings),
                           secrets=secret_values)
    for note in session.resume_notes:  # a scoring the app died during, settled now (the screen says it too)
        err.print(f"[bold yellow]note:[/bold yellow] {escape(note)}", highlight=False)
    return session


@click.command()
@click.argument("session_id", required=False)
@sessions_dir_opt
def resume(session_id: str | None, sessions_dir: Path | None) -> None:
    """Reopen a session (default: the most recent unfinished one); the clock continues exactly."""
    keymap = _keymap(_settings(sessions_dir))  # before the session opens
    _run_app(_open_session(session_id, sessions_dir), keymap)


@click.command()
@click.argument("session_id", required=False)
@sessions_dir_opt
def score(session_id: str | None, sessions_dir: Path | None) -> None:
    """Score a session once without the screen (the clock is left as it is)."""
    session = _open_session(session_id, sessions_dir)
    witness = _witness(session)
    try:
        rec = session.score()
    finally:
        session.close(pause_clock=None)
        _unwitness(witness)
    if rec is None:
        err.print("scoring cancelled")
        return
    from ..scoring import message_words

    shown = "hidden" if session.hidden else f"{rec.score:.6g} (normalized {rec.normalized:.4g})"
    said = "" if session.hidden or not rec.message else f"; the scorer says: {message_words(rec.message)}"
    out.print(f"scoring {rec.attempt}: score {shown}{said}", highlight=False, markup=False)
    best = session.final()  # re-scores of unchanged files count with their median (scoring.counting_attempt)
    if best is not None and not session.hidden:
        how = (f"scoring {best.representative}" if best.n == 1 else
               f"median of {best.n} re-scores of unchanged files, {best.low:.6g} to {best.high:.6g}")
        out.print(f"counts now: {best.score:.6g} (normalized {best.normalized:.4g}; {how})", highlight=False)


@click.command()
@click.argument("session_id", required=False)
@click.option("--submission", default="", help="what the participant submits (a short text; recorded with the finish)")
@sessions_dir_opt
def finish(session_id: str | None, submission: str, sessions_dir: Path | None) -> None:
    """Take the final score and finish a session without the screen: at or after the time limit
    it finishes as 'time_limit', before it as a submission. The session finishes even if that
    last scoring fails; the error is then printed."""
    from ..trajectory.audit import RecordClosed

    try:
        session = _open_session(session_id, sessions_dir)
    except RecordClosed as exc:  # nothing was written: the record ends with its finish row
        err.print(f"session {exc.session} is already finished (its audit log ends with the finish row, line "
                  f"{exc.line}); nothing to do, nothing was written", highlight=False, markup=False)
        return
    witness = _witness(session)
    try:
        rec = session.finish_at_time_limit() if session.wclock.expired else session.submit(submission)
    finally:
        session.close(pause_clock=None)
        _unwitness(witness)
    from ..session.ending import counting_words

    best = session.final()  # after a recount: the median of its fresh scorings
    shown = "hidden" if session.hidden else ("none (no valid scoring)" if best is None else
                                             f"{best.score:.6g} (normalized {best.normalized:.4g}; {counting_words(best)})")
    last = "" if rec is None else f" after final scoring {rec.attempt}"
    out.print(f"session {session.id} finished ({session.meta.finish_reason}){last}; final score {shown}", highlight=False)


@click.command()
@click.argument("session_id")
@click.option("--remove", is_flag=True, help="also remove the container (the session folder stays)")
@click.option("--force", is_flag=True, help="with --remove: remove the container of a session that is not finished or is open")
@sessions_dir_opt
def stop(session_id: str, remove: bool, force: bool, sessions_dir: Path | None) -> None:
    """Stop a session's container. Records and workspace files stay in the session folder."""
    from ..session import SessionMeta
    from ..session.layout import LOCK
    from ..session.lock import SessionLock

    settings = _settings(sessions_dir)
    folder = workstation.find_session(settings.sessions, session_id)
    meta = SessionMeta.load(folder / META)
    if remove and not force:
        holder = SessionLock(folder / LOCK).live_holder()
        live = ([f"it is open in an app (PID {holder.get('pid')} on {holder.get('host')})"] if holder else []) + (
            ["it is not finished: removing its container ends the participant's way back into it"]
            if meta.status != "finished" else [])
        if live:
            raise UsageError(f"{meta.id} is live: " + "; ".join(live), kept="the session and its container, untouched",
                             fix=f"finish it first (`rebench-tui finish {meta.id}`), or `rebench-tui stop {meta.id}` "
                                 f"without --remove, or add --force to remove it anyway")
    if meta.runtime != "docker":
        err.print("local sessions have no container to stop")
        return
    rt = workstation.runtime_for(meta, settings)
    found = rt.find_containers(meta.id)
    remote = rt.remote
    for c in found:
        c.stop(timeout=5)
        if remove and remote:
            # The home lives in a volume on that host: keep a copy here before it goes.
            kept = folder / "home-at-removal"
            skipped = _copy_home(c, kept)
            err.print(f"copied the remote home to {kept}")
            for line in skipped:
                err.print(f"  skipped as unsafe: {line}")
        if remove:
            c.remove(force=True)
    volumes = rt.remove_session_volumes(meta.id) if remove else 0
    err.print(f"{'removed' if remove else 'stopped'} {len(found)} container(s)" + (f" and {volumes} volume(s)" if volumes else "")
              + f" of {meta.id}; records stay in {folder}")


def _copy_home(container, dest: Path) -> list[str]:
    """Copy a container's home into ``dest``; returns what was skipped as unsafe (links out, devices)."""
    from ..runtime.safe_tar import extract_stream

    try:
        stream, _ = container.get_archive("/home/agent")
        return extract_stream(stream, dest)
    except Exception as exc:  # noqa: BLE001 - refuse to remove what could not be kept
        raise RebenchError(f"could not copy the home of {container.name} before removing it: {exc}",
                 kept="the container (stopped) and its volume", fix="retry when the host answers, or copy it by hand with `docker cp`") from None
