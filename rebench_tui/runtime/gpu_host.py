"""How an engine's containers get GPUs, from what the engine and the host show.

Two ways to give a container a GPU (the host's ``gpu_mode`` in hosts.toml, see hosts.py):

- ``toolkit``: the NVIDIA Container Toolkit. A device request names the GPU by uuid; the toolkit
  mounts the driver and the tools in.
- ``devices``: no toolkit. The GPU's device node (``/dev/nvidiaN``) and the shared ones
  (``nvidiactl``, ``nvidia-uvm``, ``nvidia-uvm-tools``, ``nvidia-modeset`` where present) are
  passed in, and the driver's libraries and tools are mounted read-only at ``/usr/local/nvidia``:
  a whole ``driver_dir``, or the libraries the host's ``ldconfig -p`` lists, one file each.

``decide`` turns what the engine and the host show into a :class:`GpuSupport` (the mode, and one
sentence saying why); the Docker runtime looks at the host through a throwaway container
(:data:`LOOK_SCRIPT`, read back by :func:`parse_look`).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any, Iterable, Literal

from .gpus import GPU_NODE, NVIDIA_BIN, NVIDIA_LIB_DIRS, NVIDIA_ROOT

SHARED_NODES = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset")
# What the toolkit mounts for compute and utility work, by soname (ldconfig -p names them)
DRIVER_LIBRARY = re.compile(r"^lib(cuda|cudadebugger|nvidia-(ml|ptxjitcompiler|nvvm|gpucomp|allocator|cfg|opencl|"
                            r"fatbinaryloader|compiler|pkcs11|pkcs11-openssl3))\.so\.\d[\d.]*$")
DRIVER_TOOLS = ("nvidia-smi", "nvidia-debugdump", "nvidia-persistenced", "nvidia-cuda-mps-control", "nvidia-cuda-mps-server")
HOST_ROOT = "/run/rebench-host"               # the host's / inside the look-around container

Mode = Literal["toolkit", "devices", "none"]


# Run in a throwaway container with the host's / mounted read-only at HOST_ROOT; $1 = device
# folder, $2 = driver folder (may be empty); REBENCH_LOOK_ROOT overrides where the host's / is (tests).
# One line per thing seen. A host path is followed
# through its links inside the host's root (an absolute link such as /usr/bin/nvidia-smi ->
# /usr/local/nvidia/bin/nvidia-smi means the host's file, not one of this container's), and a
# tool is reported at the path it leads to. Tools are looked for beside the driver's libraries first
# (their folder's ../bin, where a driver outside the usual places keeps them), then in the usual
# folders; the driver's own program (an ELF file) wins over a wrapper script of the same name, which
# may only find the real one through a PATH that the container does not have.
LOOK_SCRIPT = r"""
H=${REBENCH_LOOK_ROOT:-/run/rebench-host}
resolve() {
  p=$1; n=0
  while [ -L "$H$p" ] && [ $n -lt 40 ]; do
    t=$(readlink "$H$p"); case $t in /*) p=$t ;; *) p=${p%/*}/$t ;; esac; n=$((n + 1))
  done
  echo "$p"
}
for f in "$H$1"/nvidia*; do [ -c "$f" ] && echo "node ${f##*/}"; done
if [ -n "$2" ]; then
  if [ -d "$H$2" ]; then
    echo "driver_dir"
    for s in lib64 lib bin; do [ -d "$H$2/$s" ] && echo "driver_sub $s"; done
    for s in lib64 lib; do [ -e "$H$2/$s/libcuda.so.1" ] && echo "driver_libcuda $s"; done
    [ -x "$H$2/bin/nvidia-smi" ] && echo "driver_smi"
  fi
