"""The scoring room: a container of its own for each scoring.

Made on the session's engine (local or over SSH) from the session container's own image, with its
environment, CPU, memory, process and open-file limits, shared-memory size and GPUs (device
requests or device nodes and the driver's files, copied from the session container, so the room
gets exactly the session's GPUs) and the read-only assets; with no network unless the profile
says its scorer needs one (``scoring_network``); and, being a new container, its own PID and IPC
namespaces and a fresh ``/tmp`` and ``/dev/shm``. The participant's home is NOT mounted: the room
gets a copy of the attempt's snapshot, the scorer's tools and the protected data (the starting
solution, the held-out assets, the secrets) in one archive, and the profile's services are
started in it (a stand-in model on the room's own loopback). Where the environment names
``room_assets``, the room's ``~/assets`` holds those held-out files in place of the participant's
(the shared assets are mounted beside it and linked in), so what is scored ran on inputs the
participant never saw. No process of the participant's can
see, signal, trace or feed anything in it. It is removed when the scoring ends; its id and image
go into the record.

Rooms carry the labels ``rebench.room`` (the scoring's token) and ``rebench.room-of`` (the
session), never ``rebench.session``: a room is never taken for a session's container.
"""

from __future__ import annotations

import shlex
import tarfile
import tempfile
from typing import Any, Callable

from .base import ASSETS_DIR, SandboxSpec
from .docker_setup import HOME, PROTECTED, STATE_DIR, add_protected, add_tools, nvidia_linker_step, ownership_steps
from .gpus import NVIDIA_ROOT

LABEL_ROOM = "rebench.room"
LABEL_ROOM_OF = "rebench.room-of"
HOME_ARCNAME = "home/agent"
# Where a room whose ~/assets holds held-out files mounts the session's shared assets instead
ROOM_SHARED_ASSETS = "/opt/rebench/assets"


def _mounts(session: Any, home: str, moved: dict[str, str] | None = None) -> list[Any]:
    """The session container's mounts but its home: the assets (read-only) and GPU driver files;
    ``moved`` maps a destination to the one it gets in the room."""
    from docker.types import Mount

    out = []
    for m in (session.attrs or {}).get("Mounts") or []:
        dest = str(m.get("Destination") or "")
        if dest == home:
            continue
        dest = (moved or {}).get(dest, dest)
        kind = m.get("Type") or "bind"
        source = m.get("Name") if kind == "volume" else m.get("Source")
        if not source:
            continue
        out.append(Mount(target=dest, source=source, type=kind, read_only=not m.get("RW", False)))
    return out


def held_out_assets_step(room_assets: dict[str, str], env_id: str, home: str = HOME) -> str:
    """The room's setup step that builds ``~/assets`` (root's, read-only to everyone else) from
    links into the shared assets, with each name of ``room_assets`` a copy of its held-out file."""
    q = shlex.quote
    dest, shared, held = f"{home}/{ASSETS_DIR}", ROOM_SHARED_ASSETS, f"{PROTECTED}/{ASSETS_DIR}"
    steps = [f"mkdir -m 0755 {q(dest)}",
             f"for f in {q(shared)}/* {q(shared)}/.[!.]* {q(shared)}/..?*; do "
             f"{{ [ -e \"$f\" ] || [ -L \"$f\" ]; }} || continue; ln -s \"$f\" {q(dest)}/; done"]
    for name, source in sorted(room_assets.items()):
        src, to = f"{held}/{source}", f"{dest}/{name}"
        steps.append(f"{{ [ -f {q(src)} ] || {{ echo {q(f'the held-out file {source} is not in the protected assets: prepare the environment again (rebench-tui prepare {env_id})')} >&2; exit 1; }}; }}")
        steps.append(f"rm -f {q(to)} && cp {q(src)} {q(to)} && chown root:root {q(to)} && chmod 0444 {q(to)}")
    return " && ".join(steps)


def room_kwargs(session: Any, spec: SandboxSpec, token: str, home: str, network: bool) -> dict[str, Any]:
    """``containers.create`` arguments of the room of the scoring ``token`` of ``session``."""
    from docker.types import DeviceRequest, Ulimit

    attrs = session.attrs or {}
    host = attrs.get("HostConfig") or {}
    config = attrs.get("Config") or {}
    kwargs: dict[str, Any] = dict(
        image=attrs.get("Image") or config.get("Image"),
        command=["sleep", "infinity"],
        name=f"rebench-{spec.session_id}-room-{token[:12]}",
        hostname="rebench-scoring",
        labels={LABEL_ROOM: token, LABEL_ROOM_OF: spec.session_id},
        init=True,
        detach=True,
        user="root",
        working_dir=home,
        environment=list(config.get("Env") or []),
        mounts=_mounts(session, home, {f"{home}/{ASSETS_DIR}": ROOM_SHARED_ASSETS} if _room_assets(spec) else None),
        network_mode=(host.get("NetworkMode") or "bridge") if network else "none",
        shm_size=host.get("ShmSize") or None,
    )
    for key, arg in (("NanoCpus", "nano_cpus"), ("Memory", "mem_limit"), ("MemorySwap", "memswap_limit"),
                     ("PidsLimit", "pids_limit")):
        if host.get(key):
            kwargs[arg] = host[key]
    if host.get("Ulimits"):
        kwargs["ulimits"] = [Ulimit(name=u["Name"], soft=u["Soft"], hard=u["Hard"]) for u in host["Ulimits"]]
    if host.get("DeviceRequests"):
        kwargs["device_requests"] = [DeviceRequest(driver=d.get("Driver") or "", count=d.get("Count") or 0,
                                                   device_ids=d.get("DeviceIDs") or [],
                                                   capabilities=d.get("Capabilities") or [], options=d.get("Options") or {})
                                     for d in host["DeviceRequests"]]
    if host.get("Devices"):
        kwargs["devices"] = [f"{d['PathOnHost']}:{d['PathInContainer']}:{d.get('CgroupPermissions') or 'rwm'}"
                             for d in host["Devices"]]
    return {k: v for k, v in kwargs.items() if v is not None}


