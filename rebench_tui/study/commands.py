"""The researcher's commands: `collector serve`, `collector token`, `study status`, `study keygen`."""

from __future__ import annotations

import signal
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..clock import format_hms, parse_duration
from ..config import Settings
from ..errors import RebenchError
from ..trajectory.sealing import SEALED, researcher_key
from .attach import collector_for
from .ledger import Ledger
from .server import MAX_BODY, CollectorServer, tls_context
from .summary import opened_counting

err = Console(stderr=True, soft_wrap=True)
out = Console(soft_wrap=True)
db_opt = click.option("--db", "db_path", type=click.Path(dir_okay=False, path_type=Path), default=Path("study.db"),
                      show_default=True, help="the study's SQLite database (made if missing)")


@click.group()
def collector() -> None:
    """The study collector: the service that witnesses every session's rows as they are written."""


@collector.command("token")
@click.argument("participant")
@click.option("--researcher", is_flag=True, help="a researcher's token: reads every session, writes none")
@db_opt
def token_cmd(participant: str, researcher: bool, db_path: Path) -> None:
    """Make PARTICIPANT's token and print it once (only its hash is kept)."""
    ledger = Ledger(db_path)
    try:
        token = ledger.add(participant, "researcher" if researcher else "participant")
    finally:
        ledger.close()
    err.print(f"token for {participant} ({'researcher' if researcher else 'participant'}); it is not shown again. "
              "Give it to them to put in ~/.config/rebench-tui/study-token or REBENCH_STUDY_TOKEN:", highlight=False)
    out.print(token, highlight=False, markup=False)


@collector.command("serve")
@db_opt
@click.option("--host", default="127.0.0.1", show_default=True, help="address to listen on")
@click.option("--port", type=click.IntRange(0, 65535), default=8765, show_default=True)
@click.option("--cert", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="TLS certificate (PEM); with --key the collector speaks HTTPS only")
@click.option("--key", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None, help="its private key (PEM)")
@click.option("--max-body", type=click.IntRange(1024), default=MAX_BODY, show_default=True, help="largest request body, in bytes")
@click.option("--stop-after", default=None, help="stop by itself after this long (e.g. 9h); default: until interrupted")
def serve(db_path: Path, host: str, port: int, cert: Path | None, key: Path | None, max_body: int,
          stop_after: str | None) -> None:
    """Serve the study: take participants' rows, answer the researcher's questions."""
    if (cert is None) != (key is None):
        raise RebenchError("--cert and --key go together", fix="give both (HTTPS) or neither (HTTP)")
    ledger = Ledger(db_path)
    server = CollectorServer(ledger, (host, port), max_body=max_body,
                             tls=tls_context(cert, key) if cert and key else None)
    err.print(f"collector serving {db_path} at {server.url}"
              + ("" if cert else " (plain HTTP: give --cert and --key for HTTPS beyond this machine)"), highlight=False)
    # Ctrl-C and SIGTERM (a service manager's stop) both end it cleanly. Set here, not inherited:
    # a shell starts a background job (`collector serve ... &`) with SIGINT ignored, and Python then
    # never turns Ctrl-C into KeyboardInterrupt, so a `kill -INT` would be lost.
    previous = {sig: signal.signal(sig, _interrupt) for sig in (signal.SIGINT, signal.SIGTERM)}
    stopped_by = "--stop-after"
    try:
        thread = server.start()
        thread.join(timeout=parse_duration(stop_after) if stop_after else None)
    except KeyboardInterrupt as exc:
        stopped_by = str(exc) or "SIGINT"
    finally:
        server.stop()
        ledger.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    err.print(f"collector stopped ({stopped_by}); every witnessed row is in the database", highlight=False)


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@click.group()
def study() -> None:
    """A researcher's view of a study's collector."""


@study.command("status")
@click.argument("url")
def status_cmd(url: str) -> None:
    """List every live and finished session the collector at URL witnessed (a researcher's token)."""
    collector = collector_for(url, Settings())
    sessions = collector.study()
    key = researcher_key()  # REBENCH_RESEARCHER_KEY: hidden scores are counted here, from the witnessed rows
    t = Table(title=f"study at {url}: {len(sessions)} session(s)")
    for col in ("session", "participant", "env", "status", "working", "scorings", "counting", "last row", "gaps"):
        t.add_column(col, no_wrap=True)
    for s in sessions:
        try:
            if s.get("skipped"):
                raise ValueError(s["skipped"])
            if key is not None and s.get("counting") in ("hidden", SEALED):
                s = {**s, "counting": opened_counting([r["line"] for r in collector.rows(s["id"])], key)}
            t.add_row(*status_row(s))
        except (KeyError, TypeError, ValueError) as exc:  # one bad session never hides the others
            err.print(f"[yellow]warning:[/yellow] {escape(_skip_words(s, exc))}", highlight=False)
    (out if out.is_terminal else Console(soft_wrap=True, width=200)).print(t)


def _skip_words(s: dict, exc: Exception) -> str:
    if s.get("skipped"):
        return str(s["skipped"])
    return f"session {s.get('id', '?')} left out: the collector's line for it does not read ({type(exc).__name__}: {exc})"


def status_row(s: dict) -> list[str]:
    limit = s.get("time_limit_s")
    working = format_hms(s["working_s"]) + ("" if limit is None else f" / {format_hms(limit)}")
    counting = s["counting"]
    shown = counting if counting in ("hidden", SEALED) else "—" if counting is None else f"{counting:.6g}"
    age = s["last_row_age_s"]
    gaps = "none" if not s["gaps"] else f"{s['gaps']} (longest {format_hms(s['longest_gap_s'])})"
    return [s["id"], s["participant"], s["env_id"], s["status"], working, str(s["scorings"]), shown,
            "—" if age is None else f"{format_hms(max(0.0, age))} ago", gaps]


# `study keygen`: a thin command (movable as it is); the keys are trajectory.sealing's.
@study.command("keygen")
@click.argument("out", type=click.Path(dir_okay=False, path_type=Path))
def keygen_cmd(out: Path) -> None:
    """Make a researcher's key pair: OUT (the private key, mode 0600) and OUT.pub; hidden scores
    sealed to the public key open only with OUT."""
    from ..trajectory.sealing import write_keypair

    pub, public = write_keypair(out)
    click.echo(public)
    err.print(f"private key: {escape(str(out))} (mode 0600; keep it off every participant's machine)\n"
              f"public key: {escape(str(pub))}: set REBENCH_SEAL_TO={escape(str(pub))} where sessions start, and "
              f"REBENCH_RESEARCHER_KEY={escape(str(out))} where you read their records back", highlight=False)