fi
dirs="/usr/bin /usr/local/bin /bin /usr/sbin /sbin"
if [ -f "$H/etc/ld.so.cache" ]; then
  LD=$(ldconfig -p -C "$H/etc/ld.so.cache" 2>/dev/null)
  printf '%s\n' "$LD" | sed 's/^/ld /'
  lib=$(printf '%s\n' "$LD" | sed -n 's/^[[:space:]]*libcuda\.so\.1 (.*x86-64.*) => //p' | head -1)
  [ -n "$lib" ] && dirs="${lib%/*}/../bin $dirs"
fi
elf() { [ "$(head -c 4 "$1" 2>/dev/null | tail -c 3)" = ELF ]; }
for t in """ + " ".join(DRIVER_TOOLS) + r"""; do
  first=""
  for d in $dirs; do
    r=$(resolve "$d/$t")
    [ -f "$H$r" ] && [ -x "$H$r" ] || continue
    if elf "$H$r"; then first=$r; break; fi
    [ -n "$first" ] || first=$r
  done
  [ -n "$first" ] && echo "tool $t $first"
done
exit 0
"""


@dataclass(frozen=True)
class HostView:
    """What a look at the host's files found (device nodes, driver folder, ldconfig, tools)."""
    nodes: tuple[str, ...] = ()
    driver_dir_exists: bool = False
    driver_subdirs: tuple[str, ...] = ()
    driver_libcuda: bool = False
    driver_smi: bool = False
    libraries: tuple[tuple[str, str], ...] = ()   # (soname, host path) of the driver's libraries in ldconfig -p
    tools: tuple[tuple[str, str], ...] = ()       # (name, host path)
    error: str | None = None                      # the look itself failed (and why)

    @property
    def gpu_minors(self) -> list[int]:
        return sorted(int(m.group(1)) for n in self.nodes if (m := GPU_NODE.match(n)))


def parse_ldconfig(lines: Iterable[str]) -> list[tuple[str, str]]:
    """(soname, path) of the NVIDIA driver's 64-bit libraries in ``ldconfig -p`` lines, first of each."""
    found: dict[str, str] = {}
    for line in lines:
        m = re.match(r"^\s*(\S+) \(([^)]*)\) => (\S+)\s*$", line)
        if not m:
            continue
        name, flags, path = m.groups()
        if DRIVER_LIBRARY.match(name) and ("x86-64" in flags or "AArch64" in flags) and name not in found:
            found[name] = path
    return sorted(found.items())


def parse_look(text: str) -> HostView:
    nodes, subs, tools, ld = [], [], [], []
    driver_dir = libcuda = smi = False
    for line in text.splitlines():
        word, _, rest = line.partition(" ")
        if word == "node":
            nodes.append(rest.strip())
        elif word == "driver_dir":
            driver_dir = True
        elif word == "driver_sub":
            subs.append(rest.strip())
        elif word == "driver_libcuda":
            libcuda = True
        elif word == "driver_smi":
            smi = True
        elif word == "ld":
            ld.append(rest)
        elif word == "tool":
            name, _, path = rest.partition(" ")
            tools.append((name, posixpath.normpath(path.strip())))
    return HostView(tuple(sorted(nodes)), driver_dir, tuple(subs), libcuda, smi, tuple(parse_ldconfig(ld)), tuple(tools))


# -- the decision ----------------------------------------------------------------------------

TOOLKIT_FIX = "install the NVIDIA Container Toolkit on the Docker host and run " \
              "`sudo nvidia-ctk runtime configure --runtime=docker && sudo systemctl restart docker`"


