"""Which GPUs an engine has, and which of them are free.

The inventory comes from ``nvidia-smi`` run in a throwaway container with every GPU (the NVIDIA
runtime mounts the tool in), so it is what containers will see, on a local or a remote engine.
A GPU counts as busy when a running rebench container holds it (sessions ask for GPUs by id, so
the claim is in the container's device requests) or when something else already uses memory on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

QUERY = ["nvidia-smi", "--query-gpu=index,uuid,name,memory.total,memory.used", "--format=csv,noheader,nounits"]
BUSY_MEMORY = 1024**3   # more than this in use by something else: the GPU is not free


@dataclass(frozen=True)
class Gpu:
    index: int
    uuid: str
    name: str
    memory_total: int
    memory_used: int
    claimed_by: str | None = None

    @property
    def free(self) -> bool:
        return self.claimed_by is None and self.memory_used < BUSY_MEMORY

    @property
    def busy_reason(self) -> str:
        if self.claimed_by:
            return f"held by {self.claimed_by}"
        return f"{self.memory_used / 1024**3:.1f} GiB in use" if self.memory_used >= BUSY_MEMORY else "free"


def parse_nvidia_smi(text: str) -> list[Gpu]:
    """Rows of ``index, uuid, name, memory.total, memory.used`` (MiB), as QUERY prints them."""
    gpus = []
    for line in text.splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != 5 or not parts[0].isdigit():
            continue
        mib = 1024**2
        gpus.append(Gpu(int(parts[0]), parts[1], parts[2], int(float(parts[3]) * mib), int(float(parts[4]) * mib)))
    return gpus


def claims(containers: Iterable[Any]) -> dict[str, str]:
    """GPU index or uuid -> the container name holding it, from running containers' device requests."""
    held: dict[str, str] = {}
    for c in containers:
        attrs = getattr(c, "attrs", {}) or {}
        for req in (attrs.get("HostConfig") or {}).get("DeviceRequests") or []:
            for dev in req.get("DeviceIDs") or []:
                held[str(dev)] = getattr(c, "name", "?")
    return held


def with_claims(gpus: list[Gpu], held: dict[str, str]) -> list[Gpu]:
    return [Gpu(g.index, g.uuid, g.name, g.memory_total, g.memory_used, held.get(g.uuid) or held.get(str(g.index))) for g in gpus]
