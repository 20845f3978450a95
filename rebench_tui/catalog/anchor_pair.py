"""The anchor pair: a start and a reference score, where they come from (:class:`Anchors`), and
the GPU they were measured on.

What the kinds of provenance mean, and which pair a profile uses, is in :mod:`.anchors`; METR's
published figures are read by :mod:`.published`.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import RebenchError
from ..scoring import normalize

KINDS = ("published", "measured", "calibrated", "uncalibrated", "log", "file", "recorded")
# Figures that differ by less than this are the same figure (TOML floats round-trip exactly; this
# only forgives a figure written as 0.470000000001).
SAME = 1e-9


class AnchorsError(RebenchError):
    """Anchors that cannot be read or used."""


@dataclass(frozen=True)
class Anchors:
    """A start and a reference score, and where they come from.

    ``summary`` is one line for a screen ("published by METR (RE-Bench paper), NVIDIA H100");
    ``provenance`` holds everything known, as plain JSON (recorded in session.json and the
    first audit row, carried by the exports)."""

    start: float
    reference: float
    kind: str
    summary: str
    provenance: dict[str, Any] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        if not (math.isfinite(self.start) and math.isfinite(self.reference)):
            raise AnchorsError(f"anchors must be finite numbers, not start {self.start!r}, reference {self.reference!r}")
        if self.start == self.reference:
            raise AnchorsError(f"start and reference anchors are both {self.start!r}: normalization divides by their difference")

    def normalize(self, score: float) -> float:
        return normalize(score, self.start, self.reference)

    @property
    def tag(self) -> str:
        """A few words for a table cell: the kind, and for published figures whose."""
        if self.kind == "published":
            by = self.provenance.get("by") or "METR"
            hw = self.provenance.get("hardware_family") or ""
            return f"published ({by}{', ' + hw if hw else ''})"
        if self.kind == "calibrated":
            date = str(self.provenance.get("date") or "")[:10]
            return f"calibrated {date}".strip()
        return {"measured": "measured by the project", "uncalibrated": "uncalibrated", "log": "from the run's log",
                "file": "from a file", "recorded": "recorded (no provenance)"}.get(self.kind, self.kind)

    def same_figures(self, other: "Anchors") -> bool:
        return abs(self.start - other.start) < SAME and abs(self.reference - other.reference) < SAME

    def key(self) -> tuple[str, float, float]:
        """What makes two runs' normalizations comparable: the same kind and the same figures."""
        return (self.kind, round(self.start, 9), round(self.reference, 9))

    def to_record(self) -> dict[str, Any]:
        """Plain JSON for session.json, audit rows and exports."""
        return {"start": self.start, "reference": self.reference, "kind": self.kind, "summary": self.summary,
                "provenance": self.provenance}

    @classmethod
    def from_record(cls, data: Any, *, fallback: tuple[float, float] | None = None) -> "Anchors":
        """Anchors from :meth:`to_record`'s shape. Without one (older records), ``fallback``'s two
        numbers as ``recorded``."""
        if isinstance(data, dict) and "start" in data and "reference" in data:
            try:
                return cls(float(data["start"]), float(data["reference"]), str(data.get("kind") or "recorded"),
                           str(data.get("summary") or ""), dict(data.get("provenance") or {}))
            except (TypeError, ValueError) as exc:
                raise AnchorsError(f"recorded anchors do not read: {exc}") from None
        if fallback is None:
            raise AnchorsError("no anchors recorded")
        return cls(float(fallback[0]), float(fallback[1]), "recorded",
                   "recorded before sessions kept where their anchors came from")


# -- the GPU under the anchors ---------------------------------------------------------------
# GPU models as their names appear in nvidia-smi, manifests' measured notes and published hardware.
GPU_NAME = re.compile(r"\b(GB200|B200|H200|H100|A100|A10G?|L40S?|L4|V100|T4|RTX ?\d{4})\b")


def gpu_model(text: str) -> str | None:
    """The GPU model a text names first ("NVIDIA H100 80GB HBM3" -> "H100"), None if it names none."""
    m = GPU_NAME.search(text or "")
    return m.group(1).replace(" ", "") if m else None


def anchors_gpu(anchors: Anchors) -> str | None:
    """The GPU model the anchors were measured on, as far as their provenance says: a calibration's
    first GPU, else the first GPU its note, hardware or published source names; None where it names none."""
    p = anchors.provenance or {}
    gpus = p.get("gpus")
    if isinstance(gpus, list) and gpus:
        first = gpus[0]
        return gpu_model(str(first.get("name", "")) if isinstance(first, dict) else str(first))
    return gpu_model(" ".join(str(p.get(k) or "") for k in ("measured", "hardware", "hardware_family")))


def gpu_differs(anchors: Anchors, gpu_names: list[str], env_id: str, profile: str) -> str | None:
    """One line where the GPUs a session would run on are not the model its anchors were measured
    on (a timed score moves with the GPU, and every normalized score with it), offering to
    calibrate; None where they match, or where either side names no model."""
    under = anchors_gpu(anchors)
    here = sorted({m for m in (gpu_model(n) for n in gpu_names) if m})
    if under is None or not here or here == [under]:
        return None
    return (f"{env_id} ({profile}) is normalized by anchors measured on an {under}, but this host's GPUs are "
            f"{', '.join(here)}: a timed score differs from GPU to GPU, so normalized scores here are not on that "
            f"scale. `rebench-tui calibrate {env_id} --profile {profile}` measures this host's anchors "
            "(the start and reference solutions through the real scorer, a few minutes)")
