"""`rebench-tui doctor`: is this machine (or that host) ready to run an environment?

Each check gives ``ok``, ``warn`` (works, but not as the environment was measured), ``fail``
(``start`` would refuse or the attempt would not count) or ``skip`` (an earlier failure makes
it meaningless), with the exact fix. The checks only read: nothing is built, pulled or prepared.
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass
from functools import cached_property
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Callable, Literal
from urllib.parse import urlsplit

from .assets import AssetStatus, AssetStore, prepare_command
from .catalog import Environment, Profile
from .config import Settings
from .errors import RebenchError
from .runtime.images import Recipes

if TYPE_CHECKING:
    from .runtime.docker_runtime import DockerRuntime

Status = Literal["ok", "warn", "fail", "skip"]
MIN_API = (1, 41)                 # Docker 20.10: device requests, `docker system dial-stdio` over SSH
DISK_MARGIN = 10 * 1024**3        # room for the environment's image layers and the workspace
SKEW_WARN_S = 1.0
SKEW_FAIL_S = 30.0
GIB = 1024**3


@dataclass(frozen=True)
class Finding:
    check: str
    status: Status
    detail: str
    fix: str | None = None


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(p) for p in text.split(".") if p.isdigit())


def _parse_engine_time(text: str) -> datetime:
    """Docker's SystemTime: RFC 3339 with up to nanoseconds and a zone."""
    main, _, rest = text.partition(".")
    frac, zone = "", "+00:00"
    if rest:
        digits = rest[:len(rest) - len(rest.lstrip("0123456789"))]
        frac = "." + digits[:6]
        tail = rest[len(digits):]
        zone = "+00:00" if tail in ("", "Z") else tail
    elif main.endswith("Z"):
        main = main[:-1]
    return datetime.fromisoformat(main + frac + zone)


def ssh_findings(host: str, home: Path | None = None) -> list[Finding]:
    """known_hosts entry and a usable key for an ``ssh://`` engine (what paramiko will need)."""
    import paramiko

    u = urlsplit(host)
    name, port = u.hostname or "", u.port or 22
    user = u.username or os.environ.get("USER", "root")
    ssh_dir = (home or Path.home()) / ".ssh"
    out: list[Finding] = []
    known = ssh_dir / "known_hosts"
    lookup = name if port == 22 else f"[{name}]:{port}"
    keys = paramiko.HostKeys()
    if known.is_file():
        try:
            keys.load(str(known))
        except Exception as exc:  # noqa: BLE001 - a damaged file is reported, not raised
            out.append(Finding("ssh known_hosts", "fail", f"{known} could not be read: {exc}", f"fix or remove the bad line in {known}"))
            keys = paramiko.HostKeys()
    if keys.lookup(lookup):
        out.append(Finding("ssh known_hosts", "ok", f"{lookup} is in {known}"))
    elif not out:
        out.append(Finding("ssh known_hosts", "fail", f"{lookup} is not in {known}: the host key cannot be checked",
                           f"check the host's fingerprint, then `ssh-keyscan -p {port} {name} >> {known}` "
                           f"(or connect once with `ssh -p {port} {user}@{name}`)"))
    files = sorted(p for p in ssh_dir.glob("id_*") if p.suffix != ".pub") if ssh_dir.is_dir() else []
    agent_keys = 0
    if os.environ.get("SSH_AUTH_SOCK"):
        try:
            agent_keys = len(paramiko.Agent().get_keys())
        except Exception:  # noqa: BLE001 - an unreachable agent counts as none
            agent_keys = 0
    if files or agent_keys:
        what = ", ".join(p.name for p in files) + (f"{', ' if files else ''}{agent_keys} in ssh-agent" if agent_keys else "")
        out.append(Finding("ssh key", "ok", what))
    else:
        out.append(Finding("ssh key", "fail", f"no private key in {ssh_dir} and no ssh-agent keys",
                           f"`ssh-keygen -t ed25519` then `ssh-copy-id -p {port} {user}@{name}`"))
    return out


