"""`rebench-tui`: thin commands over the layers below."""

from __future__ import annotations

import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterator

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from . import workstation
from .clock import format_hms, parse_duration
from .config import Settings
from .errors import RebenchError, UsageError
from .trajectory.records import META

err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)


def _settings(sessions_dir: Path | None = None) -> Settings:
    s = Settings()
    if sessions_dir is not None:
        s.sessions_dir = sessions_dir
    return s


@contextmanager
def _steps(title: str) -> Iterator[Callable[[str], None]]:
    """Progress of a long job (building images, preparing assets, calibrating): on a terminal a
    spinner with the step under way and the time so far; every step also stays as a "… step" line
    (the only output where stderr is not a terminal, as in a log)."""
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(), console=err,
                  transient=True) as bar:
        task = bar.add_task(title, total=None)

        def step(msg: str) -> None:
            bar.console.print(f"… {msg}", highlight=False, markup=False)
            bar.update(task, description=escape(f"{title}: {msg}"[:72]))

        yield step


class _Duration(click.ParamType):
    """A working-time length (8h, 90m, 1h30m, 45s): a bad one is a usage error, not a traceback."""

    name = "duration"

    def convert(self, value, param, ctx):
        if isinstance(value, float):
            return value
        try:
            return parse_duration(value)
        except ValueError:
            self.fail(f"{value!r} is not a working time: give a positive duration such as 8h, 90m, 1h30m or 45s",
                      param, ctx)


DURATION = _Duration()


def _bounded_time_limit(seconds: float | None) -> float | None:
    """--time-limit as given, if a session may have it (at most 7 days); else our one-line error."""
    from .clock import MAX_TIME_LIMIT_S, check_time_limit

    if seconds is None:
        return None
    try:
        return check_time_limit(seconds)
    except ValueError as exc:
        raise UsageError(f"--time-limit refused: {exc}", kept="nothing was started",
                         fix=f"give at most {MAX_TIME_LIMIT_S / 3600:.0f}h (e.g. --time-limit 8h, the paper's working "
                             "time and the default)") from None


class _Budget(click.ParamType):
    """A working-time budget for compare (2h, 8h, or none): a bad one is a usage error."""

    name = "budget"

    def convert(self, value, param, ctx):
        from .compare.command import parse_budget

        if not isinstance(value, str):
            return value
        try:
            return parse_budget(value)
        except RebenchError as exc:
            what = f"{value!r}: " + exc.what.removeprefix(f"--budget {value!r}: ")  # click names the option
            self.fail(f"{what}; {exc.fix}" if exc.fix else what, param, ctx)


# Exit statuses a script can trust: 0 done, 1 failed (one of our errors, a failed check, a crash),
# 2 called wrongly (click's usage errors and our UsageError).
EXIT_FAILED, EXIT_USAGE = 1, 2


def _usage_error(exc: click.UsageError) -> None:
    """Click's own errors (a bad option value, a missing argument, an unknown option) as one line
    that names the fix, like every other error here; exit status 2, as click's."""
    ctx = exc.ctx
    where = ctx.command_path if ctx is not None else "rebench-tui"
    what = exc.format_message().rstrip(".")
    what = what[:1].lower() + what[1:] if what[:1].isupper() and not what[1:2].isupper() else what
    err.print(f"[bold red]error:[/bold red] {escape(what)} (see `{escape(where)} --help`)", highlight=False)
    sys.exit(EXIT_USAGE)


def _print_error(exc: RebenchError) -> None:
    """What went wrong, what was kept, what to do next: one line each (messages may hold [brackets]:
    escaped, printed as written)."""
    err.print(f"[bold red]error:[/bold red] {escape(exc.what)}", highlight=False)
    if exc.kept:
        err.print(f"[bold]kept:[/bold] {escape(exc.kept)}", highlight=False)
    if exc.fix:
        err.print(f"[bold]next:[/bold] {escape(exc.fix)}", highlight=False)


# `rebench-tui --help` lists the commands in these groups, each with an example; a command not named
# here is listed under "Other".
HELP_GROUPS = (
    ("Sessions (a participant's)", ("start", "resume", "score", "finish", "stop"),
     "rebench-tui start triton_cumsum --time-limit 8h"),
    ("Records", ("sessions", "verify", "repair", "export", "compare"),
     "rebench-tui compare --env triton_cumsum"),
    ("Study (several participants, one collector)", ("study", "collector", "kiosk"),
     "rebench-tui study status https://collector.example:8765"),
    ("Environments and machines", ("list", "doctor", "prepare", "calibrate", "images", "hosts"),
     "rebench-tui doctor triton_cumsum"),
)
CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


def first_sentence(text: str) -> str:
    """A command's help up to its first sentence's end, whole (click's own cuts at 45 characters)."""
    flat = " ".join(text.split("\b")[0].split())
    for end in (". ", ".\n"):
        if end in flat:
            return flat[: flat.index(end) + 1]
    return flat


