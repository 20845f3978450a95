"""The Docker runtime: one container per session, through the ``docker`` SDK.

Works with the local socket or a remote engine (``ssh://user@host``, which the SDK reaches
through paramiko). This module owns the engine's connection (connect, ping, reconnect), each
container's exec gate, and the containers' life: create, start, set up, attach, find. Its parts
by what they do: images (docker_images.py), GPUs (docker_gpus.py: device requests where the
NVIDIA Container Toolkit is installed, device nodes and the driver's files where it is not),
the container's settings and limits (docker_limits.py), what goes into a container
(docker_setup.py) and the sandbox itself (docker_sandbox.py). A start the engine refuses
removes its half-created container before the error is raised.
"""

from __future__ import annotations

import tarfile
import tempfile
import threading
from pathlib import Path
from typing import Any, NoReturn

from ..catalog import Profile
from ..errors import RebenchError, RuntimeUnavailable
from ..hosts import Host
from .base import LABEL_MANAGED, LABEL_SESSION, ProgressFn, Runtime, Sandbox, SandboxSpec
from .docker_gpus import EngineGpus
from .docker_images import EngineImages
from .docker_limits import ContainerSettings
from .docker_sandbox import DockerSandbox
from .docker_setup import HOME, PROTECTED, SERVICES_LOG, SERVICES_RUN, add_protected, add_tools, setup_steps
from .exec_gate import ExecGate
from .gpu_host import TOOLKIT_FIX, GpuSupport
from .remote import is_remote, remove_session_volumes, tar_contents

NVIDIA_FIX = f"{TOOLKIT_FIX}; or start with `--profile smoke`, which needs no GPU"


