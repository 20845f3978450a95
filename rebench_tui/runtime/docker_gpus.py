"""The Docker runtime's GPUs (a mixin of it): how this engine's containers get them (toolkit,
devices or none, decided once per connection from a look at the host), which exist and which
are free (``nvidia-smi`` in a throwaway container with every GPU, less those running rebench
containers hold), and the container settings that give a new container free ones by id.
"""

from __future__ import annotations

from typing import Any, Callable

from ..errors import RuntimeUnavailable
from ..hosts import Host
from .base import LABEL_MANAGED, ProgressFn
from .gpu_host import HOST_ROOT, LOOK_SCRIPT, TOOLKIT_FIX, GpuSupport, HostView, decide, parse_look
from .gpus import QUERY, QUERY_DEVICES, Gpu, claims, parse_nvidia_smi, with_claims


class EngineGpus:
    """GPU inventory and device requests for a runtime with a ``client``, ``host_config`` and ``_probe``."""

    client: Any
    host: str
    host_config: Host | None
    _gpu_support: GpuSupport | None
    inventory_error: str | None
    _probe: Callable[..., str | None]
    image_tag: Callable[[str], str]
    has_nvidia_runtime: Callable[[], bool]

    def _look_at_host(self) -> HostView:
        """The host's NVIDIA device nodes, driver folder, ldconfig cache and tools, seen from a
        throwaway container with the host's / mounted read-only (the same on a remote engine)."""
        from docker.types import Mount

        cfg = self.host_config
        try:
            text = self._probe(["sh", "-c", LOOK_SCRIPT, "look", cfg.device_dir if cfg else "/dev", (cfg.driver_dir or "") if cfg else ""],
                               mounts=[Mount(target=HOST_ROOT, source="/", type="bind", read_only=True)])
        except Exception as exc:  # noqa: BLE001 - reported as what the look could not do
            return HostView(error=f"the look-around container failed: {exc}")
        if text is None:
            return HostView(error=f"the base image {self.image_tag('base')} is not built on this engine yet")
        return parse_look(text)

    def gpu_support(self) -> GpuSupport:
        """How this engine's containers get GPUs (toolkit, devices or none) and why; looked at
        once per connection."""
        if self._gpu_support is None:
            cfg = self.host_config
            configured = cfg.gpu_mode if cfg else "auto"
            has_runtime = self.has_nvidia_runtime()
            look = configured == "devices" or (configured == "auto" and not has_runtime)
            self._gpu_support = decide(configured, has_runtime, self._look_at_host() if look else None,
                                       driver_dir=cfg.driver_dir if cfg else None, device_dir=cfg.device_dir if cfg else "/dev",
                                       source=cfg.label if cfg else None)
        return self._gpu_support

    def _running_claims(self) -> dict[str, str]:
        running = self.client.containers.list(filters={"label": f"{LABEL_MANAGED}=1", "status": "running"})
        return claims(running)

    def gpu_inventory(self) -> list[Gpu]:
        """Every GPU containers can get on this engine, with which are free (see gpus.py); [] when
        containers get none, or the listing failed (``inventory_error`` says why)."""
        import docker.errors
        from docker.types import DeviceRequest

        sup = self.gpu_support()
        self.inventory_error = None
        if not sup.usable:
            return []
        try:
            if sup.mode == "toolkit":
                text = self._probe(QUERY, device_requests=[DeviceRequest(count=-1, capabilities=[["gpu"]])])
            else:
                dev = sup.devices
                assert dev is not None
                if not dev.has_smi:  # no nvidia-smi on the host: the device nodes are all there is to list
                    return with_claims([Gpu(m, f"nvidia{m}", "NVIDIA GPU (no nvidia-smi on the host)", 0, 0, minor=m)
                                        for m in dev.minors], self._running_claims())
                kw = dev.container_kwargs(dev.minors)
                text = self._probe(QUERY_DEVICES, devices=kw["devices"], mounts=kw["mounts"],
                                   environment={"LD_LIBRARY_PATH": kw["environment"]["LD_LIBRARY_PATH"]})
        except docker.errors.DockerException as exc:
            self.inventory_error = f"nvidia-smi in a container with every GPU failed: {exc}"
            return []
        if text is None:
            self.inventory_error = f"the base image {self.image_tag('base')} is not built on this engine yet"
            return []
        return with_claims(parse_nvidia_smi(text), self._running_claims())

    def _gpu_kwargs(self, count: int, image: str | None, progress: ProgressFn) -> dict[str, Any]:
        """The container settings that give it ``count`` free GPUs, by the host's mode. Free GPUs
        are chosen by id where the engine can list them, so the claim shows in the container (its
        device request or its device nodes) and the next session picks others."""
        from docker.types import DeviceRequest

        sup = self.gpu_support()
        if sup.mode == "none":
            raise RuntimeUnavailable(
                f"the profile needs {count} GPU(s), but the Docker engine at {self.host} gives containers none: {sup.why}",
                kept="nothing was started; the session folder is kept",
                fix=(sup.fix or TOOLKIT_FIX) + "; or start with `--profile smoke`, which needs no GPU")
        if sup.mode == "devices" and sup.problem:
            raise RuntimeUnavailable(f"the profile needs {count} GPU(s); {self.host} is set to give them as device nodes "
                                     f"({sup.why}), but {sup.problem}",
                                     kept="nothing was started; the session folder is kept",
                                     fix=(sup.fix or "") + "; `rebench-tui doctor ENV` shows what the host has")
        inventory = self.gpu_inventory()
        if not inventory and sup.mode == "toolkit":  # the engine decides which (a start without the toolkit fails)
            return {"device_requests": [DeviceRequest(count=count, capabilities=[["gpu"]])]}
        free = [g for g in inventory if g.free]
        if len(free) < count:
            busy = ", ".join(f"{g.index} ({g.busy_reason})" for g in inventory if not g.free)
            raise RuntimeUnavailable(f"the profile needs {count} free GPU(s); {self.host} has {len(free)} of {len(inventory)} free"
                                     + (f": {busy}" if busy else f" ({self.inventory_error})" if self.inventory_error else ""),
                                     kept="nothing was started; the session folder is kept",
                                     fix="wait for those sessions to finish, pick another host, or run `rebench-tui doctor ENV`"
                                         + (f"; to rehearse on the {len(free)} free, `start ENV --gpus {len(free)}` "
                                            "(recorded as a difference from the paper's setting)" if free else ""))
        chosen = free[:count]
        progress(f"GPUs ({sup.mode} mode) " + ", ".join(f"{g.index} ({g.name})" for g in chosen))
        if sup.mode == "toolkit":
            return {"device_requests": [DeviceRequest(device_ids=[g.uuid for g in chosen], capabilities=[["gpu"]])]}
        assert sup.devices is not None
        env = (self.client.images.get(image).attrs.get("Config") or {}).get("Env") or [] if image else []
        image_path = next((e.split("=", 1)[1] for e in env if e.startswith("PATH=")), None)
        return sup.devices.container_kwargs([g.node for g in chosen], image_path)