class _Group(click.Group):
    def make_context(self, info_name, args, parent=None, **extra):  # `rebench-tui --bogus`
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `rebench-tui`: the help, not an error
            click.echo(exc.ctx.get_help() if exc.ctx is not None else self.get_help(click.Context(self)))
            sys.exit(0)
        except click.UsageError as exc:
            _usage_error(exc)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands in groups (HELP_GROUPS), each with its first sentence whole and an example."""
        if ctx.parent is not None:  # a group under main (images) lists its commands plainly
            return super().format_commands(ctx, formatter)
        names = set(self.list_commands(ctx))
        placed: set[str] = set()
        for title, members, example in HELP_GROUPS:
            rows = [(n, first_sentence(self.commands[n].help or "")) for n in members if n in names]
            placed.update(members)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
                    formatter.write_text(f"e.g. {example}")
        rest = [(n, first_sentence(self.commands[n].help or "")) for n in sorted(names - placed)]
        if rest:
            with formatter.section("Other"):
                formatter.write_dl(rest)

    def invoke(self, ctx: click.Context):  # one place turns our errors into readable exits
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:
            _usage_error(exc)
        except RebenchError as exc:
            _print_error(exc)
            sys.exit(EXIT_USAGE if isinstance(exc, UsageError) else EXIT_FAILED)


sessions_dir_opt = click.option("--sessions-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                                help="where session folders live (default: sessions/ in the project, or $REBENCH_SESSIONS_DIR)")


@click.group(cls=_Group, context_settings=CONTEXT)
@click.version_option(package_name="rebench-tui")
def main() -> None:
    """A terminal workstation for human attempts at the RE-Bench environments."""


def _id_column(t: Table, name: str, ids) -> None:
    """A column of ids: never cut, never wrapped (ids are what users copy); others give way."""
    t.add_column(name, no_wrap=True, overflow="ignore", min_width=max([len(name), *(len(i) for i in ids)]))


def _anchors_here(env, profile: str, settings: Settings):
    """(anchors in effect here, or None, and the problem reading a calibration file, or None)."""
    from .catalog.anchors import AnchorsError, anchors_in_effect

    try:
        return anchors_in_effect(env, profile, settings.config_dir), None
    except AnchorsError as exc:
        return None, exc.what


@main.command("list")
@click.option("-v", "--verbose", is_flag=True, help="every column (title, METR task, where the anchors come from, settings "
              "that differ from the paper's), then each profile's anchors in detail and the paper's setting beside it")
def list_cmd(verbose: bool) -> None:
    """Show the environments, their profiles' start and reference scores (the anchors), and any problems in their folders."""
    settings = _settings()
    cat = workstation.catalog(settings)
    out.print(_environments_table(cat, settings) if verbose else _environments_brief(cat, settings))
    if verbose:
        for env in cat.environments.values():
            for p in map(env.profile, env.profile_names):
                _print_anchors_detail(env, p, settings)
            out.print(_setting_table(env))
            _print_paper_figures(env)
    if cat.problems:
        err.print(f"[bold red]{len(cat.problems)} problem(s):[/bold red]")
        for p in cat.problems:
            err.print(f"  - {p}", highlight=False, markup=False)
        sys.exit(1)


def _environments_brief(cat, settings: Settings) -> Table:
    """The environments in four columns that stay whole in an 80-column terminal (-v has the rest)."""
    t = Table(title="environments (rebench-tui list -v: titles, tasks, where the anchors come from)")
    _id_column(t, "id", cat.environments)
    t.add_column("better", no_wrap=True)
    t.add_column("start → reference", no_wrap=True)
    t.add_column("time", no_wrap=True)
    for env in cat.environments.values():
        score = env.manifest.score
        lines = []
        for p in map(env.profile, env.profile_names):
            a, _problem = _anchors_here(env, p.name, settings)
            start, ref = (a.start, a.reference) if a is not None else (p.start_score, p.reference_score)
            lines.append(f"{p.name} {start:.4g} → {ref:.4g}")
        t.add_row(env.id, score.direction.value + (", hidden" if score.visibility == "hidden" else ""), "\n".join(lines),
                  format_hms(env.manifest.time.limit))
    return t


def _environments_table(cat, settings: Settings) -> Table:
    t = Table(title=f"environments in {settings.environments}")
    _id_column(t, "id", cat.environments)
    t.add_column("title")
    t.add_column("METR task", overflow="fold")  # an id too: folded onto lines when narrow, never cut
    for col in ("score", "profiles: start → reference (GPUs), anchors", "time"):
        t.add_column(col)
    for env in cat.environments.values():
        m = env.manifest
        lines = []
        for p in map(env.profile, env.profile_names):
            a, _problem = _anchors_here(env, p.name, settings)
            start, ref = (a.start, a.reference) if a is not None else (p.start_score, p.reference_score)
            tag = (a.kind if a.kind != "calibrated" else a.tag) if a is not None else "calibration file unreadable"
            n = len(p.differences)
            lines.append(f"{p.name}: {start:.4g} → {ref:.4g} ({p.gpus}), {tag}"
                         + ("" if not p.setting else ", paper's setting" if not n else f", {n} setting(s) differ"))
        t.add_row(env.id, m.title, f"{m.task_id} {m.version}", f"{m.score.direction.value} is better, {m.score.aggregation.value}"
                  + (", hidden" if m.score.visibility == "hidden" else ""), "\n".join(lines), format_hms(m.time.limit))
    return t


def _print_anchors_detail(env, p, settings: Settings) -> None:
    """list -v: where a profile's anchors come from, which are in effect here, and how to calibrate."""
    from .catalog.anchors import manifest_anchors

    def say(text: str) -> None:
        out.print(text, highlight=False, markup=False)

    mine = manifest_anchors(env, p.name)
    out.print(f"[bold]{env.id}[/bold] {p.name}: start {p.start_score:g}, reference {p.reference_score:g}", highlight=False)
    say(f"  manifest: {mine.kind} — {mine.summary}")
    here, problem = _anchors_here(env, p.name, settings)
    if problem is not None:
        say(f"  in effect here: the manifest's, but {problem}")
    elif here is not None and here.kind == "calibrated":
        say(f"  in effect here: start {here.start:.6g}, reference {here.reference:.6g} — {here.summary} "
            f"({here.provenance.get('file')})")
    else:
        say("  in effect here: the manifest's (not calibrated on this host)")
    cal = p.calibration
    if cal is None:
        say("  calibrate: no [calibration] table in its manifest")
    elif cal.unavailable:
        say(f"  calibrate: not here — {cal.unavailable}")
    else:
        say(f"  calibrate: rebench-tui calibrate {env.id} --profile {p.name} --runs 3")
    say(f"  measured: {p.measured.strip()}")


def _setting_table(env) -> Table | str:
    """The paper's setting beside each profile's, every difference named with why (list -v)."""
    paper = env.manifest.paper
    if paper is None:
        return f"  [bold]{env.id}[/bold]: the manifest states no paper setting (no [paper] table)\n"
    profiles = [env.profile(name) for name in env.profile_names]
    t = Table(title=f"{env.id}: the paper's setting ({escape(paper.source)}) beside this project's", title_justify="left",
              show_lines=True, expand=True)
    t.add_column("setting", no_wrap=True)
    t.add_column("paper")
    for p in profiles:
        t.add_column(p.name)
    for (name, ps), *rows in zip(paper.settings.items(), *(p.setting for p in profiles)):  # setting_rows keeps the order
        t.add_row(name, escape(ps.paper) + f" [dim]({escape(ps.cited)})[/dim]",
                  *("[green]same[/green]" if r.same else f"[yellow]differs:[/yellow] {escape(r.here)} — {escape(r.why)}"
                    for r in rows))
    return t


