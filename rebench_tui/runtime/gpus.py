"""Which GPUs an engine has and which of them are free.

The inventory comes from ``nvidia-smi`` run in a throwaway container with every GPU, so it is
what containers will see, on a local or a remote engine. A GPU counts as busy when a running
rebench container holds it (its uuid in the container's device requests, or its device node in
the container's devices: the claim is in the container itself, in either mode) or when something
else already uses memory on it. How containers get GPUs at all (the host's mode) is gpu_host.py's.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

# The columns every mode asks for; each is a field of `nvidia-smi --help-query-gpu` (a test checks
# them against a real driver's list: a field the driver does not know fails the whole query).
QUERY_FIELDS = ("index", "uuid", "name", "memory.total", "memory.used")
QUERY = ["nvidia-smi", f"--query-gpu={','.join(QUERY_FIELDS)}", "--format=csv,noheader,nounits"]
BUSY_MEMORY = 1024**3   # more than this in use by something else: the GPU is not free

NVIDIA_ROOT = "/usr/local/nvidia"             # where a devices-mode container finds the driver
NVIDIA_LIB_DIRS = (f"{NVIDIA_ROOT}/lib64", f"{NVIDIA_ROOT}/lib")
NVIDIA_BIN = f"{NVIDIA_ROOT}/bin"
# devices mode also needs each GPU's minor number (the N of /dev/nvidiaN), which --query-gpu does
# not offer: `nvidia-smi -q` prints it per GPU, beside the GPU's UUID.
MINOR_MARK = "#minor-numbers"
QUERY_DEVICES = ["sh", "-c", f'S={NVIDIA_BIN}/nvidia-smi; "$S" --query-gpu={",".join(QUERY_FIELDS)} '
                 '--format=csv,noheader,nounits || exit $?; '
                 f'echo "{MINOR_MARK}"; "$S" -q | grep -E "^GPU |GPU UUID|Minor Number" || true']
GPU_NODE = re.compile(r"^nvidia(\d+)$")


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    memory_total: int
    memory_used: int
    claimed_by: str | None = None
    minor: int | None = None    # the N of /dev/nvidiaN (devices mode)

    @property
    def free(self) -> bool:
        return self.claimed_by is None and self.memory_used < BUSY_MEMORY

    @property
    def busy_reason(self) -> str:
        if self.claimed_by:
            return f"held by {self.claimed_by}"
        return f"{self.memory_used / 1024**3:.1f} GiB in use" if self.memory_used >= BUSY_MEMORY else "free"

    @property
    def node(self) -> int:
        """The minor number of its device node (the index where nvidia-smi does not say)."""
        return self.index if self.minor is None else self.minor


def query_fields_known(help_text: str) -> set[str]:
    """The field names ``nvidia-smi --help-query-gpu`` lists (each on a line of its own, quoted,
    with its aliases: ``"pci.bus_id" or "gpu_bus_id"``)."""
    known: set[str] = set()
    for line in help_text.splitlines():
        if re.fullmatch(r'\s*"[^"]+"(\s+or\s+"[^"]+")*\s*', line):
            known.update(re.findall(r'"([^"]+)"', line))
    return known


def parse_minor_numbers(text: str) -> dict[str, int]:
    """GPU UUID -> minor number, from ``nvidia-smi -q`` lines (only the ``GPU <bus id>``,
    ``GPU UUID`` and ``Minor Number`` lines are needed; other lines are ignored). A GPU whose
    minor number is ``N/A`` is left out."""
    found: dict[str, int] = {}
    uuid = minor = None

    def close() -> None:
        if uuid and minor is not None:
            found[uuid] = minor

    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if re.match(r"^GPU [0-9A-Fa-f]+:", line):   # a new GPU's block (its PCI bus id)
            close()
            uuid = minor = None
        elif sep and key.strip() == "GPU UUID":
            uuid = value.strip()
        elif sep and key.strip() == "Minor Number":
            minor = int(value.strip()) if value.strip().isdigit() else None
    close()
    return found


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """Rows of ``index, uuid, name, memory.total, memory.used`` (MiB), as QUERY prints them; after
    a ``MINOR_MARK`` line (QUERY_DEVICES), ``nvidia-smi -q`` lines that give each GPU's minor number."""
    rows, _, minors_text = text.partition(MINOR_MARK)
    minors = parse_minor_numbers(minors_text)
    gpus = []
    mib = 1024**2
    for line in rows.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(QUERY_FIELDS) or not parts[0].isdigit():
            continue
        try:
            total, used = int(float(parts[3]) * mib), int(float(parts[4]) * mib)
        except ValueError:
            continue
        gpus.append(Gpu(int(parts[0]), parts[1], parts[2], total, used, minor=minors.get(parts[1])))
    return gpus


def node_key(minor: int) -> str:
    return f"/dev/nvidia{minor}"


def claims(containers: Iterable[Any]) -> dict[str, str]:
    """GPU uuid, index or device node (``/dev/nvidiaN``) -> the container name holding it, from
    running containers' device requests (toolkit mode) and devices (devices mode)."""
    held: dict[str, str] = {}
    for c in containers:
        attrs = getattr(c, "attrs", {}) or {}
        hc = attrs.get("HostConfig") or {}
        name = getattr(c, "name", "?")
        for req in hc.get("DeviceRequests") or []:
            for dev in req.get("DeviceIDs") or []:
                held[str(dev)] = name
        for dev in hc.get("Devices") or []:
            m = GPU_NODE.match((dev.get("PathInContainer") or "").rsplit("/", 1)[-1])
            if m:
                held[node_key(int(m.group(1)))] = name
    return held


def with_claims(gpus: list[Gpu], held: dict[str, str]) -> list[Gpu]:
    return [Gpu(g.index, g.uuid, g.name, g.memory_total, g.memory_used,
                held.get(g.uuid) or held.get(str(g.index)) or held.get(node_key(g.node)), g.minor) for g in gpus]


def held_by(container_attrs: dict[str, Any]) -> tuple[str | None, list[str]]:
    """(mode, GPUs) a container holds, as its own configuration says: toolkit uuids or device nodes."""
    hc = container_attrs.get("HostConfig") or {}
    ids = [str(d) for r in hc.get("DeviceRequests") or [] for d in r.get("DeviceIDs") or []]
    if ids or any(r.get("Count") for r in hc.get("DeviceRequests") or []):
        return "toolkit", ids or ["(by count)"]
    nodes = [d.get("PathInContainer", "") for d in hc.get("Devices") or []
             if GPU_NODE.match((d.get("PathInContainer") or "").rsplit("/", 1)[-1])]
    return ("devices", nodes) if nodes else (None, [])
