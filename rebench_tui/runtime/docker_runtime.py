"""The Docker runtime: one container per session, through the ``docker`` SDK.

Works with the local socket or a remote engine (``ssh://user@host``, which the SDK reaches
through paramiko). GPUs come by the host's mode (gpus.py): device requests where the NVIDIA
Container Toolkit is installed, device nodes and the driver's files where it is not. A start the
engine refuses removes its half-created container before the error is raised.
"""

from __future__ import annotations

import io
import shlex
import shutil
import tarfile
import tempfile
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, NoReturn, Sequence

from ..catalog import Environment, Profile
from ..errors import RebenchError, RuntimeUnavailable
from ..hosts import Host
from .base import (
    ASSETS_DIR,
    SECRETS_FILE,
    LABEL_MANAGED,
    STARTING_SOLUTION_DIR,
    LABEL_SESSION,
    SCORER_LIB,
    SCORER_LIB_PACKAGE,
    SUPERVISOR,
    ExecResult,
    OutputFn,
    ProgressFn,
    Runtime,
    Sandbox,
    SandboxSpec,
    StatusFilter,
    exec_nonce,
    supervisor_argv,
)
from ..secrets import secrets_env_file
from .capture import DAEMON, HOOKS, TASK, TASK_DIR
from .docker_room import HOME_ARCNAME, find_rooms, open_room, remove_room
from .exec_gate import ExecGate, ExecsInFlight
from .gpus import (HOST_ROOT, LOOK_SCRIPT, NVIDIA_LIB_DIRS, NVIDIA_ROOT, QUERY, QUERY_DEVICES, TOOLKIT_FIX, Gpu, GpuSupport,
                   HostView, claims, decide, held_by, parse_look, parse_nvidia_smi, with_claims)
from .images import RECIPE_LABEL, ImageBuilder, Recipes, context_hash
from .safe_tar import extract_stream
from .remote import POLLER, FileStream, ensure_assets_volume, ensure_home_volume, is_remote, remove_session_volumes, tar_contents

HOME = "/home/agent"
PROTECTED = "/protected"
SUPERVISOR_PATH = "/opt/rebench/supervise.py"
STATE_DIR = "/run/rebench"
CAPTURE_PATH = "/opt/rebench/capture.py"
CAPTURE_TTY_DIR = "/var/log/rebench/tty"
SERVICES_RUN = "/run/rebench-services"
SERVICES_LOG = "/var/log/rebench/services"
NVIDIA_FIX = f"{TOOLKIT_FIX}; or start with `--profile smoke`, which needs no GPU"


def _tar_of(src: Path, arcname: str | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(src), arcname=arcname or src.name)
    return buf.getvalue()


def _root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def _add(tar: tarfile.TarFile, name: str, data: bytes | None, mode: int) -> None:
    """Add a root-owned file holding ``data`` (a folder where ``data`` is None) to ``tar``."""
    info = _root_owned(tarfile.TarInfo(name))
    info.mode = mode
    if data is None:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def _add_tools(tar: tarfile.TarFile) -> None:
    """The supervisor, the capture daemon, the poller, the scorer library and the shells' hooks."""
    _add(tar, "opt/rebench", None, 0o755)
    _add(tar, "opt/rebench/supervise.py", SUPERVISOR.read_bytes(), 0o755)
    _add(tar, "opt/rebench/capture.py", DAEMON.read_bytes(), 0o755)
    _add(tar, "opt/rebench/poller.py", POLLER.read_bytes(), 0o755)
    _add(tar, "opt/rebench/lib", None, 0o755)
    _add(tar, f"opt/rebench/lib/{SCORER_LIB_PACKAGE}", None, 0o755)
    for module in sorted((SCORER_LIB / SCORER_LIB_PACKAGE).glob("*.py")):
        _add(tar, f"opt/rebench/lib/{SCORER_LIB_PACKAGE}/{module.name}", module.read_bytes(), 0o644)
    _add(tar, "etc/profile.d", None, 0o755)
    _add(tar, "etc/profile.d/zz-rebench.sh", HOOKS.read_bytes(), 0o644)
    _add(tar, "usr/local/bin/task", TASK.read_bytes(), 0o755)


