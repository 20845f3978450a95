"""A session's records: `sessions` (the index), `verify`, `repair`, `export`."""

from __future__ import annotations

import sys
from pathlib import Path

import click
from rich.markup import escape

from .. import workstation
from ..config import Settings
from ..errors import RebenchError, UsageError
from ..trajectory.records import META
from .common import EXIT_FAILED, _settings, _store, err, out, sessions_dir_opt
from .tables import _sessions_table


@click.command("verify")
@click.argument("session_ids", nargs=-1)
@click.option("--witness", "witness_url", default=None, metavar="URL",
              help="also compare every row with what the study's collector at URL witnessed")
@sessions_dir_opt
def verify_cmd(session_ids: tuple[str, ...], witness_url: str | None, sessions_dir: Path | None) -> None:
    """Check sessions' records: hash chain, trace-entry contract, the session's state (finished,
    active, interrupted) against session.json, score log, final score, files.

    Exits 1 if any check fails, naming the first bad line. Default: every session; a damaged one
    is reported and the others are still checked."""
    from ..session.reindex import is_session_folder
    from ..trajectory.verify import verify

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
            from ..study.attach import collector_for
            from ..study.check import check_witnessed

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


@click.command("repair")
@click.argument("session_id")
@sessions_dir_opt
def repair_cmd(session_id: str, sessions_dir: Path | None) -> None:
    """Rebuild a session's session.json and score_log.csv from its audit log (the record of truth)
    where they are missing, damaged or disagree with it; says what it rebuilt. The audit log itself
    is never changed. Then `rebench-tui verify SESSION_ID`."""
    from ..session.repair import repair_session
    from ..trajectory.state import read_chain_state

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

    from ..trajectory.entries import log_event
    from ..trajectory.records import AUDIT

    try:
        with open(folder / AUDIT, "rb") as fh:
            facts = log_event(json.loads(fh.readline()).get("content")) or {}
    except (OSError, ValueError, AttributeError):
        return {}
    return facts if facts.get("event") == "session_started" else {}


@click.command("sessions")
@click.option("--env", "env_id", default=None)
@click.option("--status", type=click.Choice(["active", "finished"]), default=None)
@click.option("--rebuild-index", is_flag=True, help="rebuild sessions/index.db from the session folders first (the records are the truth)")
@click.option("-v", "--verbose", is_flag=True, help="every column: environment, profile, runtime@host, scorings, normalized final")
@sessions_dir_opt
def sessions_cmd(env_id: str | None, status: str | None, rebuild_index: bool, verbose: bool, sessions_dir: Path | None) -> None:
    """List sessions from the index (an unreadable index is rebuilt from the session folders by itself)."""
    from ..store import Store

    settings = _settings(sessions_dir)
    if rebuild_index:
        from ..session.reindex import rebuild_index as _rebuild

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


def _damaged_sessions(sessions: Path, rows: list[dict], listed_all: bool) -> dict[str, str]:
    """Sessions whose session.json does not read (by id: what is wrong): those listed from the index,
    and, when every session is listed, session folders the index could not take at all."""
    from ..session import SessionMeta
    from ..session.reindex import is_session_folder

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
        from ..trajectory.export_inspect import export_inspect

        export_inspect(folder, dest, inspect_fmt)  # type: ignore[arg-type]
    elif fmt == "vivaria":
        from ..trajectory.export_vivaria import export_vivaria

        export_vivaria(folder, dest)
    else:
        from ..trajectory.export_csv import export_csv

        export_csv(folder, dest)


@click.command("export")
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
        from ..trajectory.export_inspect import inspect_available

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