def _print_paper_figures(env) -> None:
    """list -v: the paper's spread of the starting score (Table 4) and time for one scoring (Table 3)."""
    from .catalog.paper_figures import figures_lines

    paper = env.manifest.paper
    if paper is not None:
        for line in figures_lines(paper.start_spread, paper.run_and_score):
            out.print(f"  {env.id}: {line}", highlight=False, markup=False)


@main.command()
@click.argument("env_id")
@click.option("--profile", type=click.Choice(["gpu", "smoke"]), default=None,
              help="default: gpu where Docker can give GPUs, else smoke")
@click.option("--runs", type=click.IntRange(1, 100), default=3, show_default=True,
              help="scorings of the starting solution, and as many of the reference")
@click.option("--runtime", "runtime_kind", type=click.Choice(["auto", "docker", "local"]), default="auto",
              help="auto: Docker if an engine answers, else local; on a GPU host without Docker, --runtime local")
@click.option("--participant-uid", type=int, default=None,
              help="local runtime run as root: give the calibration's home to this uid (e.g. 1000), so the scorer runs "
                   "the solution as that user, as it does in a container")
def calibrate(env_id: str, profile: str | None, runs: int, runtime_kind: str, participant_uid: int | None) -> None:
    """Measure ENV_ID's anchors on this host: the starting and the reference solution through the
    real scorer, RUNS times each. The medians, every run's score and the host's facts go to
    ~/.config/rebench-tui/calibration/ENV/PROFILE.json; new sessions of that profile are then
    normalized with them (their session.json says so)."""
    from .calibrate import calibrate as run_calibration

    settings = _settings()
    env = workstation.catalog(settings).get(env_id)
    choice = workstation.choose(env, settings, runtime=runtime_kind, profile=profile, host=None,
                                say=lambda m: err.print(f"[yellow]note:[/yellow] {m}", highlight=False))
    secret_values = workstation.resolve_secrets(env, choice.profile, settings, required=False)
    with _steps(f"calibrating {env.id}") as step:
        outcome = run_calibration(env, choice.profile, choice.runtime, runs=runs, config_dir=settings.config_dir,
                                  cache_dir=settings.cache_dir, project_root=settings.root, secrets=secret_values,
                                  progress=step, participant_uid=participant_uid)
    cal = outcome.calibration
    t = Table(title=f"{env.id} ({cal.profile}) calibrated on {cal.host.get('hostname')}: {cal.gpu_summary}, "
                    f"{cal.host.get('runtime')} runtime, {cal.duration_s:.0f} s")
    for col in ("solution", "runs (raw scores)", "median (anchor)", "min – max", "spread", "manifest"):
        t.add_column(col)
    for side, runs_, figure in (("start", cal.start, outcome.manifest_start), ("reference", cal.reference, outcome.manifest_reference)):
        t.add_row(side, ", ".join(f"{x:.5g}" for x in runs_.scores), f"{runs_.median:.6g}", f"{runs_.low:.5g} – {runs_.high:.5g}",
                  f"{runs_.spread:.3g}", f"{figure:g}")
    out.print(t)
    pkgs = {k: v for k, v in cal.packages.items() if k.lower() in ("torch", "triton", "numpy")}
    out.print(f"image {cal.image.get('tag')} {cal.image.get('id')}" if cal.image else "no image (local runtime)", highlight=False)
    if pkgs:
        out.print("packages: " + ", ".join(f"{k} {v}" for k, v in sorted(pkgs.items())), highlight=False)
    if outcome.previous is not None:
        prev = outcome.previous
        out.print(f"replaced the calibration of {prev.date}: start {prev.start.median:.6g}, reference {prev.reference.median:.6g}",
                  highlight=False)
    for line in outcome.drift():
        err.print(f"[yellow]note:[/yellow] {line}: update the manifest's figures (and its `measured` note) if this host is "
                  "the one they should describe", highlight=False)
    err.print(f"wrote {outcome.path}; new sessions of {env.id} ({cal.profile}) on this host are normalized with these anchors "
              f"(calibration session records: {cal.session})", highlight=False)


def _witness(session, settings: Settings | None = None):
    """Stream the session's rows to its study's collector, if it belongs to a study."""
    from .study.attach import witness_session

    return witness_session(session, settings or _settings())


def _unwitness(witness) -> None:
    if witness is not None:
        err.print(witness.stop().words(time.time()), highlight=False, markup=False)


def _keymap(settings: Settings) -> dict[str, str]:
    """The keymap file, checked before a session opens: a bad one is an error line, not a traceback."""
    from .tui.app import RebenchApp
    from .tui.keymap import load_keymap

    return load_keymap(settings.keymap_file, RebenchApp.binding_ids())


def _run_app(session, keymap: dict[str, str]) -> None:
    from .tui.app import RebenchApp

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


@main.command()
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
    from .assets import AssetStore
    from .catalog import Rehearsal
    from .session import Session
    from .trajectory.records import participant_of

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
        from .study.attach import bind

        bind(session, study_url, participant_id)
    _run_app(session, keymap)


def _say_anchors_gpu(env, choice, settings: Settings) -> None:
    """Before a GPU session starts: a note where the host's GPUs are not the model the profile's
    anchors were measured on, offering `calibrate` (the listing runs a small container; a host
    that cannot list its GPUs is left to the session's own checks)."""
    from .catalog.anchors import gpu_differs

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
    from .study.attach import check_participant, collector_for

    if not participant:
        raise UsageError("--study needs --participant", kept="nothing was started", fix="add --participant YOUR_ID")
    note = check_participant(collector_for(url, settings), participant)
    if note:
        err.print(f"[yellow]note:[/yellow] {escape(note)}", highlight=False)


def _store(settings):
    """The session index; an unreadable one is moved aside and rebuilt from the session folders (said on stderr)."""
    from .session.reindex import open_store

    return open_store(settings.sessions, say=lambda m: err.print(f"[yellow]note:[/yellow] {m}", highlight=False))


def _open_session(session_id: str | None, sessions_dir: Path | None):
    from .session import Session, SessionMeta

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