def _add_protected(tar: tarfile.TarFile, spec: SandboxSpec, progress: ProgressFn) -> None:
    """A fresh container's /protected: the starting solution, the held-out assets, the secrets."""
    prot = PROTECTED.lstrip("/")
    tar.add(str(spec.env.solution_dir), arcname=f"{prot}/{STARTING_SOLUTION_DIR}", filter=_root_owned)
    held_out = None if spec.assets is None else spec.assets / "protected"
    if held_out is not None and held_out.is_dir():
        progress(f"copying held-out assets into {PROTECTED}/{ASSETS_DIR}")
        tar.add(str(held_out), arcname=f"{prot}/{ASSETS_DIR}", filter=_root_owned)
    if spec.secrets:
        _add(tar, f"{prot}/{SECRETS_FILE}", secrets_env_file(spec.secrets), 0o640)


def _nvidia_linker_step() -> str:
    """Devices mode: the driver's libraries reach every process through the linker's cache (the
    participant's login shell and the scorer's clean environments included). Libraries mounted one
    by one come by soname; Triton links its launcher with -lcuda, which needs the unversioned
    libcuda.so beside them (a read-only driver folder has its own, or not)."""
    lib = NVIDIA_LIB_DIRS[0]
    return (f"printf '%s\\n' {' '.join(NVIDIA_LIB_DIRS)} > /etc/ld.so.conf.d/000-rebench-nvidia.conf && "
            f"{{ [ ! -e {lib}/libcuda.so.1 ] || [ -e {lib}/libcuda.so ] || ln -s libcuda.so.1 {lib}/libcuda.so 2>/dev/null || true; }} && "
            "{ ldconfig 2>/dev/null || true; }")


def _ownership_steps(spec: SandboxSpec, home: bool = True) -> list[str]:
    """A fresh container: /protected's files for root:protected only, the home the participant's."""
    paths = " ".join(shlex.quote(f"{PROTECTED}/{name}") for name in
                     (STARTING_SOLUTION_DIR, ASSETS_DIR, *([SECRETS_FILE] if spec.secrets else [])))
    # Only what the session put there: a read-only assets mount must not be touched.
    owned = " ".join(shlex.quote(f"{HOME}/{p.name}") for p in spec.workspace.iterdir() if p.name != ASSETS_DIR)
    protect = f"mkdir -p {PROTECTED}/{ASSETS_DIR} && chown -R root:protected {paths} && chmod -R u=rwX,g=rX,o= {paths}"
    if not home:
        return [protect]
    return [protect, f"chown agent:agent {HOME}" + (f" && chown -R agent:agent {owned}" if owned else "")]


def _setup_steps(container: Any, spec: SandboxSpec, *, fresh: bool) -> list[str]:
    """The shell steps ``_setup`` runs as root after copying its archive in."""
    # An image without /tmp (a machine's root imported without it) gets one, as every program expects.
    steps = ["[ -d /tmp ] || { mkdir -p /tmp && chmod 1777 /tmp; }",
             "grep -q zz-rebench /etc/bash.bashrc 2>/dev/null || echo '. /etc/profile.d/zz-rebench.sh' >> /etc/bash.bashrc",
             f"mkdir -p {CAPTURE_TTY_DIR} && chmod 700 /var/log/rebench",
             f"mkdir -p {STATE_DIR} && chmod 700 {STATE_DIR}",
             # the `task` command's spool: requests in in/ (the participant's), answers beside it (root's)
             f"mkdir -p {TASK_DIR}/in && chown root:root {TASK_DIR} {TASK_DIR}/in && chmod 755 {TASK_DIR} && chmod 1733 {TASK_DIR}/in"]
    if any(str(m.get("Destination", "")).startswith(NVIDIA_ROOT) for m in (container.attrs or {}).get("Mounts") or []):
        steps.append(_nvidia_linker_step())
    if fresh:
        steps += _ownership_steps(spec)
    # The capture daemon, detached from this command's output; the hooks only report to a
    # running daemon, so wait (up to 2 s) for its pid file.
    steps.append(f"(python3 {CAPTURE_PATH} serve </dev/null >/dev/null 2>&1 &) && i=0 && "
                 "while [ $i -lt 40 ] && ! test -s /run/rebench-capture/capture.pid; do sleep 0.05; i=$((i+1)); done")
    return steps


