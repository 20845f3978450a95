"""Settings: typed, with ``REBENCH_*`` environment overrides.

Every ``REBENCH_*`` variable the workstation reads is a field here (``REBENCH_<FIELD>``, read by
pydantic-settings when a ``Settings`` is made); nothing else in the package reads one. (The
scorer helpers in ``runtime/lib`` and ``runtime/supervise.py`` run inside containers without this
package, so they read the variables the runtime gives them themselves.)

The project root (which holds ``environments/``, ``images/`` and ``sessions/``) is found from
``REBENCH_ROOT``, else the current folder or one above it, else the checkout this package is in.
"""

from __future__ import annotations

import os
from functools import cached_property
from pathlib import Path

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

PACKAGE_ROOT = Path(__file__).resolve().parent.parent


def _find_root() -> Path:
    here = Path.cwd().resolve()
    for folder in (here, *here.parents):
        if (folder / "environments").is_dir() and (folder / "images" / "images.toml").is_file():
            return folder
    return PACKAGE_ROOT


def _xdg(var: str, fallback: str) -> Path:
    return Path(os.environ.get(var) or Path.home() / fallback)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="REBENCH_", extra="ignore", env_ignore_empty=True)  # empty = unset

    root: Path = Field(default_factory=_find_root)
    environments_dir: Path | None = None
    images_dir: Path | None = None
    sessions_dir: Path | None = None
    cache_dir: Path = Field(default_factory=lambda: _xdg("XDG_CACHE_HOME", ".cache") / "rebench-tui")
    config_dir: Path = Field(default_factory=lambda: _xdg("XDG_CONFIG_HOME", ".config") / "rebench-tui")
    docker_host: str | None = None
    secrets_file: Path | None = None  # default: <config_dir>/secrets.env
    hosts_file: Path | None = None  # default: <config_dir>/hosts.toml
    study_token: str | None = None  # a study participant's (or researcher's) collector token
    study_token_file: Path | None = None  # default: <config_dir>/study-token
    study_ca: Path | None = None  # the certificate (or CA) a collector's HTTPS is checked against
    # Hidden scores sealed to a researcher's key (trajectory.sealing): seal_to is the public key (or
    # a file holding it) new sessions of hidden environments seal to; researcher_key the private
    # key's file, which opens them where records are read back (export, compare).
    seal_to: str | None = None
    researcher_key: Path | None = None
    agent_runs: str | None = None  # agent runs the screen's compare key shows beside the sessions
    # Threads of the numeric libraries in every container (default: the profile's CPUs); fewer on a
    # machine shared with other work, where threads beyond the cores spin and waste them.
    container_threads: int | None = Field(default=None, ge=1)

    # Absolute, whatever was given (a relative --sessions-dir once gave the local runtime's scorer
    # paths that meant nothing in the folder it runs in: every scoring NaN).
    @cached_property
    def environments(self) -> Path:
        return (self.environments_dir or self.root / "environments").absolute()

    @cached_property
    def images(self) -> Path:
        return (self.images_dir or self.root / "images").absolute()

    @cached_property
    def sessions(self) -> Path:
        return (self.sessions_dir or self.root / "sessions").absolute()

    @property
    def keymap_file(self) -> Path:
        return self.config_dir / "keymap.toml"

    @property
    def secrets_path(self) -> Path:
        return self.secrets_file or self.config_dir / "secrets.env"

    @property
    def hosts_path(self) -> Path:
        return self.hosts_file or self.config_dir / "hosts.toml"
