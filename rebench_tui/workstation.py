"""Wiring: settings -> catalog, runtime, store; the choices `start` makes when not told.

The CLI and the tests build everything through these functions, so both run the same path.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Literal

from .catalog import Catalog, Environment, load_catalog
from .config import Settings
from .errors import RebenchError, RuntimeUnavailable
from .hosts import host_for_url, load_hosts, resolve_host
from .runtime import Runtime
from .runtime.images import Recipes
from .trajectory.records import AUDIT, META, SessionMeta

if TYPE_CHECKING:
    from .runtime.docker_runtime import DockerRuntime

RuntimeChoice = Literal["auto", "docker", "local"]


def catalog(settings: Settings) -> Catalog:
    known = Recipes.load(settings.images).names
    return load_catalog(settings.environments, known)


def connect_docker(settings: Settings, host: str | None = None, timeout: int = 60) -> DockerRuntime:
    """The Docker engine at ``host`` (default: settings, DOCKER_HOST, the local socket), with its
    hosts-file entry (GPU mode, provided images) where one lists that engine."""
    from .runtime.docker_runtime import DockerRuntime

    url = host or settings.docker_host
    config = host_for_url(url, load_hosts(settings.hosts_path))
    return DockerRuntime.connect(url, settings.images, settings.cache_dir, timeout=timeout, host_config=config,
                                 threads=settings.container_threads)


def local_runtime() -> Runtime:
    from .runtime.local import LocalRuntime

    return LocalRuntime()


@dataclass(frozen=True)
class Choice:
    runtime: Runtime
    profile: str
    reasons: list[str]

    @property
    def embedded_default(self) -> bool:
        return self.runtime.kind == "local" or self.profile == "smoke"


def host_fit(rt: Runtime, gpus: int, inventory: list | None = None) -> str | None:
    """Why this engine cannot take a session needing ``gpus`` GPUs now, or None if it can.
    ``inventory``: the engine's GPUs if the caller listed them already (each listing runs a container)."""
    if gpus == 0:
        return None
    support = rt.gpu_support()
    if not support.usable:
        return support.summary
    if inventory is None:
        inventory = rt.gpu_inventory()
    free = [g for g in inventory if g.free]
    if len(free) < gpus:
        return f"{len(free)} of {len(inventory)} GPUs free, needs {gpus}"
    return None


def gpus_needed(env: Environment, profile: str, gpus: int | None = None) -> int:
    """GPUs a session of ``profile`` takes: its own count, or fewer where ``gpus`` says (a rehearsal)."""
    own = env.profile(profile).gpus
    return own if gpus is None or own == 0 else min(gpus, own)


def pick_host(env: Environment, settings: Settings, profile: str | None, say: Callable[[str], None],
              gpus_wanted: int | None = None) -> tuple[Runtime | None, list[str]]:
    """The first host in the hosts file whose engine answers and has the GPUs the profile needs
    (or ``gpus_wanted``, fewer) free; (None, why-not for each) when none fits or there is no hosts file."""
    hosts = load_hosts(settings.hosts_path)
    wanted = profile or ("gpu" if "gpu" in env.profile_names else env.profile_names[0])
    gpus = gpus_needed(env, wanted, gpus_wanted)
    why: list[str] = []
    for h in hosts:
        say(f"checking host {h.label} ({h.url})")
        try:
            rt = connect_docker(settings, h.url)
        except RebenchError as exc:
            why.append(f"{h.label}: engine does not answer ({exc.what.splitlines()[0]})")
            continue
        reason = host_fit(rt, gpus)
        if reason is None:
            say(f"using host {h.label}")
            return rt, why
        why.append(f"{h.label}: {reason}")
    return None, why