class DockerSandbox(Sandbox):
    kind = "docker"
    isolated = True
    capture = True
    home = HOME
    protected = PROTECTED
    python = "python3"
    supervisor = SUPERVISOR_PATH
    # Where a participant's symlink must not lead when a root scorer reads their files.
    forbidden_link_targets = (PROTECTED, "/root", "/run", "/proc", "/var/log/rebench", "/etc/shadow")

    def __init__(self, runtime: "DockerRuntime", container: Any, spec: SandboxSpec) -> None:
        self.runtime = runtime
        self._container = container
        self._generation = runtime.generation
        self.spec = spec
        self.host = runtime.host
        self.remote = runtime.remote
        self.gate = runtime.gate(container.id)
        self.room_of: str | None = None  # a scoring room: the session it scores

    @property
    def container(self) -> Any:
        """The container, through the runtime's current client (a reconnect makes a new one)."""
        if self._generation != self.runtime.generation:
            self._container = self.runtime.client.containers.get(self._container.id)
            self._generation = self.runtime.generation
        return self._container

    @property
    def api(self) -> Any:
        return self.runtime.client.api

    # -- remote engines: link and file feed -------------------------------------------------
    def ping(self, timeout: float = 3.0) -> None:
        """Raises unless the engine answers within ``timeout`` seconds."""
        self.runtime.ping(timeout)

    def reconnect(self) -> None:
        """A new connection to the engine; raises if it does not answer (yet)."""
        self.runtime.reconnect()
        if self.container.status != "running":
            self.container.reload()

    def watch_files(self, ignore: tuple[str, ...], interval: float = 0.5) -> FileStream:
        """The poller's scans of the home, streamed (the home is out of this machine's reach)."""
        with self.gate.starting():
            return FileStream(self.api, self.container.id, HOME, ignore, interval, frozen=lambda: self.gate.frozen)

    def sync_home(self, dest: Path, ignore: tuple[str, ...]) -> list[str]:
        """Copy the participant's home (less ignored paths) into the host folder ``dest``; returns
        what was skipped as unsafe (links out of it, devices, oversized files), one line each."""
        excludes = []
        for pat in ignore:
            excludes.append(f"--exclude=./{pat.rstrip('/')}" if "/" in pat else f"--exclude={pat}")
        with self.gate.starting():  # for the tar's whole life
            exec_id = self.api.exec_create(self.container.id, ["tar", "-C", HOME, *excludes, "-cf", "-", "."], user="root",
                                           stdout=True, stderr=False)["Id"]
            stream = self.api.exec_start(exec_id, stream=True)

            def tar_ended_well() -> None:
                rc = self.api.exec_inspect(exec_id).get("ExitCode")
                if rc not in (0, 1):  # 1: a file changed while it was read
                    raise RebenchError(f"copying the home out of the container failed (tar exit {rc})", kept="the container")

            return extract_stream(stream, dest, before_extract=tar_ended_well)

    def exec(self, argv: Sequence[str], *, user: str = "agent", workdir: str | None = None, env: dict[str, str] | None = None,
             timeout: float | None = None, on_output: OutputFn | None = None, cancel: threading.Event | None = None,
             guard_links: bool = False, token: str | None = None) -> ExecResult:
        keep_status = token is not None
        token = token or uuid.uuid4().hex
        cmd = supervisor_argv(self.python, SUPERVISOR_PATH, token, argv, user=user, workdir=workdir or HOME,
                              timeout=timeout, state_dir=STATE_DIR,
                              guard=(HOME, self.forbidden_link_targets) if guard_links else None, keep_status=keep_status)
        started = time.monotonic()
        nonce = exec_nonce()
        sink = StatusFilter(on_output, nonce=nonce)
        with self.gate.starting():  # for the exec's whole life: a freeze never meets it starting or ending
            return self._exec_stream(cmd, env, nonce, token, sink, cancel, started)

    def _exec_stream(self, cmd: list[str], env: dict[str, str] | None, nonce: str, token: str, sink: StatusFilter,
                     cancel: threading.Event | None, started: float) -> ExecResult:
        exec_id = self.api.exec_create(self.container.id, cmd, user="root", stdout=True, stderr=True,
                                       environment={**(env or {}), "REBENCH_EXEC_NONCE": nonce})["Id"]
        stream = self.api.exec_start(exec_id, stream=True, demux=True)
        done = threading.Event()
        if cancel is not None:
            def watch() -> None:
                while not done.is_set():
                    if cancel.wait(0.1):
                        self.supervisor_call("cancel", token)
                        return
            threading.Thread(target=watch, daemon=True).start()
        try:
            for out, err in stream:
                if out:
                    sink.feed("stdout", out)
                if err:
                    sink.feed("stderr", err)
        finally:
            done.set()
        sink.finish()
        # The supervisor's status line carries the command's exit code; the exec's own (one more
        # round trip to the engine) is asked for only when that line is missing.
        rc = 0 if sink.status is not None else self.api.exec_inspect(exec_id).get("ExitCode")
        result = sink.result(rc if rc is not None else -1, time.monotonic() - started)
        if sink.status is None:  # the supervisor itself died (container stopped, engine lost)
            result.stderr += f"\n[rebench] the command's supervisor ended without a status (exit {rc}); the container may have stopped"
            result.exit_code = rc if rc not in (None, 0) else -1
        return result

    # -- scorings: the freezer, the snapshot's source and the room ----------------------------
    @contextmanager
    def frozen(self) -> Iterator[None]:
        """The participant's container frozen by the engine (``docker pause``: the cgroup freezer,
        which no signal of theirs undoes) for the duration, then thawed; the app's own execs wait."""
        if self.room_of is not None:  # a room is never frozen: it is the scorer's
            yield
            return
        try:
            with self.gate.freeze(self._freeze, self._thaw):
                yield
        except ExecsInFlight as exc:  # raised before anything was frozen
            raise RebenchError(f"the participant's container could not be frozen for the scoring: {exc}",
                               kept="every record; nothing was scored", fix="score again in a moment") from None

    def _freeze(self) -> None:
        """``docker pause``, tried again a few times: the kernel's freezer gives up on a cgroup whose
        processes do not all stop in time (one in the middle of a disk write on a loaded machine), and
        the engine then says so (``unable to freeze``) with the container thawed. Any other failure
        (the engine slower than the client's timeout, say) may still have frozen it: thawed again
        before the error is raised, so a failed scoring never leaves the participant frozen."""
        import docker.errors

        for wait in (0.2, 0.5, 1.0, 2.0, None):
            try:
                self.container.pause()
                return
            except docker.errors.APIError as exc:
                if "freeze" in str(exc) and wait is not None:
                    time.sleep(wait)
                    continue
                failure: BaseException = exc
            except Exception as exc:  # noqa: BLE001 - a timeout: the pause may yet have happened
                failure = exc
            self._thaw_if_paused(settle_s=5.0)
            raise RebenchError(f"the participant's container could not be frozen for the scoring: "
                               f"{getattr(failure, 'explanation', None) or failure}", kept="every record; nothing was scored",
                               fix="score again (a busy disk can keep a process from stopping in time)") from None

    def _thaw_if_paused(self, settle_s: float = 0.0) -> None:
        """Thaw the container if the engine says it is paused (looking again for ``settle_s``: a
        pause the engine was still carrying out when the client gave up)."""
        deadline = time.monotonic() + settle_s
        while True:
            try:
                self.container.reload()
                if self.container.status == "paused":
                    self.container.unpause()
                    return
            except Exception:  # noqa: BLE001 - gone, or thawed meanwhile: stop and remove say the rest
                pass
            if time.monotonic() >= deadline:
                return
            time.sleep(0.5)

    def _thaw(self) -> None:
        """Thaw after a scoring; a failed unpause is looked at again (the engine's own view of the
        container), and raised only if it is still paused then."""
        try:
            self.container.unpause()
            return
        except Exception:  # noqa: BLE001 - a link lost meanwhile, or a slow engine: looked at below
            pass
        self._thaw_if_paused(settle_s=5.0)
        try:
            self.container.reload()
        except Exception:  # noqa: BLE001 - the engine is gone: the next attach thaws it
            return
        if self.container.status == "paused":
            raise RebenchError("the participant's container stayed frozen after the scoring",
                               kept="every record; the container", fix=f"`docker unpause {self.container.name}`, or "
                               "reopen the session (`rebench-tui resume`), which thaws it")

    def home_archive(self) -> tuple[Any, str]:
        """The home as the engine's tar stream (read as root, links not followed) and the
        members' prefix; the container may be frozen."""
        stream, _stat = self.container.get_archive(HOME)
        return stream, HOME.rsplit("/", 1)[-1]

    def open_room(self, token: str, fill_home: Callable[[Any, str], None], network: bool) -> "DockerSandbox":
        """A scoring room for the exec ``token`` (see docker_room.py): the session's image,
        limits and GPUs, the protected data, and the home ``fill_home(tar, arcname)`` writes."""
        spec = self.spec

        def fill(tar: tarfile.TarFile) -> None:
            _add_tools(tar)
            _add_protected(tar, spec, lambda _m: None)
            fill_home(tar, HOME_ARCNAME)

        steps = ["[ -d /tmp ] || { mkdir -p /tmp && chmod 1777 /tmp; }", f"mkdir -p {STATE_DIR} && chmod 700 {STATE_DIR}",
                 *_ownership_steps(spec, home=False)]
        if any(str(m.get("Destination", "")).startswith(NVIDIA_ROOT) for m in (self.container.attrs or {}).get("Mounts") or []):
            steps.append(_nvidia_linker_step())
        room = open_room(self.runtime.client, self.container, spec, token, HOME, network, fill, steps)
        sandbox = DockerSandbox(self.runtime, room, spec)
        sandbox.room_of = spec.session_id
        try:
            self.runtime._start_services(room, spec)
        except BaseException:
            remove_room(room)
            raise
        return sandbox

    def describe_room(self) -> dict[str, Any]:
        attrs = self._container.attrs or {}
        return {"kind": "docker", "isolated": True, "container": self._container.id[:12], "image": attrs.get("Image"),
                "network": ((attrs.get("HostConfig") or {}).get("NetworkMode") or "default")}

    def close_room(self) -> None:
        """Remove this scoring room (its container, with every process in it)."""
        remove_room(self._container)

    def remove_rooms(self, token: str | None = None) -> int:
        """Remove the session's rooms (of one scoring, with ``token``); how many there were."""
        found = find_rooms(self.runtime.client, self.spec.session_id, token)
        for room in found:
            remove_room(room)
        return len(found)

    def _room_for(self, token: str) -> "DockerSandbox | None":
        found = find_rooms(self.runtime.client, token=token)
        if not found:
            return None
        room = DockerSandbox(self.runtime, found[0], self.spec)
        room.room_of = self.spec.session_id
        return room

    def supervisor_call(self, verb: str, token: str) -> str:
        if self.room_of is None:
            room = self._room_for(token)  # a scoring's exec runs in its room
            if room is not None:
                if room.container.status != "running":
                    room.container.start()
                return room.supervisor_call(verb, token)
        with self.gate.starting():
            rc, out = self.container.exec_run([self.python, "-I", "-S", SUPERVISOR_PATH, verb, "--token", token,
                                               "--state-dir", STATE_DIR], user="root", demux=False)
        if verb == "status" and rc != 0:
            raise RebenchError(f"asking the container's supervisor about exec {token} failed (exit {rc}): "
                               f"{(out or b'').decode(errors='replace')[-500:]}", kept="the container")
        return (out or b"").decode(errors="replace")

    def copy_in(self, src: Path, dest: str) -> None:
        with self.gate.starting():
            self.container.put_archive(dest, _tar_of(src))

    def copy_out(self, src: str, dest: Path) -> list[str]:
        stream, _stat = self.container.get_archive(src)
        return extract_stream(stream, dest)

    def read_file(self, path: str, offset: int = 0) -> bytes:
        with self.gate.starting():
            rc, (out, _err) = self.container.exec_run(["tail", "-c", f"+{offset + 1}", path], user="root", demux=True)
        return (out or b"") if rc == 0 else b""

    task_dir = TASK_DIR

    def read_small_file(self, path: str, limit: int) -> bytes:
        # find does not follow links (-P); -links 1: not a hard link to a file that only root may read
        argv = ["find", path, "-maxdepth", "0", "-type", "f", "-links", "1", "-exec", "head", "-c", str(limit), "{}", ";"]
        with self.gate.starting():
            rc, (out, _err) = self.container.exec_run(argv, user="root", demux=True)
        return (out or b"") if rc == 0 else b""

    def shell_command(self) -> tuple[list[str], dict[str, str] | None, str | None]:
        """A login shell as agent under `script`, run by root so the terminal log is out of the
        participant's reach; the capture hooks mark each command's output in it."""
        host = [] if self.runtime.base_url is None else ["-H", self.runtime.base_url]
        ttylog = uuid.uuid4().hex[:12]
        inner = (f"exec setpriv --reuid=1000 --regid=1000 --init-groups env HOME={HOME} USER=agent LOGNAME=agent "
                 f"SHELL=/bin/bash REBENCH_TTYLOG={ttylog} bash --login")
        return ["docker", *host, "exec", "-it", "-u", "root", "-w", HOME, self.container.id,
                "script", "-q", "-f", "-e", "-c", inner, f"{CAPTURE_TTY_DIR}/{ttylog}.log"], None, None

    def is_running(self) -> bool:
        try:
            self.container.reload()
        except Exception:  # noqa: BLE001 - engine gone counts as not running
            return False
        return self.container.status == "running"

    def stop(self, *, remove: bool = False) -> None:
        if self.room_of is None:
            self.remove_rooms()
        try:
            self._thaw_if_paused()
            self.container.stop(timeout=5)
        finally:
            if remove:
                self.container.remove(force=True)
                if self.remote:
                    remove_session_volumes(self.runtime.client, self.spec.session_id)

    def image_id(self) -> str | None:
        return (self.container.attrs or {}).get("Image")

    def describe(self) -> dict[str, Any]:
        d = {"runtime": "docker", "isolated": True, "host": self.host, "container": self.container.short_id,
             "container_name": self.container.name, "image": self.spec.profile.base_image, "gpus": self.spec.profile.gpus}
        env = dict(e.partition("=")[::2] for e in ((self.container.attrs or {}).get("Config") or {}).get("Env") or [])
        if env.get("OMP_NUM_THREADS"):  # moves a CPU-timed score: the record says what the scorer ran with
            d["cpu_threads"] = int(env["OMP_NUM_THREADS"]) if env["OMP_NUM_THREADS"].isdigit() else env["OMP_NUM_THREADS"]
        mode, held = held_by(self.container.attrs or {})
        if mode:  # which GPUs this session holds, as the container's own configuration says
            d.update(gpu_mode=mode, gpu_devices=held)
        return d