class DockerRuntime(EngineImages, EngineGpus, ContainerSettings, Runtime):
    kind = "docker"
    isolated = True

    def __init__(self, client: Any, base_url: str | None, images_dir: Path, cache_dir: Path,
                 host_config: Host | None = None, threads: int | None = None) -> None:
        self.client = client
        self.threads = threads  # every container's numeric-library threads, instead of its CPU allotment
        self.base_url = base_url
        self.host = base_url or "local"
        self.images_dir = images_dir
        self.cache_dir = cache_dir
        self.remote = is_remote(base_url)
        self.timeout = 60
        self.generation = 0  # bumped by each reconnect: sandboxes fetch their container again
        self._reconnect_lock = threading.Lock()
        self.host_config = host_config  # this engine's entry in hosts.toml (GPU mode, provided images)
        self._gpu_support: GpuSupport | None = None
        self.inventory_error: str | None = None  # why the last GPU listing failed, if it did
        self._gates: dict[str, ExecGate] = {}

    def gate(self, container_id: str) -> ExecGate:
        """The exec gate of a container (one per container, whichever sandbox object asks)."""
        with self._reconnect_lock:
            return self._gates.setdefault(container_id, ExecGate())

    @staticmethod
    def _client(base_url: str | None, timeout: int) -> Any:
        import docker

        if base_url:
            return docker.DockerClient(base_url=base_url, use_ssh_client=False, timeout=timeout)
        return docker.from_env(timeout=timeout)

    def ping(self, timeout: float = 3.0) -> None:
        """Raises unless the engine answers ``/_ping`` within ``timeout`` seconds."""
        api = self.client.api  # a requests.Session: its public get() takes a per-call timeout
        res = api.get(f"{api.base_url}/_ping", timeout=timeout)
        res.raise_for_status()

    def reconnect(self) -> None:
        """Replace the client with a new connection (the SDK's SSH transport does not come back by
        itself); raises, keeping the old one, if the engine does not answer."""
        with self._reconnect_lock:
            fresh = self._client(self.base_url, self.timeout)
            try:
                fresh.ping()
            except BaseException:
                fresh.close()
                raise
            old, self.client = self.client, fresh
            self.generation += 1
        try:
            old.close()
        except Exception:  # noqa: BLE001 - the old link is dead; closing it may fail
            pass

    @classmethod
    def connect(cls, base_url: str | None, images_dir: Path, cache_dir: Path, timeout: int = 60,
                host_config: Host | None = None, threads: int | None = None) -> "DockerRuntime":
        try:
            client = cls._client(base_url, timeout)
            client.ping()
        except Exception as exc:  # noqa: BLE001 - every way of failing to connect is reported the same
            where = base_url or "the local socket (DOCKER_HOST or /var/run/docker.sock)"
            if base_url and base_url.startswith("ssh://"):
                from urllib.parse import urlsplit

                u = urlsplit(base_url)
                login = f"{'-p ' + str(u.port) + ' ' if u.port else ''}{u.username + '@' if u.username else ''}{u.hostname}"
                fix = (f"check that `ssh {login} docker version` works from here (host key in ~/.ssh/known_hosts, "
                       f"your key on the host, Docker running there); `rebench-tui doctor --host {base_url}` names what is missing")
            else:
                fix = ("start the engine (`sudo dockerd &` or `sudo systemctl start docker`), check DOCKER_HOST / --host, "
                       "or use `--runtime local` (not isolated)")
            raise RuntimeUnavailable(f"no Docker engine answers at {where}: {exc}", fix=fix) from None
        return cls(client, base_url, images_dir, cache_dir, host_config, threads)

    def engine_cpus(self) -> int:
        return int((self.client.info() or {}).get("NCPU") or 1)

    def has_nvidia_runtime(self) -> bool:
        return "nvidia" in ((self.client.info() or {}).get("Runtimes") or {})

    def create(self, spec: SandboxSpec, image: str | None, progress: ProgressFn) -> Sandbox:
        kwargs = self._container_kwargs(spec, image, progress)
        progress(f"creating container rebench-{spec.session_id} from {image}")
        container = self.client.containers.create(**kwargs)
        self._start(container, spec, progress)
        sandbox = DockerSandbox(self, container, spec)
        self._setup(container, spec, progress, fresh=True)
        self._start_services(container, spec, progress)
        return sandbox

    def _start(self, container: Any, spec: SandboxSpec, progress: ProgressFn) -> None:
        """Start the created container (its home copied in first on a remote engine); a start the
        engine refuses removes it (and its volumes) and raises."""
        import docker.errors

        try:
            if self.remote:
                progress(f"copying the starting workspace into its volume on {self.host}")
                with tar_contents(spec.workspace) as tmp:
                    container.put_archive(HOME, tmp)
            container.start()
        except docker.errors.APIError as exc:
            container.remove(force=True)
            if self.remote:
                remove_session_volumes(self.client, spec.session_id)
            self._refused_start(spec.profile, exc)

    def _refused_start(self, prof: Profile, exc: Any) -> NoReturn:
        """Raise the readable error for a start the engine refused."""
        text = str(exc)
        if prof.gpus and ("device driver" in text or "nvidia" in text.lower() or "gpu" in text.lower()):
            raise RuntimeUnavailable(
                f"profile {prof.name!r} needs {prof.gpus} GPU(s), but the Docker engine at {self.host} cannot give "
                f"containers GPUs ({self.gpu_support().mode} mode): {exc.explanation or text}",
                kept="nothing was started (the half-created container was removed); the session folder is kept",
                fix=NVIDIA_FIX + ("; without the toolkit, set gpu_mode = \"devices\" for this host in hosts.toml"
                                  if self.gpu_support().mode == "toolkit" else ""),
            ) from None
        if "rlimit" in text:
            raise RebenchError(f"the container did not start: the engine may not grant its limits (open files "
                               f"{prof.open_files}, processes {prof.pids}): {exc.explanation or text}",
                               kept="the session folder (the half-created container was removed)",
                               fix="raise the engine's own limit (LimitNOFILE of dockerd), or lower the profile's "
                                   "resources.open_files in environment.toml") from None
        raise RebenchError(f"the container did not start: {exc.explanation or text}", kept="the session folder",
                           fix="see `docker logs` on the engine; run `rebench-tui doctor`") from None

    def _start_services(self, container: Any, spec: SandboxSpec, progress: ProgressFn = lambda _m: None) -> None:
        """Start the profile's services as root unless they run already (pid files under /run)."""
        if not spec.profile.services:
            return
        container.exec_run(["sh", "-c", f"mkdir -p {SERVICES_RUN} {SERVICES_LOG} && chmod 700 {SERVICES_RUN} {SERVICES_LOG}"],
                           user="root")
        env = spec.service_env(HOME, PROTECTED, isolated=True)
        for i, cmd in enumerate(spec.profile.services):
            pidfile = f"{SERVICES_RUN}/{i}.pid"
            alive, _ = container.exec_run(["sh", "-c", f'test -f {pidfile} && test -d "/proc/$(cat {pidfile})"'], user="root")
            if alive == 0:
                continue
            progress(f"starting service {i}: {' '.join(cmd)}")
            container.exec_run(["sh", "-c", f'echo $$ > {pidfile}; exec "$0" "$@" >> {SERVICES_LOG}/{i}.log 2>&1', *cmd],
                               user="root", detach=True, environment=env)

    def _setup(self, container: Any, spec: SandboxSpec, progress: ProgressFn = lambda _m: None, *, fresh: bool) -> None:
        """What a container needs from us, in one archive and one command (every engine round trip
        costs tens of milliseconds): the command supervisor, the capture daemon and the poller, the
        shells' hooks; on a fresh container also the pristine starting solution, the held-out
        assets and the secrets under /protected (root:protected, 0750) and the home's ownership.
        Idempotent: ``attach`` runs it again (files refreshed; the daemon started unless it runs)."""
        with tempfile.TemporaryFile() as tmp:
            with tarfile.open(fileobj=tmp, mode="w") as tar:
                add_tools(tar)
                if fresh:
                    add_protected(tar, spec, progress)
            tmp.seek(0)
            container.put_archive("/", tmp)
        steps = setup_steps(container, spec, fresh=fresh)
        rc, out = container.exec_run(["sh", "-c", " && ".join(f"{{ {step}; }}" for step in steps)], user="root")
        if rc != 0:
            raise RebenchError(f"preparing the container failed: {out.decode(errors='replace')}",
                               kept="the container and the session folder")

    def find_containers(self, session_id: str | None = None) -> list[Any]:
        label = f"{LABEL_SESSION}={session_id}" if session_id else f"{LABEL_MANAGED}=1"
        return self.client.containers.list(all=True, filters={"label": label})

    def remove_session_volumes(self, session_id: str) -> int:
        return remove_session_volumes(self.client, session_id) if self.remote else 0

    def attach(self, spec: SandboxSpec) -> Sandbox | None:
        if self.remote:
            try:
                self.ping()
            except Exception:  # noqa: BLE001 - a link that dropped since connecting: a new one
                self.reconnect()
        found = self.find_containers(spec.session_id)
        if not found:
            return None
        container = found[0]
        if container.status == "paused":  # the app ended during a scoring: the participant's processes thaw now
            container.unpause()
            container.reload()
        if container.status != "running":
            container.start()
        # Idempotent: refreshes the supervisor and hooks, and starts the capture daemon and the
        # services if they are not running.
        self._setup(container, spec, fresh=False)
        self._start_services(container, spec)
        return DockerSandbox(self, container, spec)
