"""`compare`: human sessions beside agent runs (the compare package does the work; this reads
the options, says what was gathered and prints or writes the report)."""

from __future__ import annotations

from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape

from ..config import Settings
from ..errors import RebenchError
from .common import _settings, err, out, sessions_dir_opt


class _Budget(click.ParamType):
    """A working-time budget for compare (2h, 8h, or none): a bad one is a usage error."""

    name = "budget"

    def convert(self, value, param, ctx):
        from ..compare.command import parse_budget

        if not isinstance(value, str):
            return value
        try:
            return parse_budget(value)
        except RebenchError as exc:
            what = f"{value!r}: " + exc.what.removeprefix(f"--budget {value!r}: ")  # click names the option
            self.fail(f"{what}; {exc.fix}" if exc.fix else what, param, ctx)


@click.command()
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
    from ..compare.analysis import compare as run_compare
    from ..compare.command import HumanFilter, gather, resolver_for, write_reports

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
        from ..tui.screens.compare import CompareApp

        CompareApp(result).run()
    else:
        from ..compare.terminal import print_report

        print_report(out if out.is_terminal else Console(soft_wrap=True, width=160), result)


def _say_gathered(got) -> None:
    """What reading the sources found worth saying: warnings, then notes."""
    for w in got.warnings:
        err.print(f"[yellow]warning:[/yellow] {escape(w)}", highlight=False)
    for n in got.notes:
        err.print(f"[dim]note:[/dim] {escape(n)}", highlight=False)


def _study_runs(url: str, resolver, settings: Settings) -> list:
    """Every session the collector at ``url`` witnessed, as runs read from the witnessed rows."""
    from ..compare.witnessed import read_witnessed, witnessed_rows
    from ..study.attach import collector_for

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
