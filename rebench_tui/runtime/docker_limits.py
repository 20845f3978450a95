"""What ``containers.create`` is given for a session (a mixin of the Docker runtime): the image,
the home and assets mounts (bind mounts locally, volumes on a remote engine), the environment,
the profile's CPU, memory, process and open-file limits, the numeric libraries' thread counts,
and the GPUs (docker_gpus.py).
"""

from __future__ import annotations

from typing import Any, Callable

from ..catalog import Profile
from .base import ASSETS_DIR, ProgressFn, SandboxSpec
from .docker_setup import HOME, PROTECTED
from .remote import ensure_assets_volume, ensure_home_volume

# The variables numeric libraries read for their thread count (OpenMP: PyTorch's CPU kernels; the BLAS).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class ContainerSettings:
    """Container settings for a runtime with a ``client``, ``remote``, ``threads`` and ``engine_cpus``."""

    client: Any
    remote: bool
    threads: int | None
    engine_cpus: Callable[[], int]
    _gpu_kwargs: Callable[[int, str | None, ProgressFn], dict[str, Any]]

    def _container_kwargs(self, spec: SandboxSpec, image: str | None, progress: ProgressFn) -> dict[str, Any]:
        """Everything ``containers.create`` is given: image, mounts, environment, limits, GPUs."""
        prof = spec.profile
        environment = {**prof.env, **spec.extra_env, "REBENCH_HOME": HOME, "REBENCH_PROTECTED": PROTECTED,
                       "REBENCH_PROFILE": prof.name, "REBENCH_ISOLATED": "1",
                       "REBENCH_SCORER_LIB": "/opt/rebench/lib"}
        kwargs: dict[str, Any] = dict(
            image=image,
            command=["sleep", "infinity"],
            name=f"rebench-{spec.session_id}",
            hostname=f"rebench-{spec.env.id.replace('_', '-')}",
            labels=spec.labels,
            init=True,
            detach=True,
            user="root",
            working_dir=HOME,
            environment=environment,
            volumes=self._volumes(spec, image, progress),
            shm_size="1g",
        )
        kwargs.update(self._limits(prof, progress))
        for name, value in self._thread_env(prof).items():
            environment.setdefault(name, value)  # a profile's own setting wins
        if prof.gpus:
            gpu = self._gpu_kwargs(prof.gpus, image, progress)
            kwargs["environment"].update(gpu.pop("environment", {}))
            kwargs.update(gpu)
        return kwargs

    def _volumes(self, spec: SandboxSpec, image: str | None, progress: ProgressFn) -> dict[str, dict[str, str]]:
        """The home (and the assets, read-only, where there are any): bind mounts of this machine's
        folders on a local engine, volumes on a remote one."""
        has_assets = spec.assets is not None and (spec.assets / "workspace").is_dir()
        if self.remote:
            volumes = {ensure_home_volume(self.client, spec.session_id, spec.labels): {"bind": HOME, "mode": "rw"}}
            if has_assets:
                volumes[ensure_assets_volume(self.client, image, spec.assets, progress)] = {
                    "bind": f"{HOME}/{ASSETS_DIR}", "mode": "ro"}
            return volumes
        volumes = {str(spec.workspace.resolve()): {"bind": HOME, "mode": "rw"}}
        if has_assets:
            volumes[str((spec.assets / "workspace").resolve())] = {"bind": f"{HOME}/{ASSETS_DIR}", "mode": "ro"}
        return volumes

    def _thread_env(self, prof: Profile) -> dict[str, str]:
        """How many threads PyTorch, NumPy and their BLAS start in the container. They count the
        host's cores, not the container's CPU quota: a profile given 2 CPUs on a 64-core host would
        run 64 threads on 2 CPUs' time, and their spinning at every barrier wastes most of it. So the
        count is the profile's CPUs (as limited to this engine), or the runtime's ``threads`` (for a
        machine shared with other work: ``REBENCH_CONTAINER_THREADS``); a profile with no CPU limit
        leaves the libraries' own choice. The participant can still set other values in the shell."""
        n = self.threads
        if n is None and prof.cpus:
            n = max(1, int(min(prof.cpus, self.engine_cpus())))
        if n is None:
            return {}
        return {name: str(n) for name in THREAD_VARIABLES}

    def _limits(self, prof: Profile, progress: ProgressFn) -> dict[str, Any]:
        """The profile's CPU, memory, process and open-file limits, as container settings."""
        from docker.types import Ulimit

        kwargs: dict[str, Any] = {}
        if prof.cpus:
            ncpu = self.engine_cpus()
            cpus = min(prof.cpus, ncpu)
            if cpus < prof.cpus:
                progress(f"the profile asks for {prof.cpus:g} CPUs; this engine has {ncpu}: limiting to {cpus:g}")
            kwargs["nano_cpus"] = int(cpus * 1e9)
        if prof.memory:
            kwargs["mem_limit"] = prof.memory
            kwargs["memswap_limit"] = prof.memory  # no swap beyond the limit: a runaway job ends, not the host's disk
        # Processes: a fork bomb stops at the limit, inside the container (the app and the scorer's
        # supervisor live elsewhere or already run). Open files: per process.
        kwargs["pids_limit"] = prof.pids
        kwargs["ulimits"] = [Ulimit(name="nofile", soft=prof.open_files, hard=prof.open_files)]
        return kwargs