def _room_assets(spec: SandboxSpec) -> dict[str, str]:
    return dict(spec.env.manifest.score.room_assets)


def open_room(client: Any, session: Any, spec: SandboxSpec, token: str, home: str, network: bool,
              fill: Callable[[tarfile.TarFile], None], setup: list[str]) -> Any:
    """Create and start the room; ``fill`` adds the tools, protected data and the attempt to one
    archive put at ``/``; ``setup`` is run as root after it. Removed again if any step fails."""
    room = client.containers.create(**room_kwargs(session, spec, token, home, network))
    try:
        room.start()
        with tempfile.TemporaryFile() as tmp:
            with tarfile.open(fileobj=tmp, mode="w") as tar:
                fill(tar)
            tmp.seek(0)
            room.put_archive("/", tmp)
        if setup:
            rc, out = room.exec_run(["sh", "-c", " && ".join(f"{{ {s}; }}" for s in setup)], user="root")
            if rc != 0:
                raise RuntimeError(f"preparing the scoring room failed: {out.decode(errors='replace')[-500:]}")
    except BaseException:
        remove_room(room)
        raise
    return room


def remove_room(room: Any) -> None:
    try:
        room.remove(force=True)
    except Exception:  # noqa: BLE001 - gone already, or the engine is: found and removed on the next open
        pass


def find_rooms(client: Any, session_id: str | None = None, token: str | None = None) -> list[Any]:
    label = f"{LABEL_ROOM}={token}" if token else (f"{LABEL_ROOM_OF}={session_id}" if session_id else LABEL_ROOM)
    # ignore_removed: a room removed between the listing and its inspection (its scoring just ended)
    return client.containers.list(all=True, filters={"label": label}, ignore_removed=True)


class RoomsOfSandbox:
    """A Docker sandbox's side of its scoring rooms (a mixin): the home's archive, opening, finding
    and removing the rooms of its session."""

    runtime: Any
    container: Any
    _container: Any
    spec: SandboxSpec
    room_of: str | None

    def home_archive(self) -> tuple[Any, str]:
        """The home as the engine's tar stream (read as root, links not followed) and the
        members' prefix; the container may be frozen."""
        stream, _stat = self.container.get_archive(HOME)
        return stream, HOME.rsplit("/", 1)[-1]

    def open_room(self, token: str, fill_home: Callable[[Any, str], None], network: bool) -> "RoomsOfSandbox":
        """A scoring room for the exec ``token`` (see docker_room.py): the session's image,
        limits and GPUs, the protected data, and the home ``fill_home(tar, arcname)`` writes."""
        spec = self.spec

        def fill(tar: tarfile.TarFile) -> None:
            add_tools(tar)
            add_protected(tar, spec, lambda _m: None)
            fill_home(tar, HOME_ARCNAME)

        steps = ["[ -d /tmp ] || { mkdir -p /tmp && chmod 1777 /tmp; }", f"mkdir -p {STATE_DIR} && chmod 700 {STATE_DIR}",
                 *ownership_steps(spec, home=False)]
        if _room_assets(spec):
            steps.append(held_out_assets_step(_room_assets(spec), spec.env.id))
        if any(str(m.get("Destination", "")).startswith(NVIDIA_ROOT) for m in (self.container.attrs or {}).get("Mounts") or []):
            steps.append(nvidia_linker_step())
        room = open_room(self.runtime.client, self.container, spec, token, HOME, network, fill, steps)
        sandbox = type(self)(self.runtime, room, spec)
        sandbox.room_of = spec.session_id
        try:
            self.runtime._start_services(room, spec)
        except BaseException:
            remove_room(room)
            raise
        return sandbox

    def describe_room(self) -> dict[str, Any]:
        attrs = self._container.attrs or {}
        out = {"kind": "docker", "isolated": True, "container": self._container.id[:12], "image": attrs.get("Image"),
               "network": ((attrs.get("HostConfig") or {}).get("NetworkMode") or "default")}
        if _room_assets(self.spec):  # which of ~/assets the scorer's run saw in place of the participant's
            out["held_out_assets"] = sorted(_room_assets(self.spec))
        return out

    def close_room(self) -> None:
        """Remove this scoring room (its container, with every process in it)."""
        remove_room(self._container)

    def remove_rooms(self, token: str | None = None) -> int:
        """Remove the session's rooms (of one scoring, with ``token``); how many there were."""
        found = find_rooms(self.runtime.client, self.spec.session_id, token)
        for room in found:
            remove_room(room)
        return len(found)

    def _room_for(self, token: str) -> "RoomsOfSandbox | None":
        found = find_rooms(self.runtime.client, token=token)
        if not found:
            return None
        room = type(self)(self.runtime, found[0], self.spec)
        room.room_of = self.spec.session_id
        return room