@main.command()
@click.argument("session_id", required=False)
@sessions_dir_opt
def resume(session_id: str | None, sessions_dir: Path | None) -> None:
    """Reopen a session (default: the most recent unfinished one); the clock continues exactly."""
    keymap = _keymap(_settings(sessions_dir))  # before the session opens
    _run_app(_open_session(session_id, sessions_dir), keymap)


@main.command()
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
    from .scoring import message_words

    shown = "hidden" if session.hidden else f"{rec.score:.6g} (normalized {rec.normalized:.4g})"
    said = "" if session.hidden or not rec.message else f"; the scorer says: {message_words(rec.message)}"
    out.print(f"scoring {rec.attempt}: score {shown}{said}", highlight=False, markup=False)
    best = session.final()  # re-scores of unchanged files count with their median (scoring.counting_attempt)
    if best is not None and not session.hidden:
        how = (f"scoring {best.representative}" if best.n == 1 else
               f"median of {best.n} re-scores of unchanged files, {best.low:.6g} to {best.high:.6g}")
        out.print(f"counts now: {best.score:.6g} (normalized {best.normalized:.4g}; {how})", highlight=False)


@main.command()
@click.argument("session_id", required=False)
@click.option("--submission", default="", help="what the participant submits (a short text; recorded with the finish)")
@sessions_dir_opt
def finish(session_id: str | None, submission: str, sessions_dir: Path | None) -> None:
    """Take the final score and finish a session without the screen: at or after the time limit
    it finishes as 'time_limit', before it as a submission. The session finishes even if that
    last scoring fails; the error is then printed."""
    from .trajectory.audit import RecordClosed

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
    from .session.ending import counting_words

    best = session.final()  # after a recount: the median of its fresh scorings
    shown = "hidden" if session.hidden else ("none (no valid scoring)" if best is None else
                                             f"{best.score:.6g} (normalized {best.normalized:.4g}; {counting_words(best)})")
    last = "" if rec is None else f" after final scoring {rec.attempt}"
    out.print(f"session {session.id} finished ({session.meta.finish_reason}){last}; final score {shown}", highlight=False)


@main.command("verify")
@click.argument("session_ids", nargs=-1)
@click.option("--witness", "witness_url", default=None, metavar="URL",
              help="also compare every row with what the study's collector at URL witnessed")
@sessions_dir_opt
def verify_cmd(session_ids: tuple[str, ...], witness_url: str | None, sessions_dir: Path | None) -> None:
    """Check sessions' records: hash chain, trace-entry contract, the session's state (finished,
    active, interrupted) against session.json, score log, final score, files.

    Exits 1 if any check fails, naming the first bad line. Default: every session; a damaged one
    is reported and the others are still checked."""
    from .session.reindex import is_session_folder
    from .trajectory.verify import verify

    settings = _settings(sessions_dir)
    folders = [workstation.find_session(settings.sessions, sid) for sid in session_ids] if session_ids else sorted(
        p for p in settings.sessions.iterdir() if is_session_folder(p)) if settings.sessions.is_dir() else []
    if not folders:
        raise RebenchError(f"no sessions in {settings.sessions}", fix="pass --sessions-dir or a session id")
    bad = 0
    for folder in folders:
        try:
            report = verify(folder)
        except Exception as exc:  # noqa: BLE001 - one session's surprise must not stop the others
            bad += 1
            out.print(f"[bold]{escape(folder.name)}[/bold]: [red]FAILED[/red]")
            out.print(f"  FAIL verify: could not finish checking ({type(exc).__name__}: {str(exc)[:300]})",
                      highlight=False, markup=False)
            continue
        if witness_url is not None:
            from .study.attach import collector_for
            from .study.check import check_witnessed

            report.findings += check_witnessed(folder, collector_for(witness_url, settings)).findings
        bad += not report.ok
        out.print(f"[bold]{escape(folder.name)}[/bold]: " + ("[green]verified[/green]" if report.ok else "[red]FAILED[/red]"))
        for f in report.findings:
            out.print(f"  {f}", highlight=False, markup=False)
    if len(folders) > 1:
        out.print(f"{len(folders) - bad} of {len(folders)} session(s) verified" + (f"; {bad} FAILED" if bad else ""),
                  highlight=False)
    if bad:
        sys.exit(1)


@main.command("repair")
@click.argument("session_id")
@sessions_dir_opt
def repair_cmd(session_id: str, sessions_dir: Path | None) -> None:
    """Rebuild a session's session.json and score_log.csv from its audit log (the record of truth)
    where they are missing, damaged or disagree with it; says what it rebuilt. The audit log itself
    is never changed. Then `rebench-tui verify SESSION_ID`."""
    from .session.repair import repair_session
    from .trajectory.state import read_chain_state

    settings = _settings(sessions_dir)
    folder = workstation.find_session(settings.sessions, session_id)
    if sessions_dir is None and folder.parent.resolve() != settings.sessions.resolve():
        settings = _settings(folder.parent)
    started = _started_facts(folder)
    env = None
    try:
        env = workstation.catalog(settings).get(str(started.get("env")))
    except RebenchError:
        pass  # the manifest only fills in names the audit log does not hold
    done = repair_session(folder, env, started.get("profile"), store=_store(settings))
    for line in done:
        out.print(f"  {line}", highlight=False, markup=False)
    out.print(f"repaired {folder.name} ({read_chain_state(folder).detail}); check it with `rebench-tui verify "
              f"{folder.name}`", highlight=False, markup=False)


def _started_facts(folder: Path) -> dict:
    """The session_started row's facts (env, profile), read without trusting anything else."""
    import json

    from .trajectory.entries import log_event
    from .trajectory.records import AUDIT

    try:
        with open(folder / AUDIT, "rb") as fh:
            facts = log_event(json.loads(fh.readline()).get("content")) or {}
    except (OSError, ValueError, AttributeError):
        return {}
    return facts if facts.get("event") == "session_started" else {}


