"""What every command shares: the two consoles, the settings, the --sessions-dir option, the
working-time and progress helpers, the session index, and the one error form (what went wrong,
what was kept, what to do next) with the exit statuses a script can trust.

Kept light: `rebench-tui --help` imports this module and nothing heavier than click and rich."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Iterator

import click
from rich.console import Console
from rich.markup import escape

from ..clock import parse_duration
from ..errors import RebenchError, UsageError

if TYPE_CHECKING:
    from ..config import Settings


err = Console(stderr=True, soft_wrap=True)


out = Console(soft_wrap=True)


def _settings(sessions_dir: Path | None = None) -> Settings:
    from ..config import Settings  # pydantic-settings: loaded by a command, not by --help

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
    from ..clock import MAX_TIME_LIMIT_S, check_time_limit

    if seconds is None:
        return None
    try:
        return check_time_limit(seconds)
    except ValueError as exc:
        raise UsageError(f"--time-limit refused: {exc}", kept="nothing was started",
                         fix=f"give at most {MAX_TIME_LIMIT_S / 3600:.0f}h (e.g. --time-limit 8h, the paper's working "
                             "time and the default)") from None


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


CONTEXT = {"help_option_names": ["-h", "--help"], "max_content_width": 100}


sessions_dir_opt = click.option("--sessions-dir", type=click.Path(file_okay=False, path_type=Path), default=None,
                                help="where session folders live (default: sessions/ in the project, or $REBENCH_SESSIONS_DIR)")


def _store(settings):
    """The session index; an unreadable one is moved aside and rebuilt from the session folders (said on stderr)."""
    from ..session.reindex import open_store

    return open_store(settings.sessions, say=lambda m: err.print(f"[yellow]note:[/yellow] {m}", highlight=False))


def _anchors_here(env, profile: str, settings: Settings):
    """(anchors in effect here, or None, and the problem reading a calibration file, or None)."""
    from ..catalog.anchors import AnchorsError, anchors_in_effect

    try:
        return anchors_in_effect(env, profile, settings.config_dir), None
    except AnchorsError as exc:
        return None, exc.what
