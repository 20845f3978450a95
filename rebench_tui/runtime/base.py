"""The runtime interface.

A :class:`Runtime` is an engine (a Docker daemon, or this machine without one): it builds
images and creates or finds :class:`Sandbox` es. A sandbox is one session's running environment:
run commands in it as a user with a timeout that really stops them, copy files, open a shell,
stop it.
"""

from __future__ import annotations

import json
import threading
from abc import ABC, abstractmethod
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator, Sequence

from ..catalog import Environment, Profile
# What an exec returns, and the supervisor's status made into it (re-exported: callers import them from here)
from .supervision import ExecResult, OutputFn, exec_result  # noqa: F401

if TYPE_CHECKING:
    from .gpu_host import GpuSupport
    from .gpus import Gpu
    from .images import ImageBuilder

ProgressFn = Callable[[str], None]

SUPERVISOR = Path(__file__).with_name("supervise.py")
# Its parts, which it imports from its own folder: shipped with it wherever it runs.
SUPERVISOR_PARTS = tuple(SUPERVISOR.with_name(f"supervise_{part}.py") for part in ("args", "files", "procs", "start", "state"))
# The scorers' helpers (result channel, participant processes, shared tensors): /opt/rebench/lib in a
# container, this folder on the local runtime; scorers find it through REBENCH_SCORER_LIB.
SCORER_LIB = Path(__file__).with_name("lib")
SCORER_LIB_PACKAGE = "rebench_scorer"

ASSETS_DIR = "assets"  # participant assets appear as ~/assets; held-out ones as <protected>/assets
STARTING_SOLUTION_DIR = "starting_solution"  # a pristine copy of solution/ under the protected folder
SECRETS_FILE = "secrets.env"  # KEY=VALUE lines under the protected folder, root-only

LABEL_MANAGED = "rebench.managed"
LABEL_SESSION = "rebench.session"
LABEL_ENV = "rebench.env"
LABEL_PROFILE = "rebench.profile"


@dataclass(frozen=True)
class SandboxSpec:
    session_id: str
    env: Environment
    profile: Profile
    workspace: Path  # host folder that becomes the participant's home
    state_dir: Path  # host folder for runtime bookkeeping (local runtime: protected copy, pid files)
    extra_env: dict[str, str] = field(default_factory=dict)
    assets: Path | None = None  # a prepared asset folder: workspace/ -> ~/assets (read-only), protected/ -> /protected/assets
    # Values of the profile's secrets: only for services and <protected>/secrets.env, never the participant.
    secrets: dict[str, str] = field(default_factory=dict, repr=False)

    def service_env(self, home: str, protected: str, isolated: bool) -> dict[str, str]:
        return {**self.profile.env, **self.extra_env, "REBENCH_HOME": home, "REBENCH_PROTECTED": protected,
                "REBENCH_PROFILE": self.profile.name, "REBENCH_ISOLATED": "1" if isolated else "0", **self.secrets}

    @property
    def labels(self) -> dict[str, str]:
        return {
            LABEL_MANAGED: "1",
            LABEL_SESSION: self.session_id,
            LABEL_ENV: self.env.id,
            LABEL_PROFILE: self.profile.name,
        }