def choose(env: Environment, settings: Settings, *, runtime: RuntimeChoice = "auto", profile: str | None = None,
           host: str | None = None, say: Callable[[str], None] = lambda _m: None, gpus: int | None = None) -> Choice:
    """Pick the runtime and profile: the gpu profile in Docker where the engine can give GPUs,
    else the smoke profile (CPU), in Docker where an engine answers, else locally (not isolated).
    ``host`` is a label from the hosts file or an engine URL; without it, the hosts file's first
    host that fits is used, then the local engine. ``gpus``: fewer GPUs than the profile asks for
    (``start --gpus N``, a rehearsal)."""
    reasons: list[str] = []
    rt: Runtime | None = None
    if host is not None:
        host = resolve_host(host, load_hosts(settings.hosts_path))
    elif runtime in ("auto", "docker") and settings.docker_host is None:
        rt, why = pick_host(env, settings, profile, say, gpus)
        if rt is None and why:
            if profile == "gpu":
                raise RuntimeUnavailable("no host in the hosts file can take the gpu profile now: " + "; ".join(why),
                                         kept="nothing was started", fix="run `rebench-tui doctor ENV --host LABEL` for each, or wait for GPUs to be free")
            reasons.append("no listed host fits (" + "; ".join(why) + "): trying the local engine")
    if rt is None and runtime in ("auto", "docker"):
        try:
            rt = connect_docker(settings, host)
        except RuntimeUnavailable as exc:
            if runtime == "docker":
                raise
            reasons.append(f"no Docker engine ({exc.what.splitlines()[0]}): using the local runtime, NOT ISOLATED")
    if rt is None:
        rt = local_runtime()
    if profile is None:
        wants_gpu = "gpu" in env.profile_names and env.profile("gpu").gpus > 0
        support = rt.gpu_support() if wants_gpu else None
        if "gpu" in env.profile_names and (not wants_gpu or (support is not None and support.usable)):
            profile = "gpu"
        elif "smoke" in env.profile_names:
            profile = "smoke"
            if wants_gpu and support is not None:
                reasons.append(f"{rt.host} gives containers no GPUs ({support.summary}): "
                               "using the smoke profile (CPU, small sizes)")
        else:
            profile = env.profile_names[0]
    elif profile not in env.profile_names:
        raise RebenchError(f"environment {env.id!r} has no profile {profile!r}", fix=f"use one of {env.profile_names}")
    else:
        _refuse_gpus_not_given(env, profile, rt)
    for r in reasons:
        say(r)
    return Choice(rt, profile, reasons)


def _refuse_gpus_not_given(env: Environment, profile: str, rt: Runtime) -> None:
    """A profile that needs GPUs, asked for by name, on a Docker engine that gives containers none:
    refused here, before any image is built or asset fetched (the local runtime runs on the host's
    own GPUs, if any, and is not checked)."""
    need = env.profile(profile).gpus
    if need <= 0 or rt.kind != "docker":
        return
    support = rt.gpu_support()
    if not support.usable:
        raise RuntimeUnavailable(
            f"the {profile} profile of {env.id} needs {need} GPU(s), and the engine at {rt.host} gives containers none: {support.summary}",
            kept="nothing was started: no image built, nothing downloaded, no session folder made",
            fix=f"`rebench-tui doctor {env.id} --profile {profile}` says what is missing; or start without --profile "
                "to get the smoke profile (CPU, small sizes)")


def runtime_for(meta: SessionMeta, settings: Settings) -> Runtime:
    if meta.runtime == "docker":
        return connect_docker(settings, None if meta.host == "local" else meta.host)
    return local_runtime()


def find_session(sessions_dir: Path, session_id: str | None) -> Path:
    """A session folder by id (or unique prefix), or by its folder's path (``sessions/<id>``, as
    ``compare`` takes it, anywhere on disk); without either, the most recent unfinished one."""
    if session_id:
        given = Path(session_id).expanduser()
        if (given / META).is_file() or (given / AUDIT).is_file():
            return given.resolve()
        if len(given.parts) > 1:  # a path that is not a session: its last part may still be an id in the sessions folder
            session_id = given.name
    if not sessions_dir.is_dir():
        raise RebenchError(f"no sessions folder at {sessions_dir}", fix="start a session first, or pass --sessions-dir")
    # a folder whose session.json was lost is still a session (its audit log): named, it gets repair's hint
    folders = [p for p in sessions_dir.iterdir() if (p / META).is_file() or (p / AUDIT).is_file()]
    if session_id:
        exact = [p for p in folders if p.name == session_id]
        match = exact or [p for p in folders if p.name.startswith(session_id)]
        if len(match) == 1:
            return match[0]
        if not match:
            not_one = f"; {given} is a folder without a session.json or an audit log" if given.is_dir() else ""
            raise RebenchError(f"no session {session_id!r} in {sessions_dir}{not_one}",
                               fix="name a session id or a session's folder (sessions/<id>); `rebench-tui sessions` lists them")
        raise RebenchError(f"{session_id!r} matches {len(match)} sessions: {', '.join(p.name for p in match[:5])}",
                           fix="give more of the id")
    metas = []
    for p in folders:
        try:
            m = SessionMeta.load(p / META)
        except Exception:  # noqa: BLE001 - a broken folder is skipped here; `sessions` reports it
            continue
        if m.status == "active":
            metas.append((m.created_at, p))
    if not metas:
        raise RebenchError(f"no unfinished session in {sessions_dir}", fix="`rebench-tui sessions` lists them; start one with `rebench-tui start ENV`")
    return max(metas)[1]


def resolve_secrets(env: Environment, profile: str, settings: Settings, *, required: bool = True) -> dict[str, str]:
    """The profile's secrets from the environment or the secrets file; raises naming what is missing."""
    from . import secrets

    return secrets.resolve(list(env.profile(profile).secrets), settings.secrets_path, required=required,
                           env_id=env.id, profile=profile)