@dataclass(frozen=True)
class DeviceGpus:
    """How a devices-mode container gets GPUs: nodes to pass in, driver files to mount."""
    device_dir: str
    shared: tuple[str, ...]                       # shared node names present on the host
    minors: tuple[int, ...]                       # GPU nodes present on the host
    mounts: tuple[tuple[str, str], ...]           # (host path, container path), read-only
    driver: str                                   # where the driver comes from, in words
    has_smi: bool

    def devices(self, minors: Iterable[int]) -> list[str]:
        """``docker run --device`` values: the GPUs' own nodes and the shared ones."""
        names = [f"nvidia{m}" for m in minors] + list(self.shared)
        return [f"{self.device_dir}/{n}:/dev/{n}:rwm" for n in names]

    def container_kwargs(self, minors: Iterable[int], image_path: str | None = None) -> dict[str, Any]:
        """Everything ``containers.create`` needs for these GPUs (devices, mounts, environment)."""
        from docker.types import Mount

        path = f"{NVIDIA_BIN}:{image_path or '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin'}"
        return {
            "devices": self.devices(minors),
            "mounts": [Mount(target=dst, source=src, type="bind", read_only=True) for src, dst in self.mounts],
            "environment": {"LD_LIBRARY_PATH": ":".join(NVIDIA_LIB_DIRS), "PATH": path},
        }


@dataclass(frozen=True)
class GpuSupport:
    """How this engine's containers get GPUs, and why: what `doctor` and `hosts` show."""
    mode: Mode
    configured: str                 # the hosts file's gpu_mode ("auto" where the host is not listed)
    why: str                        # one sentence: why this mode
    problem: str | None = None      # the mode cannot work here (what is missing)
    fix: str | None = None
    devices: DeviceGpus | None = None
    source: str | None = None       # the hosts-file entry that configured it

    @property
    def usable(self) -> bool:
        return self.mode != "none" and self.problem is None

    @property
    def summary(self) -> str:
        """Short: for a table cell or a reason in a list."""
        if self.problem:
            return f"{self.mode} mode cannot work: {self.problem}"
        return self.mode if self.mode != "none" else f"no GPUs ({self.why})"


def _driver(view: HostView, driver_dir: str | None) -> tuple[tuple[tuple[str, str], ...], str, bool] | str:
    """(mounts, description, has nvidia-smi) for the driver, or why it cannot be found."""
    if driver_dir:
        if not view.driver_dir_exists:
            return f"driver_dir {driver_dir} does not exist on the host"
        if not view.driver_libcuda:
            return f"no libcuda.so.1 in {driver_dir}/lib64 or {driver_dir}/lib"
        return ((driver_dir, NVIDIA_ROOT),), f"{driver_dir} (mounted read-only at {NVIDIA_ROOT})", view.driver_smi
    libs = dict(view.libraries)
    if "libcuda.so.1" not in libs:
        return "the host's `ldconfig -p` lists no libcuda.so.1 (the NVIDIA driver's libraries)"
    mounts = [(path, f"{NVIDIA_LIB_DIRS[0]}/{name}") for name, path in sorted(libs.items())]
    tools = [(path, f"{NVIDIA_BIN}/{name}") for name, path in view.tools]
    names = ", ".join(sorted(libs))
    return (tuple(mounts + tools), f"{len(libs)} libraries found with the host's `ldconfig -p` ({names})"
            + (f" and {', '.join(n for n, _ in view.tools)}" if view.tools else "") + f", each mounted read-only under {NVIDIA_ROOT}",
            any(n == "nvidia-smi" for n, _ in view.tools))


_DEVICES_FIX = ("set gpu_mode = \"devices\" for this host in hosts.toml (with driver_dir if the driver's libraries "
                "are not in the host's ldconfig cache)")


def _toolkit_support(configured: str, has_runtime: bool, where: str, source: str | None) -> GpuSupport:
    why = ("the engine lists the nvidia runtime (NVIDIA Container Toolkit): GPUs by device request"
           + (f"; gpu_mode = \"toolkit\"{where}" if configured == "toolkit" else ""))
    if has_runtime:
        return GpuSupport("toolkit", configured, why, source=source)
    return GpuSupport("toolkit", configured, f"gpu_mode = \"toolkit\"{where}", source=source,
                      problem="the engine lists no nvidia runtime (is the NVIDIA Container Toolkit installed and configured?)",
                      fix=f"{TOOLKIT_FIX}; or, without the toolkit, {_DEVICES_FIX}")


