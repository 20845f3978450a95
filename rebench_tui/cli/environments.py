"""Environments and machines: `list`, `doctor`, `prepare`, `calibrate`, `images`, `hosts`."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape
from rich.table import Table

from .. import workstation
from ..config import Settings
from ..errors import RebenchError, UsageError
from .common import _anchors_here, _settings, _steps, err, out
from .tables import _environments_brief, _environments_table, _setting_table


@click.command("list")
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


def _print_anchors_detail(env, p, settings: Settings) -> None:
    """list -v: where a profile's anchors come from, which are in effect here, and how to calibrate."""
    from ..catalog.anchors import manifest_anchors

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


def _print_paper_figures(env) -> None:
    """list -v: the paper's spread of the starting score (Table 4) and time for one scoring (Table 3)."""
    from ..catalog.paper_figures import figures_lines

    paper = env.manifest.paper
    if paper is not None:
        for line in figures_lines(paper.start_spread, paper.run_and_score):
            out.print(f"  {env.id}: {line}", highlight=False, markup=False)


@click.command()
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
    from ..calibrate import calibrate as run_calibration

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


@click.command()
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

    from ..assets import AssetProgress, AssetStore

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


@click.group()
def images() -> None:
    """Base images (built without a registry)."""


@images.command("list")
def images_list() -> None:
    from ..runtime.images import Recipes

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


@click.command()
@click.argument("env_id", required=False)
@click.option("--profile", type=click.Choice(["gpu", "smoke"]), default=None, help="default: the one `start` would pick here (gpu where the engine gives containers GPUs, else smoke)")
@click.option("--host", default=None, help="Docker engine to check, e.g. ssh://user@gpu-host (default: DOCKER_HOST or the local socket)")
def doctor(env_id: str | None, profile: str | None, host: str | None) -> None:
    """Check that this machine (or --host) can run ENV_ID: engine, API, GPU mode, GPUs,
    disk, assets, SSH keys, clock skew. Each failure comes with its fix; exits 1 if any fails."""
    from ..doctor import Doctor

    from ..hosts import load_hosts, resolve_host

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


@click.command("hosts")
@click.option("--env", "env_id", default=None, help="also say whether each host can take this environment's gpu profile now")
def hosts_cmd(env_id: str | None) -> None:
    """List the GPU hosts in the hosts file and what each has free.

    The file is ~/.config/rebench-tui/hosts.toml (or $REBENCH_HOSTS_FILE), one [[host]] table
    each with label = "..." and url = "ssh://user@host[:port]" (and optional note, gpu_mode =
    auto|toolkit|devices|none, driver_dir, images; see the README's GPU section)."""
    from ..hosts import load_hosts

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
