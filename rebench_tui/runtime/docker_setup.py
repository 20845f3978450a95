"""What rebench puts into a container: where things live in it, the archive of its tools (the
command supervisor and its modules, the capture daemon, the poller, the scorer library, the
shells' hooks) and of /protected (the starting solution, the held-out assets, the secrets), and
the shell steps that prepare a fresh or reattached container (or a scoring room) as root.
"""

from __future__ import annotations

import io
import shlex
import tarfile
from pathlib import Path
from typing import Any

from ..secrets import secrets_env_file
from .base import (ASSETS_DIR, SCORER_LIB, SCORER_LIB_PACKAGE, SECRETS_FILE, STARTING_SOLUTION_DIR, SUPERVISOR, SUPERVISOR_PARTS,
                   ProgressFn, SandboxSpec)
from .capture import DAEMON, HOOKS, TASK, TASK_DIR
from .gpus import NVIDIA_LIB_DIRS, NVIDIA_ROOT
from .remote import POLLER

HOME = "/home/agent"
PROTECTED = "/protected"
SUPERVISOR_PATH = "/opt/rebench/supervise.py"
STATE_DIR = "/run/rebench"
CAPTURE_PATH = "/opt/rebench/capture.py"
CAPTURE_TTY_DIR = "/var/log/rebench/tty"
SERVICES_RUN = "/run/rebench-services"
SERVICES_LOG = "/var/log/rebench/services"


def tar_of(src: Path, arcname: str | None = None) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(src), arcname=arcname or src.name)
    return buf.getvalue()


def root_owned(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = "root"
    return info


def add_file(tar: tarfile.TarFile, name: str, data: bytes | None, mode: int) -> None:
    """Add a root-owned file holding ``data`` (a folder where ``data`` is None) to ``tar``."""
    info = root_owned(tarfile.TarInfo(name))
    info.mode = mode
    if data is None:
        info.type = tarfile.DIRTYPE
        tar.addfile(info)
    else:
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))


def add_tools(tar: tarfile.TarFile) -> None:
    """The supervisor, the capture daemon, the poller, the scorer library and the shells' hooks."""
    add_file(tar, "opt/rebench", None, 0o755)
    add_file(tar, "opt/rebench/supervise.py", SUPERVISOR.read_bytes(), 0o755)
    for part in SUPERVISOR_PARTS:
        add_file(tar, f"opt/rebench/{part.name}", part.read_bytes(), 0o644)
    add_file(tar, "opt/rebench/capture.py", DAEMON.read_bytes(), 0o755)
    add_file(tar, "opt/rebench/poller.py", POLLER.read_bytes(), 0o755)
    add_file(tar, "opt/rebench/lib", None, 0o755)
    add_file(tar, f"opt/rebench/lib/{SCORER_LIB_PACKAGE}", None, 0o755)
    for module in sorted((SCORER_LIB / SCORER_LIB_PACKAGE).glob("*.py")):
        add_file(tar, f"opt/rebench/lib/{SCORER_LIB_PACKAGE}/{module.name}", module.read_bytes(), 0o644)
    add_file(tar, "etc/profile.d", None, 0o755)
    add_file(tar, "etc/profile.d/zz-rebench.sh", HOOKS.read_bytes(), 0o644)
    add_file(tar, "usr/local/bin/task", TASK.read_bytes(), 0o755)


def add_protected(tar: tarfile.TarFile, spec: SandboxSpec, progress: ProgressFn) -> None:
    """A fresh container's /protected: the starting solution, the held-out assets, the secrets."""
    prot = PROTECTED.lstrip("/")
    tar.add(str(spec.env.solution_dir), arcname=f"{prot}/{STARTING_SOLUTION_DIR}", filter=root_owned)
    held_out = None if spec.assets is None else spec.assets / "protected"
    if held_out is not None and held_out.is_dir():
        progress(f"copying held-out assets into {PROTECTED}/{ASSETS_DIR}")
        tar.add(str(held_out), arcname=f"{prot}/{ASSETS_DIR}", filter=root_owned)
    if spec.secrets:
        add_file(tar, f"{prot}/{SECRETS_FILE}", secrets_env_file(spec.secrets), 0o640)


def nvidia_linker_step() -> str:
    """Devices mode: the driver's libraries reach every process through the linker's cache (the
    participant's login shell and the scorer's clean environments included). Libraries mounted one
    by one come by soname; Triton links its launcher with -lcuda, which needs the unversioned
    libcuda.so beside them (a read-only driver folder has its own, or not)."""
    lib = NVIDIA_LIB_DIRS[0]
    return (f"printf '%s\\n' {' '.join(NVIDIA_LIB_DIRS)} > /etc/ld.so.conf.d/000-rebench-nvidia.conf && "
            f"{{ [ ! -e {lib}/libcuda.so.1 ] || [ -e {lib}/libcuda.so ] || ln -s libcuda.so.1 {lib}/libcuda.so 2>/dev/null || true; }} && "
            "{ ldconfig 2>/dev/null || true; }")


def ownership_steps(spec: SandboxSpec, home: bool = True) -> list[str]:
    """A fresh container: /protected's files for root:protected only, the home the participant's."""
    paths = " ".join(shlex.quote(f"{PROTECTED}/{name}") for name in
                     (STARTING_SOLUTION_DIR, ASSETS_DIR, *([SECRETS_FILE] if spec.secrets else [])))
    # Only what the session put there: a read-only assets mount must not be touched.
    owned = " ".join(shlex.quote(f"{HOME}/{p.name}") for p in spec.workspace.iterdir() if p.name != ASSETS_DIR)
    protect = f"mkdir -p {PROTECTED}/{ASSETS_DIR} && chown -R root:protected {paths} && chmod -R u=rwX,g=rX,o= {paths}"
    if not home:
        return [protect]
    return [protect, f"chown agent:agent {HOME}" + (f" && chown -R agent:agent {owned}" if owned else "")]


def setup_steps(container: Any, spec: SandboxSpec, *, fresh: bool) -> list[str]:
    """The shell steps ``DockerRuntime._setup`` runs as root after copying its archive in."""
    # An image without /tmp (a machine's root imported without it) gets one, as every program expects.
    steps = ["[ -d /tmp ] || { mkdir -p /tmp && chmod 1777 /tmp; }",
             "grep -q zz-rebench /etc/bash.bashrc 2>/dev/null || echo '. /etc/profile.d/zz-rebench.sh' >> /etc/bash.bashrc",
             f"mkdir -p {CAPTURE_TTY_DIR} && chmod 700 /var/log/rebench",
             f"mkdir -p {STATE_DIR} && chmod 700 {STATE_DIR}",
             # the `task` command's spool: requests in in/ (the participant's), answers beside it (root's)
             f"mkdir -p {TASK_DIR}/in && chown root:root {TASK_DIR} {TASK_DIR}/in && chmod 755 {TASK_DIR} && chmod 1733 {TASK_DIR}/in"]
    if any(str(m.get("Destination", "")).startswith(NVIDIA_ROOT) for m in (container.attrs or {}).get("Mounts") or []):
        steps.append(nvidia_linker_step())
    if fresh:
        steps += ownership_steps(spec)
    # The capture daemon, detached from this command's output; the hooks only report to a
    # running daemon, so wait (up to 2 s) for its pid file.
    steps.append(f"(python3 {CAPTURE_PATH} serve </dev/null >/dev/null 2>&1 &) && i=0 && "
                 "while [ $i -lt 40 ] && ! test -s /run/rebench-capture/capture.pid; do sleep 0.05; i=$((i+1)); done")
    return steps