class Doctor:
    """Runs the checks for one environment profile (or just the engine) against one engine."""

    def __init__(self, settings: Settings, env: Environment | None = None, profile: str | None = None,
                 host: str | None = None, connect: Callable[[str | None], DockerRuntime] | None = None) -> None:
        self.settings = settings
        self.env = env
        self.profile: Profile | None = env.profile(profile or env.profile_names[0]) if env is not None else None
        self.host = host or settings.docker_host
        self._connect = connect
        self.findings: list[Finding] = []

    def add(self, check: str, status: Status, detail: str, fix: str | None = None) -> None:
        self.findings.append(Finding(check, status, detail, fix))

    @property
    def failed(self) -> bool:
        return any(f.status == "fail" for f in self.findings)

    def run(self) -> list[Finding]:
        if self.host and self.host.startswith("ssh://"):
            self.findings += ssh_findings(self.host)
        runtime = self._engine()
        if runtime is not None:
            self._api(runtime)
            self._gpus(runtime)
            self._cpu_memory(runtime)
            self._image(runtime)
            self._disk(runtime)
            self._clock(runtime)
        else:
            for check in ("API version", "GPU mode", "GPUs", "CPUs and memory", "base image", "disk", "clock skew"):
                self.add(check, "skip", "no engine")
        if self.env is not None:
            self._assets()
        return self.findings

    # -- the checks -------------------------------------------------------------------------
    def _engine(self) -> DockerRuntime | None:
        from .workstation import connect_docker

        try:
            rt = (self._connect or (lambda h: connect_docker(self.settings, h, timeout=20)))(self.host)
        except RebenchError as exc:
            self.add("engine", "fail", exc.what, exc.fix)
            return None
        self.add("engine", "ok", f"Docker engine answers at {rt.host}")
        return rt

    def _api(self, rt: DockerRuntime) -> None:
        v = rt.client.version()
        api = v.get("ApiVersion", "?")
        if _version_tuple(api) >= MIN_API:
            self.add("API version", "ok", f"engine {v.get('Version', '?')}, API {api} (needs {'.'.join(map(str, MIN_API))})")
        else:
            self.add("API version", "fail", f"engine {v.get('Version', '?')} speaks API {api}; rebench-tui needs {'.'.join(map(str, MIN_API))}",
                     "upgrade Docker on the host to 20.10 or newer")

    def _gpus(self, rt: DockerRuntime) -> None:
        """Which GPU mode the host will use and why (toolkit, devices, none), then its GPUs."""
        need = self.profile.gpus if self.profile else 0
        name = self.profile.name if self.profile else None
        sup = rt.gpu_support()
        not_needed = f" (not needed for the {name} profile)" if name and not need else ""
        if sup.usable:
            self.add("GPU mode", "ok", f"{sup.mode}: {sup.why}")
        elif sup.problem:
            self.add("GPU mode", "fail" if need else "warn", f"{sup.mode}, but it cannot work: {sup.problem} ({sup.why}){not_needed}", sup.fix)
        else:
            self.add("GPU mode", "fail" if need else "warn", f"none: containers get no GPUs: {sup.why}{not_needed}", sup.fix)
        gpus = rt.gpu_inventory() if sup.usable else []
        if not gpus:
            status = "fail" if need else ("warn" if self.profile is None else "ok")
            listing = f" ({rt.inventory_error})" if sup.usable and rt.inventory_error else ""
            self.add("GPUs", status, (f"no GPU visible to containers{listing}; the {name} profile needs {need}" if self.profile
                                      else f"no GPU visible to containers{listing}"),
                     (f"run on a GPU host (`--host ssh://user@gpu-host`), or use `--profile smoke`" if need else None))
            return
        self._anchors_gpu([g.name for g in gpus])
        free = [g for g in gpus if g.free]
        desc = ", ".join(f"{g.index}: {g.name} {g.memory_total / GIB:.0f} GiB ({'free' if g.free else g.busy_reason})" for g in gpus)
        if len(free) >= need:
            self.add("GPUs", "ok", f"{len(free)} of {len(gpus)} free ({desc}); needs {need}")
        else:
            self.add("GPUs", "fail", f"{len(free)} of {len(gpus)} free ({desc}); the {name} profile needs {need}",
                     "wait for other sessions to finish (`rebench-tui sessions --status active`), or use another host"
                     + (f"; or rehearse on {len(free)} with `rebench-tui start {self.env.id} --gpus {len(free)}` "
                        "(recorded as a difference from the paper's setting)" if free and self.env else ""))

    def _anchors_gpu(self, names: list[str]) -> None:
        """Whether this host's GPUs are the model the profile's anchors were measured on."""
        if self.env is None or self.profile is None or not self.profile.gpus:
            return
        from .catalog.anchors import AnchorsError, anchors_gpu, anchors_in_effect, gpu_differs

        try:
            anchors = anchors_in_effect(self.env, self.profile.name, self.settings.config_dir)
        except AnchorsError as exc:
            self.add("anchors' GPU", "warn", exc.what, exc.fix)
            return
        line = gpu_differs(anchors, names, self.env.id, self.profile.name)
        if line is None:
            under = anchors_gpu(anchors)
            self.add("anchors' GPU", "ok", f"anchors measured on {under}, the model of this host's GPUs" if under
                     else "the anchors name no GPU model to check against")
        else:
            self.add("anchors' GPU", "warn", line.split(". `")[0],
                     f"rebench-tui calibrate {self.env.id} --profile {self.profile.name}")

    def _cpu_memory(self, rt: DockerRuntime) -> None:
        info = rt.client.info() or {}
        ncpu, mem = int(info.get("NCPU") or 0), int(info.get("MemTotal") or 0)
        detail = f"{ncpu} CPUs, {mem / GIB:.1f} GiB"
        short = []
        if self.profile and self.profile.cpus and ncpu < self.profile.cpus:
            short.append(f"{self.profile.cpus:g} CPUs")
        if self.profile and self.profile.memory and mem < self.profile.memory:
            short.append(f"{self.profile.memory / GIB:.0f} GiB")
        if short:
            self.add("CPUs and memory", "warn", f"{detail}; the {self.profile.name} profile was measured with {' and '.join(short)} "
                     "(the container gets what there is)", "use a larger host for scores comparable with the measured ones")
        else:
            self.add("CPUs and memory", "ok", detail)

    def _image(self, rt: DockerRuntime) -> None:
        name = self.profile.base_image if self.profile else "base"
        recipe = Recipes.load(self.settings.images).images.get(name)
        if recipe is None:
            self.add("base image", "fail", f"no recipe {name!r} in {self.settings.images / 'images.toml'}", "correct the manifest's base_image")
            return
        provided = rt.provided_images.get(name)
        if provided:
            if rt.has_image(provided):
                self.add("base image", "ok", f"{provided} (provided by the host in hosts.toml for {name}) is on the engine")
            else:
                self.add("base image", "fail", f"hosts.toml says the host provides {name} as {provided}, but the engine has no such image",
                         f"build or load {provided} there, or remove {name} from the host's images in hosts.toml")
        elif rt.has_image(recipe.tag):
            self.add("base image", "ok", f"{recipe.tag} is built on the engine")
        else:
            self.add("base image", "warn", f"{recipe.tag} is not built yet; `start` builds it first (minutes)",
                     f"`rebench-tui images build {name}`" + (f" --host {self.host}" if self.host else ""))

    def _disk(self, rt: DockerRuntime) -> None:
        need = DISK_MARGIN + self._asset_bytes()
        free = rt.engine_free_bytes()
        if free is None:
            self.add("disk", "warn", "could not measure free space on the engine's disk", "check `df -h /var/lib/docker` on the host")
        elif free >= need:
            self.add("disk", "ok", f"{free / GIB:.1f} GiB free on the engine's disk (needs about {need / GIB:.1f})")
        else:
            self.add("disk", "fail", f"{free / GIB:.1f} GiB free on the engine's disk; about {need / GIB:.1f} GiB needed",
                     "free space on the host (`docker image prune`, old session containers: `docker ps -a --filter label=rebench.managed=1`)")
        cache = self.settings.cache_dir
        probe = next((p for p in (cache, *cache.parents) if p.exists()), Path("/"))
        local_free = shutil.disk_usage(probe).free
        if self.env is not None and not self._asset_ready() and local_free < DISK_MARGIN:
            self.add("disk (asset cache)", "fail", f"{local_free / GIB:.1f} GiB free under {probe}", "set XDG_CACHE_HOME to a larger disk")

    def _clock(self, rt: DockerRuntime) -> None:
        before = time.time()
        info = rt.client.info() or {}
        after = time.time()
        raw = info.get("SystemTime")
        if not raw:
            self.add("clock skew", "warn", "the engine does not report its time")
            return
        try:
            engine = _parse_engine_time(raw).timestamp()
        except ValueError:
            self.add("clock skew", "warn", f"cannot read the engine's time {raw!r}")
            return
        skew = engine - (before + after) / 2
        rtt = after - before
        detail = f"engine clock {skew:+.3f} s from this machine's (round trip {rtt * 1000:.0f} ms)"
        fix = "enable NTP on both machines (`timedatectl set-ntp true`)"
        if abs(skew) <= SKEW_WARN_S + rtt:
            self.add("clock skew", "ok", detail)
        else:
            self.add("clock skew", "fail" if abs(skew) > SKEW_FAIL_S else "warn",
                     detail + "; working time is kept on this machine, but the host's file and command times will disagree", fix)

    @cached_property
    def _asset_status(self) -> AssetStatus | None:
        """The profile's prepared assets (checked once: it stats every file); None when it needs none."""
        if self.env is None or self.profile is None or self.env.manifest.assets is None:
            return None
        return AssetStore(self.settings.cache_dir).status(self.env, self.profile.name)

    def _asset_ready(self) -> bool:
        return self._asset_status is None or self._asset_status.ready

    def _asset_bytes(self) -> int:
        st = self._asset_status
        return 0 if st is None else sum(int(f.get("size", 0)) for f in (st.manifest or {}).get("files", {}).values())

    def _assets(self) -> None:
        assert self.env is not None and self.profile is not None
        st = self._asset_status
        if st is None:
            self.add("assets", "ok", "the environment needs no prepared assets")
            return
        if st.ready:
            self.add("assets", "ok", f"{self.profile.name} assets prepared ({st.mode}) in {st.folder}")
        else:
            self.add("assets", "fail", f"{self.profile.name} assets: {st.reason}", f"`{prepare_command(self.env, self.profile.name)}`")