@main.command("sessions")
@click.option("--env", "env_id", default=None)
@click.option("--status", type=click.Choice(["active", "finished"]), default=None)
@click.option("--rebuild-index", is_flag=True, help="rebuild sessions/index.db from the session folders first (the records are the truth)")
@click.option("-v", "--verbose", is_flag=True, help="every column: environment, profile, runtime@host, scorings, normalized final")
@sessions_dir_opt
def sessions_cmd(env_id: str | None, status: str | None, rebuild_index: bool, verbose: bool, sessions_dir: Path | None) -> None:
    """List sessions from the index (an unreadable index is rebuilt from the session folders by itself)."""
    from .store import Store

    settings = _settings(sessions_dir)
    if rebuild_index:
        from .session.reindex import rebuild_index as _rebuild

        n, problems = _rebuild(Store(settings.sessions), settings.sessions)
        err.print(f"rebuilt the session index from the session folders: {n} session(s)")
        for p in problems:
            err.print(f"  not indexed: {p}")
    rows = _store(settings).sessions(env_id=env_id, status=status)
    damaged = _damaged_sessions(settings.sessions, rows, listed_all=env_id is None and status is None)
    out.print(_sessions_table(rows, settings, verbose, damaged))
    for sid, what in damaged.items():
        err.print(f"[bold red]error:[/bold red] {escape(what)}", highlight=False)
        err.print(f"[bold]next:[/bold] `rebench-tui repair {escape(sid)}` rebuilds it from the audit log", highlight=False)


def _sessions_table(rows: list[dict], settings: Settings, verbose: bool, damaged: dict[str, str] | None = None) -> Table:
    """Id (which starts with the environment's), status, working time and final score: whole in 80
    columns; -v adds environment, profile, runtime, scorings and the normalized final. A session
    whose session.json does not read (``damaged``) says DAMAGED."""
    damaged = damaged or {}
    t = Table(title=f"sessions in {settings.sessions}")
    _id_column(t, "id", [r["id"] for r in rows])
    cols = ("env", "profile", "runtime", "status", "working", "scores", "final", "normalized") if verbose else (
        "status", "working", "final")
    for col in cols:
        t.add_column(col, no_wrap=not verbose)
    for r in rows:
        fin, norm = r.get("final_score"), r.get("final_normalized")
        cells = {"env": r["env_id"], "profile": r["profile"], "runtime": f"{r['runtime']}@{r['host']}",
                 "status": "DAMAGED" if r["id"] in damaged else r["status"],
                 "working": format_hms(r.get("working_s") or 0), "scores": str(r.get("n_scores") or 0),
                 "final": "" if fin is None else f"{fin:.4g}", "normalized": "" if norm is None else f"{norm:.3g}"}
        t.add_row(r["id"], *(cells[c] for c in cols))
    return t


def _damaged_sessions(sessions: Path, rows: list[dict], listed_all: bool) -> dict[str, str]:
    """Sessions whose session.json does not read (by id: what is wrong): those listed from the index,
    and, when every session is listed, session folders the index could not take at all."""
    from .session import SessionMeta
    from .session.reindex import is_session_folder

    damaged: dict[str, str] = {}
    folders = [Path(r["path"]) for r in rows]
    if listed_all and sessions.is_dir():
        known = {r["id"] for r in rows}
        folders += [p for p in sorted(sessions.iterdir()) if is_session_folder(p) and p.name not in known]
    for folder in folders:
        try:
            SessionMeta.load(folder / META)
        except RebenchError as exc:
            damaged[folder.name] = exc.what
    return damaged


@main.command()
@click.argument("session_id")
@click.option("--remove", is_flag=True, help="also remove the container (the session folder stays)")
@click.option("--force", is_flag=True, help="with --remove: remove the container of a session that is not finished or is open")
@sessions_dir_opt
def stop(session_id: str, remove: bool, force: bool, sessions_dir: Path | None) -> None:
    """Stop a session's container. Records and workspace files stay in the session folder."""
    from .session import SessionMeta
    from .session.layout import LOCK
    from .session.lock import SessionLock

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
    from .runtime.safe_tar import extract_stream

    try:
        stream, _ = container.get_archive("/home/agent")
        return extract_stream(stream, dest)
    except Exception as exc:  # noqa: BLE001 - refuse to remove what could not be kept
        raise RebenchError(f"could not copy the home of {container.name} before removing it: {exc}",
                 kept="the container (stopped) and its volume", fix="retry when the host answers, or copy it by hand with `docker cp`") from None


@main.command()
@click.argument("env_ids", nargs=-1)
@click.option("--all", "all_envs", is_flag=True, help="every environment that has assets")
@click.option("--synthetic", is_flag=True, help="build small assets offline (the smoke profile's; with --profile gpu: full-size shapes, random weights)")
@click.option("--profile", type=click.Choice(["gpu", "smoke"]), default=None, help="default: smoke with --synthetic, else gpu")
@click.option("--from", "source", type=click.Path(exists=True, file_okay=False, path_type=Path), default=None,
              help="import from DIR: a prepared folder with MANIFEST.json (checked by checksum), or downloaded files the environment's prepare.py reads")
@click.option("--force", is_flag=True, help="rebuild even if ready")
@click.option("--verify", "verify_only", is_flag=True, help="only check the prepared files' checksums")
def prepare(env_ids: tuple[str, ...], all_envs: bool, synthetic: bool, profile: str | None, source: Path | None,
            force: bool, verify_only: bool) -> None:
    """Build an environment's assets (models, data) into the cache. Resumable; a second run does nothing."""
    from rich.progress import BarColumn, Progress, TaskProgressColumn, TextColumn, TimeElapsedColumn

    from .assets import AssetProgress, AssetStore

    settings = _settings()
    cat = workstation.catalog(settings)
    if all_envs:
        envs = [e for e in cat.environments.values() if e.manifest.assets is not None]
    elif env_ids:
        envs = [cat.get(e) for e in env_ids]
    else:
        raise UsageError("name an environment (or --all)", fix="e.g. `rebench-tui prepare fix_embedding --synthetic`")
    store = AssetStore(settings.cache_dir)
    prof = profile or ("smoke" if synthetic else "gpu")
    mode = "from" if source is not None else ("synthetic" if synthetic else "fetch")
    failed = 0
    for env in envs:
        with Progress(TextColumn("{task.description}"), BarColumn(), TaskProgressColumn(), TimeElapsedColumn(),
                      console=err, transient=True) as bar:
            task = bar.add_task(env.id, total=None)

            def update(done: float, total: float, label: str, _task=task) -> None:
                bar.update(_task, completed=done, total=total or None, description=f"{env.id}: {label}"[:70])

            prog = AssetProgress(update, lambda text: bar.console.print(text, highlight=False, markup=False))
            if verify_only:
                problems = store.verify(env, prof, prog)
                failed += bool(problems)
                bar.console.print(f"{env.id} ({prof}): " + ("all checksums match" if not problems else "\n  ".join(["PROBLEMS:", *problems])),
                                  highlight=False, markup=False)
            else:
                store.prepare(env, prof, mode, source=source, force=force, progress=prog)
    if failed:
        sys.exit(1)


