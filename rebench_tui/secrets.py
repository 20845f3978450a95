"""Secrets an environment needs (model API keys and endpoints): where they come from, where they
go, and how they are kept out of every record.

Values come from environment variables, else from a secrets file (``.env`` syntax, read with
python-dotenv's parser: ``NAME=value`` lines, quotes, ``export``, comments) that must be readable
by its owner only. Inside the sandbox they reach only the environment's services
(their environment) and the root-only file ``<protected>/secrets.env``: never the participant's
environment. Every record the session writes passes through :class:`Redactor`.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Mapping

from dotenv.parser import parse_stream

from .errors import RebenchError

MIN_REDACT = 4  # shorter values would blank out ordinary text


def read_secrets_file(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    mode = path.stat().st_mode
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise RebenchError(
            f"the secrets file {path} can be read by others (mode {stat.filemode(mode)})",
            kept="nothing was read from it",
            fix=f"chmod 600 {path}",
        )
    values: dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for binding in parse_stream(fh):  # python-dotenv's own parser (dotenv_values runs it), for its line numbers
            if binding.error or (binding.key is not None and binding.value is None):
                raise RebenchError(f"{path}:{binding.original.line}: expected NAME=value",
                                   kept="nothing was read from it", fix="fix that line")
            if binding.key is not None:  # None: a blank or comment line
                values[binding.key] = binding.value
    return values


def resolve(names: list[str], path: Path, environ: Mapping[str, str] | None = None, *, required: bool = True,
            env_id: str = "", profile: str = "") -> dict[str, str]:
    """The values of ``names``; raises naming every missing one (unless ``required`` is False)."""
    environ = os.environ if environ is None else environ
    if not names:
        return {}
    from_file = read_secrets_file(path)
    values = {n: environ.get(n) or from_file.get(n) for n in names}
    missing = [n for n, v in values.items() if not v]
    if missing and required:
        raise RebenchError(
            f"{env_id} ({profile}) needs secrets that are not set: {', '.join(missing)}",
            kept="nothing was started",
            fix=f"export them (e.g. `export {missing[0]}=...`) or put `NAME=value` lines in {path} (chmod 600); "
                "they reach only the environment's protected services, never the participant or the records",
        )
    return {n: v for n, v in values.items() if v}


class Redactor:
    """Replaces secret values (and their JSON-escaped forms) with ``[redacted:NAME]``."""

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        pairs = []
        for name, value in (secrets or {}).items():
            if len(value) < MIN_REDACT:
                continue
            escaped = json.dumps(value)[1:-1]
            for form in {value, escaped}:
                pairs.append((form, f"[redacted:{name}]"))
        self.pairs = sorted(pairs, key=lambda p: -len(p[0]))  # longest first: no partial leftovers

    @classmethod
    def from_pairs(cls, pairs: list[tuple[str, str]] | list[list[str]]) -> "Redactor":
        """The same redactor from its ``pairs`` (how a child process receives it, over a pipe)."""
        r = cls()
        r.pairs = [(str(a), str(b)) for a, b in pairs]
        return r

    def __bool__(self) -> bool:
        return bool(self.pairs)

    def text(self, s: str) -> str:
        for value, mark in self.pairs:
            if value in s:
                s = s.replace(value, mark)
        return s

    def data(self, b: bytes) -> bytes:
        for value, mark in self.pairs:
            v = value.encode("utf-8")
            if v in b:
                b = b.replace(v, mark.encode("utf-8"))
        return b


def secrets_env_file(values: Mapping[str, str]) -> bytes:
    return "".join(f"{k}={v}\n" for k, v in values.items()).encode("utf-8")
