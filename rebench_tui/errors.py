"""Errors that tell the user what went wrong, what was kept, and what to do next."""

from __future__ import annotations


class RebenchError(Exception):
    """Base for every error the user may see.

    ``what`` says what went wrong, ``kept`` what was preserved (records, files, containers),
    ``fix`` the next step to take. ``str()`` joins them into one readable message.
    """

    def __init__(self, what: str, *, kept: str | None = None, fix: str | None = None) -> None:
        super().__init__(what)
        self.what = what
        self.kept = kept
        self.fix = fix

    def __str__(self) -> str:
        parts = [self.what]
        if self.kept:
            parts.append(f"Kept: {self.kept}")
        if self.fix:
            parts.append(f"Next: {self.fix}")
        return "\n".join(parts)


class CatalogError(RebenchError):
    """One or more environment folders are invalid; ``problems`` lists every one found."""

    def __init__(self, problems: list["Problem"]) -> None:  # noqa: F821 - defined in catalog
        self.problems = problems
        lines = [f"{len(problems)} problem(s) in the environment catalog:"]
        lines += [f"  - {p}" for p in problems]
        super().__init__("\n".join(lines), fix="correct the files named above and run `rebench-tui list` again")


class RuntimeUnavailable(RebenchError):
    """The container engine (or the GPU runtime inside it) cannot be used."""


class SessionError(RebenchError):
    """A session could not be created, opened or changed."""


class UsageError(RebenchError):
    """The command line asks for something that cannot be done as written (a missing or clashing
    argument): the CLI exits 2 for these, as for click's own usage errors, and 1 for every other
    error, so a script can tell "called wrongly" from "failed"."""
