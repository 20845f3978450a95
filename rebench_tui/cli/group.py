"""The top-level command group: its commands are named in a table and each one's module is
imported only when that command runs or its help is shown; `--help` lists them in sections from
the table's one-line help alone; click's usage errors and ours leave as one line and an exit status."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, MutableMapping

import click

from ..errors import RebenchError, UsageError
from .common import EXIT_FAILED, EXIT_USAGE, _print_error, _usage_error


def first_sentence(text: str) -> str:
    """A command's help up to its first sentence's end, whole (click's own cuts at 45 characters)."""
    flat = " ".join(text.split("\b")[0].split())
    for end in (". ", ".\n"):
        if end in flat:
            return flat[: flat.index(end) + 1]
    return flat


class LazyCommands(MutableMapping):
    """Name -> command, as click's ``Group.commands``; a name given as "module:attribute" is imported
    the first time it is looked up. Listing the names (help, "did you mean") imports nothing."""

    def __init__(self, where: dict[str, str]) -> None:
        self._where = dict(where)
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        if name not in self._loaded:
            module, attr = self._where[name].split(":")  # KeyError: no such command
            self._loaded[name] = getattr(importlib.import_module(module), attr)
        return self._loaded[name]

    def __setitem__(self, name: str, cmd: click.Command) -> None:
        self._where.pop(name, None)
        self._loaded[name] = cmd

    def __delitem__(self, name: str) -> None:
        if self._where.pop(name, None) is None:
            del self._loaded[name]
        else:
            self._loaded.pop(name, None)

    def __contains__(self, name: object) -> bool:  # without importing it
        return name in self._where or name in self._loaded

    def __iter__(self) -> Iterator[str]:
        return iter([*self._where, *(n for n in self._loaded if n not in self._where)])

    def __len__(self) -> int:
        return len(set(self._where) | set(self._loaded))


class LazyGroup(click.Group):
    """``lazy``: name -> ("module:attribute", first sentence of its help); ``sections``: (title,
    names, example) for the help's listing; a command not in a section is listed under "Other"."""

    def __init__(self, *args, lazy: dict[str, tuple[str, str]], sections=(), **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.commands = LazyCommands({name: where for name, (where, _short) in lazy.items()})
        self.short_help_of = {name: short for name, (_where, short) in lazy.items()}
        self.sections = tuple(sections)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(self.commands)  # the names only: nothing is imported

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return self.commands.get(cmd_name)  # imports that command's module, once

    def _row(self, ctx: click.Context, name: str) -> tuple[str, str]:
        short = self.short_help_of.get(name)
        if short is None:  # added by add_command, not in the table: its own help
            cmd = self.get_command(ctx, name)
            short = first_sentence(cmd.help or "") if cmd is not None else ""
        return name, short

    def make_context(self, info_name, args, parent=None, **extra):  # `rebench-tui --bogus`
        try:
            return super().make_context(info_name, args, parent, **extra)
        except click.exceptions.NoArgsIsHelpError as exc:  # bare `rebench-tui`: the help, not an error
            click.echo(exc.ctx.get_help() if exc.ctx is not None else self.get_help(click.Context(self)))
            sys.exit(0)
        except click.UsageError as exc:
            _usage_error(exc)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands in sections, each with its first sentence whole and an example."""
        if ctx.parent is not None:  # a group under another lists its commands plainly
            return super().format_commands(ctx, formatter)
        names = set(self.list_commands(ctx))
        placed: set[str] = set()
        for title, members, example in self.sections:
            rows = [self._row(ctx, n) for n in members if n in names]
            placed.update(members)
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)
                    formatter.write_text(f"e.g. {example}")
        rest = [self._row(ctx, n) for n in sorted(names - placed)]
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