@main.group()
def images() -> None:
    """Base images (built without a registry)."""


@images.command("list")
def images_list() -> None:
    from .runtime.images import Recipes

    settings = _settings()
    r = Recipes.load(settings.images)
    t = Table(title=f"base images ({settings.images / 'images.toml'})")
    t.add_column("name")
    t.add_column("tag")
    t.add_column("from")
    t.add_column("description")
    t.add_row("rootfs", r.rootfs.tag, f"mmdebstrap {r.rootfs.suite}", ", ".join(r.rootfs.packages))
    for name, rec in r.images.items():
        t.add_row(name, rec.tag, rec.from_, rec.description)
    out.print(t)


@images.command("build")
@click.argument("names", nargs=-1)
@click.option("--host", default=None, help="Docker engine (default: DOCKER_HOST or the local socket)")
def images_build(names: tuple[str, ...], host: str | None) -> None:
    """Build base images NAMES (default: base) and what they need."""
    settings = _settings()
    rt = workstation.connect_docker(settings, host)
    with _steps("building images") as step:
        builder = rt.builder(step)
        for name in names or ("base",):
            step(f"ready: {name} = {builder.ensure(name)}")


@main.command()
@click.argument("env_id", required=False)
@click.option("--profile", type=click.Choice(["gpu", "smoke"]), default=None, help="default: the one `start` would pick here (gpu where the engine gives containers GPUs, else smoke)")
@click.option("--host", default=None, help="Docker engine to check, e.g. ssh://user@gpu-host (default: DOCKER_HOST or the local socket)")
def doctor(env_id: str | None, profile: str | None, host: str | None) -> None:
    """Check that this machine (or --host) can run ENV_ID: engine, API, GPU mode, GPUs,
    disk, assets, SSH keys, clock skew. Each failure comes with its fix; exits 1 if any fails."""
    from .doctor import Doctor

    from .hosts import load_hosts, resolve_host

    settings = _settings()
    if host is not None:
        host = resolve_host(host, load_hosts(settings.hosts_path))
    env = workstation.catalog(settings).get(env_id) if env_id else None
    picked = []
    if env is not None and profile is None:
        profile, picked = _profile_start_picks(env, settings, host)
    doc = Doctor(settings, env, profile, host)
    for why in picked:
        out.print(f"[yellow]note:[/yellow] {escape(why)}", highlight=False)
    findings = doc.run()
    where = host or settings.docker_host or "the local engine"
    out.print(f"[bold]doctor[/bold]: {env_id + ' (' + doc.profile.name + ' profile) on ' if doc.profile else ''}{where}", highlight=False)
    mark = {"ok": "[green]ok  [/green]", "warn": "[yellow]warn[/yellow]", "fail": "[bold red]FAIL[/bold red]", "skip": "[dim]skip[/dim]"}
    width = max(len(f.check) for f in findings)
    for f in findings:
        out.print(f"  {mark[f.status]}  {f.check:<{width}}  {escape(f.detail)}", highlight=False)
        if f.fix and f.status in ("fail", "warn"):
            out.print(f"        {'':<{width}}  [bold]fix:[/bold] {escape(f.fix)}", highlight=False)
    failed = [f.check for f in findings if f.status == "fail"]
    if failed:
        err.print(f"[bold red]{len(failed)} check(s) failed:[/bold red] {', '.join(failed)}", highlight=False)
        sys.exit(1)
    out.print("[green]ready[/green]" + (f" to start {env_id}" if env_id else ""))


def _profile_start_picks(env, settings: Settings, host: str | None) -> tuple[str | None, list[str]]:
    """The profile `start ENV` would pick here (gpu where the engine gives containers GPUs, else
    smoke), with why; where no engine answers, the gpu profile (doctor then says what is missing)."""
    try:
        choice = workstation.choose(env, settings, runtime="docker", host=host)
    except RebenchError:
        return ("gpu" if "gpu" in env.profile_names else None), []
    return choice.profile, [f"checking the {choice.profile} profile, the one `rebench-tui start {env.id}` picks here: {r}"
                            for r in choice.reasons] or [f"checking the {choice.profile} profile, the one "
                                                         f"`rebench-tui start {env.id}` picks here"]


@main.command("hosts")
@click.option("--env", "env_id", default=None, help="also say whether each host can take this environment's gpu profile now")
def hosts_cmd(env_id: str | None) -> None:
    """List the GPU hosts in the hosts file and what each has free.

    The file is ~/.config/rebench-tui/hosts.toml (or $REBENCH_HOSTS_FILE), one [[host]] table
    each with label = "..." and url = "ssh://user@host[:port]" (and optional note, gpu_mode =
    auto|toolkit|devices|none, driver_dir, images; see the README's GPU section)."""
    from .hosts import load_hosts

    settings = _settings()
    path = settings.hosts_path
    hosts = load_hosts(path)
    if not hosts:
        raise RebenchError(f"no hosts listed in {path}", fix=f'add [[host]] tables with label and url to {path}, e.g. label = "gpu-a", url = "ssh://me@gpu-a"')
    env = workstation.catalog(settings).get(env_id) if env_id else None
    need = env.profile("gpu").gpus if env is not None and "gpu" in env.profile_names else 0
    t = Table(title=f"hosts in {path}")
    for col in ("label", "url", "engine", "GPU mode", "GPUs free", *(["fits " + env_id] if env else []), "note"):
        t.add_column(col)
    for h in hosts:
        try:
            rt = workstation.connect_docker(settings, h.url)
        except RebenchError as exc:
            t.add_row(h.label, h.url, f"[red]{exc.what.splitlines()[0][:60]}[/red]", "-", "-", *(["no"] if env else []), h.note)
            continue
        gpus = rt.gpu_inventory()
        free = sum(g.free for g in gpus)
        fit = workstation.host_fit(rt, need, gpus) if env else None
        t.add_row(h.label, h.url, "[green]answers[/green]", rt.gpu_support().summary, f"{free} of {len(gpus)}" if gpus else "no GPUs",
                  *([("yes" if fit is None else f"no: {fit}")] if env else []), h.note)
    out.print(t)