def _unseen_host_support(configured: str, view: HostView | None, where: str, source: str | None) -> GpuSupport:
    """Devices mode (or auto without the toolkit) where the host could not be looked at."""
    reason = f"could not look at the host's devices: {view.error if view else 'not looked at'}"
    if configured == "devices":
        return GpuSupport("devices", configured, f"gpu_mode = \"devices\"{where}", problem=reason, source=source,
                          fix="build the base image on this engine (`rebench-tui images build base`), then run doctor again")
    return GpuSupport("none", configured, f"no nvidia runtime on the engine, and {reason}", source=source,
                      fix=f"{TOOLKIT_FIX}; or build the base image (`rebench-tui images build base`) so the host can be looked at")


def _incomplete_host_support(configured: str, problem: str, has_minors: bool, where: str, source: str | None,
                             device_dir: str) -> GpuSupport:
    """Devices mode (or auto without the toolkit) where the host lacks a node or the driver's files."""
    if configured == "devices":
        return GpuSupport("devices", configured, f"gpu_mode = \"devices\"{where}", problem=problem, source=source,
                          fix="check that the NVIDIA driver is loaded on the host (`nvidia-smi` there; "
                              "`nvidia-modprobe -u -c 0` creates nvidia-uvm's nodes) and that driver_dir names its folder")
    if not has_minors:
        return GpuSupport("none", configured, f"no nvidia runtime on the engine and no NVIDIA device nodes in {device_dir}",
                          source=source, fix=f"run on a GPU host, or {TOOLKIT_FIX}")
    return GpuSupport("none", configured, f"no nvidia runtime on the engine; the host has NVIDIA device nodes but {problem}",
                      source=source, fix=f"{TOOLKIT_FIX}; or {_DEVICES_FIX}")


def _devices_support(configured: str, view: HostView, where: str, source: str | None, driver_dir: str | None,
                     device_dir: str) -> GpuSupport:
    """Devices mode (or auto without the toolkit) from what a look at the host found."""
    minors = view.gpu_minors
    shared = tuple(n for n in SHARED_NODES if n in view.nodes)
    missing = [] if minors else [f"no {device_dir}/nvidiaN device node"]
    missing += [f"no {device_dir}/{n}" for n in ("nvidiactl", "nvidia-uvm") if n not in view.nodes]
    driver = _driver(view, driver_dir)
    if isinstance(driver, str):
        missing.append(driver)
    if missing:
        return _incomplete_host_support(configured, "; ".join(missing), bool(minors), where, source, device_dir)
    mounts, described, has_smi = driver
    nodes = ", ".join(f"{device_dir}/{n}" for n in [f"nvidia{m}" for m in minors] + list(shared))
    lead = f"gpu_mode = \"devices\"{where}" if configured == "devices" else "no nvidia runtime on the engine (no NVIDIA Container Toolkit)"
    why = f"{lead}; device nodes passed in: {nodes}; driver from {described}"
    return GpuSupport("devices", configured, why, source=source,
                      devices=DeviceGpus(device_dir, shared, tuple(minors), mounts, described, has_smi))


def decide(configured: str, has_runtime: bool, view: HostView | None, *, driver_dir: str | None = None,
           device_dir: str = "/dev", source: str | None = None) -> GpuSupport:
    """The GPU mode for an engine: ``configured`` from the hosts file (auto | toolkit | devices |
    none), ``has_runtime`` whether the engine lists the nvidia runtime, ``view`` what a look at the
    host found (None: not looked at)."""
    where = f" (hosts.toml: {source})" if source else ""
    if configured == "none":
        return GpuSupport("none", configured, f"gpu_mode = \"none\"{where}", source=source,
                          fix="set gpu_mode to auto, toolkit or devices in hosts.toml to give containers GPUs")
    if configured == "toolkit" or (configured == "auto" and has_runtime):
        return _toolkit_support(configured, has_runtime, where, source)
    # devices, or auto without the toolkit: look at the host
    if view is None or view.error:
        return _unseen_host_support(configured, view, where, source)
    return _devices_support(configured, view, where, source, driver_dir, device_dir)
