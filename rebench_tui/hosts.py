"""The hosts file: GPU hosts the workstation may start sessions on.

``~/.config/rebench-tui/hosts.toml`` (or ``$REBENCH_HOSTS_FILE``)::

    [[host]]
    label = "h200-a"                       # what `--host` and the screen call it
    url = "ssh://alice@gpu-a.example.org"  # a Docker engine: ssh://user@host[:port], tcp://, unix://
    note = "8x H200, lab A"                # optional

`start` without ``--host`` tries the hosts in file order and takes the first whose engine
answers and has the free GPUs the profile needs (checked on the host, not assumed); `--host`
takes a label or a URL.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import RebenchError

SCHEMES = ("ssh://", "tcp://", "unix://")


class Host(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    url: str
    note: str = ""

    @field_validator("url")
    @classmethod
    def _engine_url(cls, v: str) -> str:
        if not v.startswith(SCHEMES):
            raise ValueError(f"must start with one of {', '.join(SCHEMES)}")
        return v


class HostsFile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    host: list[Host] = Field(default_factory=list)

    @field_validator("host")
    @classmethod
    def _unique(cls, hosts: list[Host]) -> list[Host]:
        seen: set[str] = set()
        for h in hosts:
            if h.label in seen:
                raise ValueError(f"label {h.label!r} is used twice")
            seen.add(h.label)
        return hosts


def hosts_path(config_dir: Path) -> Path:
    return Path(os.environ.get("REBENCH_HOSTS_FILE") or config_dir / "hosts.toml")


def load_hosts(path: Path) -> list[Host]:
    """The hosts in file order; none if the file does not exist. A bad file is an error naming each problem."""
    if not path.is_file():
        return []
    try:
        return HostsFile.model_validate(tomllib.loads(path.read_text(encoding="utf-8"))).host
    except tomllib.TOMLDecodeError as exc:
        raise RebenchError(f"{path} is not valid TOML: {exc}", fix=f"correct {path}") from None
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise RebenchError(f"{path}: {problems}", fix=f"correct {path} (see `rebench-tui hosts --help`)") from None


def resolve_host(value: str, hosts: list[Host]) -> str:
    """A label from the hosts file, or an engine URL as it is."""
    for h in hosts:
        if h.label == value:
            return h.url
    if value.startswith(SCHEMES):
        return value
    known = ", ".join(h.label for h in hosts) or "none (no hosts file)"
    raise RebenchError(f"{value!r} is neither a host label nor an engine URL", fix=f"use ssh://user@host[:port] or one of: {known}")