def _export_folders(settings: Settings, session_ids: tuple[str, ...], all_sessions: bool) -> list[Path]:
    if session_ids and all_sessions:
        raise UsageError("give session ids or --all, not both", fix="drop --all to export only the sessions named")
    if all_sessions:
        folders = sorted(p for p in settings.sessions.iterdir() if (p / META).is_file()) \
            if settings.sessions.is_dir() else []
        if not folders:
            raise RebenchError(f"no sessions in {settings.sessions}", fix="pass --sessions-dir")
        return folders
    if session_ids:
        return list(dict.fromkeys(workstation.find_session(settings.sessions, sid) for sid in session_ids))
    raise UsageError("name the sessions to export (or --all)",
                       fix="e.g. `rebench-tui export SESSION_ID --format inspect`; `rebench-tui sessions` lists them")


def _export_one(folder: Path, dest: Path, fmt: str, inspect_fmt: str) -> None:
    if fmt == "inspect":
        from .trajectory.export_inspect import export_inspect

        export_inspect(folder, dest, inspect_fmt)  # type: ignore[arg-type]
    elif fmt == "vivaria":
        from .trajectory.export_vivaria import export_vivaria

        export_vivaria(folder, dest)
    else:
        from .trajectory.export_csv import export_csv

        export_csv(folder, dest)


@main.command("export")
@click.argument("session_ids", nargs=-1)
@click.option("--format", "fmt", type=click.Choice(["inspect", "vivaria", "csv"]), default="inspect", show_default=True,
              help="inspect: an Inspect .eval log (human_cli shape); vivaria: a folder of Vivaria rows; csv: score and command tables")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None,
              help="output folder (default: ./exports), one export per session named after it; with one session, "
                   "a path ending in .eval/.json (inspect) is the file itself")
@click.option("--all", "all_sessions", is_flag=True, help="every session in the sessions folder")
@click.option("--json", "as_json", is_flag=True, help="inspect: write JSON logs instead of .eval")
@sessions_dir_opt
def export(session_ids: tuple[str, ...], fmt: str, output: Path | None, all_sessions: bool, as_json: bool,
           sessions_dir: Path | None) -> None:
    """Export sessions' records (SESSION ids or unique prefixes, or --all) to Inspect, Vivaria or CSV.

    Names in the output folder: ID.eval (or ID.json), ID-vivaria/, ID-csv/. Existing exports are
    replaced; the session folders are only read. Exits 1 if any session failed to export."""
    settings = _settings(sessions_dir)
    folders = _export_folders(settings, session_ids, all_sessions)
    inspect_fmt = "json" if as_json else "eval"
    single_file = (fmt == "inspect" and output is not None and len(folders) == 1
                   and output.suffix in (".eval", ".json") and not output.is_dir())
    if single_file:
        inspect_fmt = output.suffix[1:]
    if fmt == "inspect":
        from .trajectory.export_inspect import inspect_available

        try:
            inspect_available()  # a missing extra stops the batch before it starts
        except RebenchError as exc:  # printed without markup: the fix's "[inspect]" must show as typed
            err.print(f"error: {exc.what}", highlight=False, markup=False)
            err.print(f"next: {exc.fix}", highlight=False, markup=False)
            sys.exit(EXIT_FAILED)
    base = Path("exports") if output is None else output
    names = {"inspect": "{}." + inspect_fmt, "vivaria": "{}-vivaria", "csv": "{}-csv"}
    failed = 0
    for i, folder in enumerate(folders, start=1):
        dest = base if single_file else base / names[fmt].format(folder.name)
        try:
            _export_one(folder, dest, fmt, inspect_fmt)
        except Exception as exc:  # noqa: BLE001 - one bad session does not stop the batch; each is reported
            failed += 1
            what = exc.what if isinstance(exc, RebenchError) else f"{type(exc).__name__}: {exc}"
            err.print(f"[{i}/{len(folders)}] {folder.name}: FAILED: {what}", highlight=False, markup=False)
            if isinstance(exc, RebenchError) and exc.fix:
                err.print(f"    next: {exc.fix}", highlight=False, markup=False)
            continue
        err.print(f"[{i}/{len(folders)}] {folder.name} -> {dest}", highlight=False, markup=False)
    err.print(f"exported {len(folders) - failed} of {len(folders)} session(s) as {fmt} to {base}", highlight=False, markup=False)
    if failed:
        sys.exit(1)


@main.command()
@click.argument("sources", nargs=-1)
@click.option("--humans", "humans_dirs", multiple=True, type=click.Path(file_okay=False, path_type=Path),
              help="a folder of human session folders to compare (repeatable)")
@click.option("--no-humans", is_flag=True, help="do not add the sessions folder's sessions when no human run was named")
@sessions_dir_opt
@click.option("--env", "envs", multiple=True, help="only this environment: id, METR family or family/task (repeatable)")
@click.option("--budget", "budgets", type=_Budget(), multiple=True, default=("8h",), show_default=True,
              help="working-time budget for final scores, e.g. 2h (repeatable; the largest is the main one; none = whole run)")
@click.option("--k-max", type=click.IntRange(min=1), default=None, help="largest k for score@k (default: most runs on one environment)")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=0), default=1000, show_default=True, help="bootstrap resamples for the score@k band")
@click.option("--seed", type=int, default=0, show_default=True, help="seed of the bootstrap")
@click.option("--level", type=click.FloatRange(0.5, 0.999), default=0.95, show_default=True, help="coverage of the band")
@click.option("--task", default=None, help="environment of Vivaria files that name no taskId (e.g. ai_rd_fix_embedding/main)")
@click.option("--label", default=None, help="agent label for runs whose files name no agent or model")
@click.option("--profile", default="gpu", show_default=True,
              help="profile for agent runs of environments METR never published, and for --anchors calibrated")
