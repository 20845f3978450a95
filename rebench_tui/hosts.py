"""The hosts file: GPU hosts the workstation may start sessions on.

``~/.config/rebench-tui/hosts.toml`` (or ``$REBENCH_HOSTS_FILE``)::

    [[host]]
    label = "h200-a"                       # what `--host` and the screen call it
    url = "ssh://alice@gpu-a.example.org"  # a Docker engine: ssh://user@host[:port], tcp://, unix://
    note = "8x H200, lab A"                # optional
    gpu_mode = "auto"                      # optional: auto | toolkit | devices | none (see below)
    driver_dir = "/usr/local/nvidia"       # optional, devices mode: the driver's lib64/ (or lib/) and bin/
    images = { torch-cuda = "my/cuda:1" }  # optional: base images this host provides itself

How containers get GPUs (``gpu_mode``; `rebench-tui doctor` says which one a host will use and why):

- ``toolkit``: the NVIDIA Container Toolkit on the host; GPUs are asked for with device requests.
- ``devices``: no toolkit needed: the GPU's device nodes (``/dev/nvidiaN`` with ``nvidiactl``,
  ``nvidia-uvm``, ``nvidia-uvm-tools``) are passed in, and the driver's libraries and tools are
  mounted read-only at ``/usr/local/nvidia`` (from ``driver_dir``; without it, the libraries the
  host's ``ldconfig -p`` lists, one by one).
- ``auto`` (the default): ``toolkit`` where the engine lists the nvidia runtime, else ``devices``
  where the host has NVIDIA device nodes and driver libraries, else ``none``.
- ``none``: this host gives containers no GPUs.

An entry whose url is the local socket (``unix:///var/run/docker.sock``) configures the local
engine the same way. `start` without ``--host`` tries the hosts in file order and takes the first
whose engine answers and has the free GPUs the profile needs (checked on the host, not assumed);
`--host` takes a label or a URL.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from .errors import RebenchError

SCHEMES = ("ssh://", "tcp://", "unix://")
LOCAL_SOCKET = "unix:///var/run/docker.sock"
GpuMode = Literal["auto", "toolkit", "devices", "none"]


class Host(BaseModel):
    model_config = ConfigDict(extra="forbid")
    label: str = Field(min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    url: str
    note: str = ""
    gpu_mode: GpuMode = "auto"
    # devices mode: the host folder with the driver's libraries (lib64/ or lib/) and tools (bin/)
    driver_dir: str | None = None
    # devices mode: where the host's NVIDIA device nodes are. Always /dev on a real host; another
    # folder holds stand-in nodes (tests on machines without a GPU).
    device_dir: str = "/dev"
    # recipe name (images/images.toml) -> an image this host's engine already has, used instead of
    # building the recipe there (offline hosts, or a CUDA image of your own built on images/base)
    images: dict[str, str] = Field(default_factory=dict)

    @field_validator("url")
    @classmethod
    def _engine_url(cls, v: str) -> str:
        if not v.startswith(SCHEMES):
            raise ValueError(f"must start with one of {', '.join(SCHEMES)}")
        return v

    @field_validator("driver_dir", "device_dir")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError("must be an absolute path on the host")
        return v if v is None or v == "/" else v.rstrip("/")


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


def _same_engine(a: str, b: str) -> bool:
    norm = {"unix://var/run/docker.sock": LOCAL_SOCKET, "unix:///run/docker.sock": LOCAL_SOCKET}
    return norm.get(a.rstrip("/"), a.rstrip("/")) == norm.get(b.rstrip("/"), b.rstrip("/"))


def host_for_url(url: str | None, hosts: list[Host]) -> Host | None:
    """The hosts-file entry for the engine at ``url`` (None: the local socket), if one is listed."""
    target = url or os.environ.get("DOCKER_HOST") or LOCAL_SOCKET
    return next((h for h in hosts if _same_engine(h.url, target)), None)


def resolve_host(value: str, hosts: list[Host]) -> str:
    """A label from the hosts file, or an engine URL as it is."""
    for h in hosts:
        if h.label == value:
            return h.url
    if value.startswith(SCHEMES):
        return value
    known = ", ".join(h.label for h in hosts) or "none (no hosts file)"
    raise RebenchError(f"{value!r} is neither a host label nor an engine URL", fix=f"use ssh://user@host[:port] or one of: {known}")
