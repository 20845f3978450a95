"""The local runtime: no Docker, a plain folder and subprocesses on this machine.

NOT ISOLATED. The participant's commands and the scorer run as the current user, the protected
folder is readable by that user, and GPUs are whatever this machine has. It exists so the
workstation runs where no container engine does (a laptop, a CI box); the screen and the audit
log say so.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any, Sequence

from ..catalog import Environment, Profile
from .capture import TASK
from .base import ASSETS_DIR, SCORER_LIB, STARTING_SOLUTION_DIR, SUPERVISOR, ExecResult, OutputFn, ProgressFn, Runtime, Sandbox, SandboxSpec
from .supervision import StatusFilter, exec_nonce, supervisor_argv


def _pump(stream, name: str, sink: StatusFilter, lock: threading.Lock) -> None:
    for chunk in iter(lambda: stream.read1(65536), b""):
        with lock:
            sink.feed(name, chunk)


def host_argv(cmd: Sequence[str], protected: str, home: str) -> list[str]:
    """A sandbox's command (a service's) as this machine runs it: ``python3`` is this interpreter,
    /protected/... and /home/agent/... are the folders that stand for them here."""
    def mapped(arg: str) -> str:
        for prefix, real in (("/protected", protected), ("/home/agent", home)):
            if arg == prefix or arg.startswith(prefix + "/"):
                return real + arg[len(prefix):]
        return arg

    return [sys.executable if a == "python3" else mapped(a) for a in cmd]

class LocalSandbox(Sandbox):
    kind = "local"
    isolated = False
    host = "localhost"

    def __init__(self, spec: SandboxSpec) -> None:
        self.spec = spec
        self.home = str(spec.workspace)
        self.protected = str(spec.state_dir / "protected")
        self.python = sys.executable
        self._run_dir = str(spec.state_dir / "run")
        self._stopped = False
        self.task_dir = self._task_spool(spec.state_dir / "task")

    @staticmethod
    def _task_spool(folder: Path) -> str:
        """The `task` command's spool folder and a bin folder that puts `task` on the shell's PATH."""
        (folder / "in").mkdir(parents=True, exist_ok=True)
        (folder / "bin").mkdir(exist_ok=True)
        link = folder / "bin" / "task"
        if not link.is_symlink() or link.resolve() != TASK:
            link.unlink(missing_ok=True)
            link.symlink_to(TASK)
        return str(folder)

    def read_small_file(self, path: str, limit: int) -> bytes:
        try:
            fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return b""
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink != 1:
                return b""
            return os.read(fd, limit)
        finally:
            os.close(fd)

    def _base_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update(self.spec.profile.env)
        env.update(self.spec.extra_env)
        env.update({
            "REBENCH_HOME": self.home,
            "REBENCH_PROTECTED": self.protected,
            "REBENCH_PROFILE": self.spec.profile.name,
            "REBENCH_ISOLATED": "0",
            "REBENCH_SCORER_LIB": str(SCORER_LIB),
        })
        return env

    def exec(self, argv: Sequence[str], *, user: str = "agent", workdir: str | None = None, env: dict[str, str] | None = None,
             timeout: float | None = None, on_output: OutputFn | None = None, cancel: threading.Event | None = None,
             guard_links: bool = False, token: str | None = None) -> ExecResult:
        keep_status = token is not None
        token = token or uuid.uuid4().hex
        full_env = self._base_env()
        full_env.update(env or {})
        nonce = exec_nonce()
        full_env["REBENCH_EXEC_NONCE"] = nonce
        cmd = supervisor_argv(sys.executable, str(SUPERVISOR), token, argv, user=None, workdir=workdir or self.home,
                              timeout=timeout, state_dir=self._run_dir, keep_status=keep_status)
        sink = StatusFilter(on_output, nonce=nonce)
        lock = threading.Lock()
        started = time.monotonic()
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=full_env, stdin=subprocess.DEVNULL)
        pumps = [threading.Thread(target=_pump, args=(proc.stdout, "stdout", sink, lock), daemon=True),
                 threading.Thread(target=_pump, args=(proc.stderr, "stderr", sink, lock), daemon=True)]
        for t in pumps:
            t.start()
        stop_watch = threading.Event()
        if cancel is not None:
            def watch() -> None:
                while not stop_watch.is_set():
                    if cancel.wait(0.1):
                        subprocess.run([sys.executable, str(SUPERVISOR), "cancel", "--token", token, "--state-dir", self._run_dir],
                                       check=False, capture_output=True)
                        return
            threading.Thread(target=watch, daemon=True).start()
        rc = proc.wait()
        stop_watch.set()
        for t in pumps:
            t.join()
        sink.finish()
        return sink.result(rc, time.monotonic() - started)

    def open_room(self, token: str, fill_home: Any, network: bool) -> "LocalSandbox":
        """A copy of the attempt in a folder of its own (``.state/rooms/TOKEN/home``) where the
        scorer runs: what it scores is the snapshot, not the home as it is meanwhile. Not a
        boundary: the local runtime isolates nothing (the scorer runs as you, beside your processes)."""
        import copy
        import tarfile
        import tempfile

        folder = self.spec.state_dir / "rooms" / token
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        with tempfile.TemporaryFile() as tmp:
            with tarfile.open(fileobj=tmp, mode="w") as tar:
                fill_home(tar, "home")
            tmp.seek(0)
            with tarfile.open(fileobj=tmp, mode="r") as tar:
                tar.extractall(folder, filter="tar")
        home = folder / "home"
        home.mkdir(exist_ok=True)
        assets = Path(self.home) / ASSETS_DIR
        if assets.exists() and not (home / ASSETS_DIR).exists():
            (home / ASSETS_DIR).symlink_to(assets.resolve())
        room = copy.copy(self)
        room.home = str(home)
        room.room_of = self.spec.session_id
        room._run_dir = str(folder / "run")
        return room

    def close_room(self) -> None:
        if self.room_of is not None:
            shutil.rmtree(Path(self.home).parent, ignore_errors=True)

    def remove_rooms(self, token: str | None = None) -> int:
        rooms = self.spec.state_dir / "rooms"
        found = [rooms / token] if token else (list(rooms.iterdir()) if rooms.is_dir() else [])
        found = [f for f in found if f.is_dir()]
        for f in found:
            shutil.rmtree(f, ignore_errors=True)
        return len(found)

    def supervisor_call(self, verb: str, token: str) -> str:
        run_dir = self._run_dir
        room_run = self.spec.state_dir / "rooms" / token / "run"
        if self.room_of is None and room_run.is_dir():  # a scoring's exec ran in its room
            run_dir = str(room_run)
        p = subprocess.run([sys.executable, "-I", "-S", str(SUPERVISOR), verb, "--token", token, "--state-dir", run_dir],
                           capture_output=True, text=True, timeout=60)
        if verb == "status" and p.returncode != 0:
            raise RuntimeError(f"the supervisor's status verb failed (exit {p.returncode}): {p.stderr[-500:]}")
        return p.stdout

    def copy_in(self, src: Path, dest: str) -> None:
        target = Path(dest) / src.name
        if src.is_dir():
            shutil.copytree(src, target, dirs_exist_ok=True)
        else:
            Path(dest).mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)

    def copy_out(self, src: str, dest: Path) -> list[str]:
        s = Path(src)
        dest.mkdir(parents=True, exist_ok=True)
        if s.is_dir():  # links are copied as links, never followed out of the folder
            shutil.copytree(s, dest / s.name, symlinks=True, dirs_exist_ok=True)
        else:
            shutil.copy2(s, dest / s.name, follow_symlinks=False)
        return []

    def shell_command(self) -> tuple[list[str], dict[str, str] | None, str | None]:
        shell = os.environ.get("SHELL") or shutil.which("bash") or "/bin/sh"
        env = self._base_env()
        env["PS1"] = "(rebench, not isolated) \\w $ "
        env["REBENCH_TASK_DIR"] = self.task_dir
        env["PATH"] = f"{self.task_dir}/bin{os.pathsep}{env.get('PATH', '')}"
        return [shell], env, self.home

    def is_running(self) -> bool:
        return not self._stopped

    def start_services(self) -> None:
        run = self.spec.state_dir / "run"
        run.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **self.spec.service_env(self.home, self.protected, isolated=False)}
        for i, cmd in enumerate(self.spec.profile.services):
            pidfile = run / f"service-{i}.pid"
            try:
                os.kill(int(pidfile.read_text()), 0)
                continue  # still running
            except (OSError, ValueError):
                pass
            argv = host_argv(cmd, self.protected, self.home)
            with open(run / f"service-{i}.log", "ab") as log:
                proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                        start_new_session=True, cwd=self.home)
            pidfile.write_text(str(proc.pid))

    def stop(self, *, remove: bool = False) -> None:
        import signal

        self._stopped = True
        for pidfile in (self.spec.state_dir / "run").glob("service-*.pid"):
            try:
                os.killpg(int(pidfile.read_text()), signal.SIGTERM)
            except (OSError, ValueError):
                pass

    def describe(self) -> dict[str, Any]:
        return {"runtime": "local", "isolated": False, "host": self.host, "gpus": self.spec.profile.gpus,
                "note": "not isolated: commands and the scorer run as the current user on this machine"}


class LocalRuntime(Runtime):
    kind = "local"
    isolated = False
    host = "localhost"

    def ensure_image(self, env: Environment, profile: Profile, progress: ProgressFn) -> str | None:
        progress("local runtime: no image to build (not isolated)")
        return None

    def create(self, spec: SandboxSpec, image: str | None, progress: ProgressFn) -> Sandbox:
        protected = spec.state_dir / "protected"
        progress(f"copying the protected files to {protected} (readable by you: the local runtime is not isolated)")
        shutil.copytree(spec.env.protected_dir, protected, dirs_exist_ok=True)
        shutil.copytree(spec.env.solution_dir, protected / STARTING_SOLUTION_DIR, dirs_exist_ok=True)
        if spec.assets is not None:
            if (spec.assets / "protected").is_dir():
                shutil.copytree(spec.assets / "protected", protected / ASSETS_DIR, dirs_exist_ok=True)
            if (spec.assets / "workspace").is_dir():
                link = spec.workspace / ASSETS_DIR
                link.unlink(missing_ok=True)
                link.symlink_to((spec.assets / "workspace").resolve(), target_is_directory=True)
        # No secrets file here: it would sit in the session folder. Services get them by environment.
        (spec.state_dir / "run").mkdir(parents=True, exist_ok=True)
        sandbox = LocalSandbox(spec)
        sandbox.start_services()
        return sandbox

    def attach(self, spec: SandboxSpec) -> Sandbox | None:
        if not (spec.state_dir / "protected").is_dir():
            return None
        sandbox = LocalSandbox(spec)
        sandbox.start_services()
        return sandbox