class Sandbox(ABC):
    kind: str
    isolated: bool
    host: str
    home: str  # the participant's home as the sandbox's commands see it
    protected: str  # the protected folder as the sandbox's commands see it
    python: str  # the interpreter that runs scorers
    # Paths in the sandbox a link from the home must never lead to (checked around a scoring with
    # ``guard_links``); empty where nothing in the sandbox is hidden from the participant.
    forbidden_link_targets: tuple[str, ...] = ()

    @abstractmethod
    def exec(
        self,
        argv: Sequence[str],
        *,
        user: str = "agent",
        workdir: str | None = None,
        env: dict[str, str] | None = None,
        timeout: float | None = None,
        on_output: OutputFn | None = None,
        cancel: threading.Event | None = None,
        guard_links: bool = False,
        token: str | None = None,
    ) -> ExecResult:
        """Run ``argv`` to completion (or timeout/cancel, which kill its whole process group).

        ``guard_links``: in the same exec, look for links from the home into what only the scorer
        may read, before the command (found: it does not run; ``refused_links``) and after it
        (``late_links``). Only isolated sandboxes have such targets; elsewhere it does nothing.

        ``token``: the exec's name, chosen by the caller (a scoring records it before the exec
        starts): the supervisor then keeps its status in the sandbox, so :meth:`exec_status` can
        find it, or end it, after the caller died while it ran."""

    def supervisor_call(self, verb: str, token: str) -> str:
        """Run the supervisor's ``cancel`` or ``status`` verb for ``token`` in the sandbox; its stdout."""
        raise NotImplementedError(f"the {self.kind} sandbox cannot reach its supervisor")

    def exec_status(self, token: str) -> dict[str, Any]:
        """What became of the exec named ``token`` (run with ``token=``): the supervisor's answer
        (``state`` finished, with ``status``; running, with ``group``; gone; unknown)."""
        text = self.supervisor_call("status", token).strip().splitlines()
        try:
            answer = json.loads(text[-1]) if text else None
        except ValueError:
            answer = None
        if not isinstance(answer, dict) or "state" not in answer:
            raise RuntimeError(f"the supervisor's status answer was not understood: {text[-1:]!r}")
        return answer

    def end_exec(self, token: str, wait_s: float = 20.0) -> dict[str, Any]:
        """End the exec named ``token`` if it still runs (its whole process group, and what it
        left below it), and wait up to ``wait_s`` for the supervisor's status; returns the last
        :meth:`exec_status` answer."""
        import time

        answer = self.exec_status(token)
        if answer["state"] != "running":
            return answer
        self.supervisor_call("cancel", token)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            time.sleep(0.2)
            answer = self.exec_status(token)
            if answer["state"] != "running":
                return answer
        return answer

    @abstractmethod
    def copy_in(self, src: Path, dest: str) -> None:
        """Copy a host file or folder to ``dest`` (a folder path inside the sandbox)."""

    @abstractmethod
    def copy_out(self, src: str, dest: Path) -> list[str]:
        """Copy a sandbox file or folder into the host folder ``dest``; returns one line per entry
        skipped as unsafe (a link or path leading out of ``dest``, a device file, an oversized file)."""

    @abstractmethod
    def shell_command(self) -> tuple[list[str], dict[str, str] | None, str | None]:
        """(argv, env, cwd) for an interactive login shell as the participant, run on the host."""

    capture: bool = False  # whether commands typed in the sandbox's shells are captured
    remote: bool = False  # on another machine (an engine over ssh://): files there, a link to watch

    def ping(self, timeout: float = 3.0) -> None:
        """Raises unless the sandbox's engine answers within ``timeout`` seconds (remote sandboxes)."""

    def reconnect(self) -> None:
        """Open a new link to the engine; raises if it does not answer (remote sandboxes)."""

    def watch_files(self, ignore: tuple[str, ...], interval: float = 0.5) -> Any:
        """A stream of scans of the home (remote sandboxes: see runtime/poller.py)."""
        raise NotImplementedError(f"the {self.kind} sandbox is watched from this machine")

    def sync_home(self, dest: Path, ignore: tuple[str, ...]) -> list[str]:
        """Copy the home into the host folder ``dest`` (remote sandboxes; a local home is already there);
        returns one line per entry skipped as unsafe."""
        return []

    def read_file(self, path: str, offset: int = 0) -> bytes:
        """Bytes of a sandbox file from ``offset`` on, read as root (b"" if it does not exist)."""
        return b""

    # The `task` command's spool folder as the sandbox sees it (``session/desk.py``): its ``in``
    # folder the participant writes, the folder itself only root. None: no such folder here.
    task_dir: str | None = None

    def read_small_file(self, path: str, limit: int) -> bytes:
        """At most ``limit`` bytes of a regular file with one name, read as root, never through a
        link (b"" if it is absent, or not such a file): for files the participant may have placed."""
        return b""

    supervisor: str = str(SUPERVISOR)  # the command supervisor's path as the sandbox sees it

    # -- scorings -------------------------------------------------------------------------
    room_of: str | None = None  # a scoring room: the id of the session it scores

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """The participant's processes held still for the duration (a container's cgroup freezer);
        nothing here where there is no container."""
        yield

    def home_archive(self) -> tuple[Any, str] | None:
        """The home as a tar stream and its members' prefix, or None where the home is a folder
        of this machine (read it there)."""
        return None

    def open_room(self, token: str, fill_home: Callable[[Any, str], None], network: bool) -> "Sandbox":
        """A place of its own for the scoring ``token``, its home written by ``fill_home(tar, arcname)``."""
        raise NotImplementedError(f"the {self.kind} sandbox has no scoring room")

    def close_room(self) -> None:
        """Remove this scoring room and everything in it."""

    def describe_room(self) -> dict[str, Any]:
        """The record's facts of this scoring room (its container and image where it has one)."""
        return {"kind": self.kind, "isolated": self.isolated}

    def remove_rooms(self, token: str | None = None) -> int:
        """Remove the session's scoring rooms left behind (of one scoring, with ``token``)."""
        return 0

    def image_id(self) -> str | None:
        """The id (content digest) of the image the sandbox runs, where it runs one."""
        return None

    @abstractmethod
    def is_running(self) -> bool: ...

    @abstractmethod
    def stop(self, *, remove: bool = False) -> None: ...

    @abstractmethod
    def describe(self) -> dict[str, Any]:
        """Facts for the status line and the audit log: runtime, host, isolation, GPUs, ids."""


class Runtime(ABC):
    """What every caller may ask of a runtime. The defaults below are the answers of a runtime
    without containers or images (the local one); the Docker runtime overrides them."""

    kind: str
    isolated: bool
    host: str
    remote: bool = False  # the engine is on another host: homes live in volumes there

    @abstractmethod
    def ensure_image(self, env: Environment, profile: Profile, progress: ProgressFn) -> str | None:
        """Build (or find) what the sandbox runs from; returns an image reference or None."""

    @abstractmethod
    def create(self, spec: SandboxSpec, image: str | None, progress: ProgressFn) -> Sandbox: ...

    @abstractmethod
    def attach(self, spec: SandboxSpec) -> Sandbox | None:
        """Find the sandbox of an existing session again (by label), or None."""

    def gpu_support(self) -> "GpuSupport":
        """How this runtime's sandboxes get GPUs (toolkit, devices or none), and why."""
        from .gpu_host import GpuSupport

        return GpuSupport("none", "auto", f"the {self.kind} runtime gives sandboxes no GPUs")

    def gpu_inventory(self) -> list["Gpu"]:
        """Every GPU sandboxes can get here, with which are free; [] where they get none."""
        return []

    def find_containers(self, session_id: str | None = None) -> list[Any]:
        """The containers of one session (every session's, without one), stopped ones too; []
        where the runtime has no containers."""
        return []

    def remove_session_volumes(self, session_id: str) -> int:
        """Remove the home volume a session kept on a remote engine; how many went (0 where the
        runtime keeps none)."""
        return 0

    def builder(self, progress: ProgressFn) -> "ImageBuilder":
        """The builder of this engine's base images; raises where the runtime builds none."""
        from ..errors import RebenchError

        raise RebenchError(f"the {self.kind} runtime builds no images",
                           fix="build them on a Docker engine: `rebench-tui images build [--host URL]`")