@click.option("--anchors", "anchors", default=None, metavar="published|calibrated|FILE",
              help="normalize every run by these instead of its own setting's: METR's published figures, this host's "
                   "calibration (`rebench-tui calibrate`), or a file (a calibration file, or TOML [environments.<id>] "
                   "start/reference tables)")
@click.option("--finished-only", is_flag=True, help="leave out unfinished runs")
@click.option("--paper-setting-only", is_flag=True,
              help="leave out runs recorded as not made in the paper's setting (another judge, code model, data...)")
@click.option("-o", "--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="folder for report files (default: ./compare-report); alone it writes PNG, HTML and CSV")
@click.option("--png", is_flag=True, help="write compare.png (best-so-far curves, score@k with its band)")
@click.option("--html", is_flag=True, help="write compare.html (self-contained: the PNG embedded, tables)")
@click.option("--csv", "csv_", is_flag=True, help="write curves.csv, score_at_k.csv, summary.csv, runs.csv")
@click.option("--tui", is_flag=True, help="open the comparison on screen instead of printing it")
@click.option("--study", "study_url", default=None, metavar="URL",
              help="also every session a study's collector witnessed, read from its rows (a researcher's token)")
@click.option("--rule", type=click.Choice(["paper", "robust"]), default="paper", show_default=True,
              help="how every run is counted, human or agent: paper = the best single scoring (comparable with METR's "
                   "numbers); robust = attempts' medians and the finish's recount (runs without fingerprints are left out)")
@click.option("--mix-profiles", is_flag=True,
              help="keep human sessions of a profile other than gpu (smoke) in the one human group with GPU-setting "
                   "runs; by default they are a group of their own, human (smoke)")
@click.option("--participant", "participants", multiple=True, help="only human sessions of this participant id (repeatable)")
@click.option("--ai-tools", type=click.Choice(["yes", "no", "unknown"]), default=None,
              help="only human sessions whose participant could (yes) or could not (no) use AI tools")
@click.option("--internet/--no-internet", default=None, help="only human sessions with (or without) the internet allowed")
def compare(sources: tuple[str, ...], humans_dirs: tuple[Path, ...], no_humans: bool, sessions_dir: Path | None,
            envs: tuple[str, ...], budgets: tuple[str, ...], k_max: int | None, n_boot: int, seed: int, level: float,
            task: str | None, label: str | None, profile: str, anchors: str | None, finished_only: bool,
            paper_setting_only: bool, out_dir: Path | None, png: bool, html: bool, csv_: bool, tui: bool, study_url: str | None,
            rule: str, mix_profiles: bool, participants: tuple[str, ...], ai_tools: str | None,
            internet: bool | None) -> None:
    """Compare human sessions with agent runs: best-so-far score vs working time, finals, score@k.

    SOURCES: session ids or folders, Inspect logs (.eval/.json), Vivaria JSON/JSONL (trace entries,
    score-log rows or run objects), or folders of any of these. Without human sources, the
    sessions folder's sessions are added.

    Each run is normalized by the anchors of the setting it was scored in: a human session by
    the ones it recorded, a run whose log carries its own by those, an agent run of a METR task
    by METR's published ones. Every table says which anchors each group used.

    \b
    rebench-tui compare runs/agents/ --budget 2h --budget 8h
    rebench-tui compare runs/claude.eval --humans sessions/ --env fix_embedding -o report/
    rebench-tui compare trace.jsonl --task ai_rd_triton_cumsum/main --label my-agent --tui
    """
    from .compare.analysis import compare as run_compare
    from .compare.command import HumanFilter, gather, resolver_for, write_reports

    settings = _settings(sessions_dir)
    resolver = resolver_for(settings, profile, anchors)
    got = gather(sources, resolver, sessions_dir=settings.sessions, humans_dirs=humans_dirs, no_humans=no_humans,
                 envs=envs, finished_only=finished_only, task=task, label=label, paper_setting_only=paper_setting_only,
                 runs=_study_runs(study_url, resolver, settings) if study_url else (),
                 who=HumanFilter(participants, ai_tools, internet), mix_profiles=mix_profiles)
    _say_gathered(got)
    result = run_compare(got.runs, budgets=list(budgets), k_max=k_max, n_boot=n_boot,
                         seed=seed, level=level, rule=rule)
    result.beside = list(got.beside)
    for w in result.warnings:  # runs on different scales averaged together: said before anything else
        err.print(f"[bold yellow]warning:[/bold yellow] {escape(w)}", highlight=False)
    if out_dir is not None and not (png or html or csv_):
        png = html = csv_ = True
    if png or html or csv_:
        for path in write_reports(result, out_dir or Path("compare-report"), png=png, html=html, csv=csv_,
                                  warnings=got.warnings):
            err.print(f"wrote {path}", highlight=False)
    if tui:
        from .tui.screens.compare import CompareApp

        CompareApp(result).run()
    else:
        from .compare.terminal import print_report

        print_report(out if out.is_terminal else Console(soft_wrap=True, width=160), result)


def _say_gathered(got) -> None:
    """What reading the sources found worth saying: warnings, then notes."""
    for w in got.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    for n in got.notes:
        err.print(f"[dim]note:[/dim] {escape(n)}", highlight=False)


def _study_runs(url: str, resolver, settings: Settings) -> list:
    """Every session the collector at ``url`` witnessed, as runs read from the witnessed rows."""
    from .compare.witnessed import read_witnessed, witnessed_rows
    from .study.attach import collector_for

    collector = collector_for(url, settings)
    runs = []
    for s in collector.study():
        try:  # one session whose record does not read is left out with a warning, never the study
            runs.append(read_witnessed(s["id"], witnessed_rows([r["line"] for r in collector.rows(s["id"])]),
                                       f"{url} ({s['participant']})", resolver))
        except (RebenchError, ValueError, KeyError, TypeError) as exc:
            why = getattr(exc, "what", None) or f"{type(exc).__name__}: {exc}"
            words = f"session {s.get('id')} left out: {why}"
            err.print(f"[yellow]warning:[/yellow] {escape(words)}", highlight=False)
    return [r for r in runs if r is not None]


def _add_study_commands() -> None:
    from .study.commands import collector, study
    from .study.kiosk.command import kiosk

    main.add_command(collector)
    main.add_command(study)
    main.add_command(kiosk)


_add_study_commands()

if __name__ == "__main__":
    main()
