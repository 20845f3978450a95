"""The Docker sandbox: one session's container, through the runtime's current client. Commands run
under the supervisor (``/opt/rebench/supervise.py``) through the container's exec gate; files go
in and out as tar streams; the participant's shell is ``docker exec`` under ``script``. Its
scorings' freezer (docker_freeze.py) and rooms (docker_room.py) are mixins of it.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any, Protocol, Sequence

from ..errors import RebenchError
from .base import ExecResult, OutputFn, Sandbox, SandboxSpec
from .capture import TASK_DIR
from .docker_freeze import EngineFreezer
from .docker_room import RoomsOfSandbox
from .docker_setup import CAPTURE_TTY_DIR, HOME, PROTECTED, STATE_DIR, SUPERVISOR_PATH, tar_of
from .gpus import held_by
from .remote import FileStream, remove_session_volumes
from .safe_tar import extract_stream
from .supervision import StatusFilter, exec_nonce, supervisor_argv


class EngineOfSandbox(Protocol):
    """What a sandbox asks of the runtime that made it (DockerRuntime is one): named here so this
    module need not import the runtime, which imports it."""

    client: Any
    base_url: str | None
    generation: int
    host: str
    remote: bool

    def gate(self, container_id: str) -> Any: ...
    def ping(self, timeout: float = 3.0) -> None: ...
    def reconnect(self) -> None: ...
    def _start_services(self, *args: Any, **kw: Any) -> Any: ...


class DockerSandbox(EngineFreezer, RoomsOfSandbox, Sandbox):
    kind = "docker"
    isolated = True
    capture = True
    home = HOME
    protected = PROTECTED
    python = "python3"
    supervisor = SUPERVISOR_PATH
    # Where a participant's symlink must not lead when a root scorer reads their files.
    forbidden_link_targets = (PROTECTED, "/root", "/run", "/proc", "/var/log/rebench", "/etc/shadow")

    def __init__(self, runtime: EngineOfSandbox, container: Any, spec: SandboxSpec) -> None:
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
            self.container.put_archive(dest, tar_of(src))

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