# The variables numeric libraries read for their thread count (OpenMP: PyTorch's CPU kernels; the BLAS).
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")


class DockerRuntime(Runtime):
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

    @property
    def provided_images(self) -> dict[str, str]:
        """Base images this host provides itself (hosts.toml ``images``), by recipe name."""
        return dict(self.host_config.images) if self.host_config else {}

    def builder(self, progress: ProgressFn) -> ImageBuilder:
        return ImageBuilder(self.client, self.images_dir, self.cache_dir, progress, provided=self.provided_images)

    def engine_cpus(self) -> int:
        return int((self.client.info() or {}).get("NCPU") or 1)

    def has_nvidia_runtime(self) -> bool:
        return "nvidia" in ((self.client.info() or {}).get("Runtimes") or {})

    def has_image(self, tag: str) -> bool:
        return self.builder(lambda _m: None)._image(tag) is not None

    def image_tag(self, name: str) -> str:
        """The tag of base image ``name`` on this engine: the host's own where hosts.toml provides one."""
        return self.provided_images.get(name) or Recipes.load(self.images_dir).images[name].tag

    def _probe_image(self) -> str | None:
        """An image on the engine to run short probes in (the smallest rebench base)."""
        tag = self.image_tag("base")
        return tag if self.has_image(tag) else None

    def _probe(self, argv: list[str], **kwargs: Any) -> str | None:
        image = self._probe_image()
        if image is None:
            return None
        out = self.client.containers.run(image, argv, remove=True, user="root", network_mode="none", **kwargs)
        return out.decode(errors="replace")

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

    def engine_free_bytes(self) -> int | None:
        """Free bytes on the disk that holds the engine's images and containers."""
        root = (self.client.info() or {}).get("DockerRootDir")
        if self.base_url is None and root and Path(root).exists():
            return shutil.disk_usage(root).free
        text = self._probe(["df", "-P", "-B1", "/"])
        try:
            return int(text.splitlines()[-1].split()[3]) if text else None
        except (IndexError, ValueError):
            return None

    def ensure_image(self, env: Environment, profile: Profile, progress: ProgressFn) -> str:
        builder = self.builder(progress)
        base = builder.ensure(profile.base_image)
        base_id = self.client.images.get(base).id
        h = context_hash(env.path, base_id, skip=("solution", "instructions.md", "environment.toml"))
        tag = f"rebench-env/{env.id}:{profile.name}"
        img = builder._image(tag)
        if img is not None and (img.labels or {}).get(RECIPE_LABEL) == h:
            progress(f"image {tag} is up to date")
            return tag
        builder.build(env.path, tag, base, {RECIPE_LABEL: h, "rebench.env": env.id}, label=env.id, source=env.path)
        return tag

    def create(self, spec: SandboxSpec, image: str | None, progress: ProgressFn) -> Sandbox:
        kwargs = self._container_kwargs(spec, image, progress)
        progress(f"creating container rebench-{spec.session_id} from {image}")
        container = self.client.containers.create(**kwargs)
        self._start(container, spec, progress)
        sandbox = DockerSandbox(self, container, spec)
        self._setup(container, spec, progress, fresh=True)
        self._start_services(container, spec, progress)
        return sandbox

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
                _add_tools(tar)
                if fresh:
                    _add_protected(tar, spec, progress)
            tmp.seek(0)
            container.put_archive("/", tmp)
        steps = _setup_steps(container, spec, fresh=fresh)
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
