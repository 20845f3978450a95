"""Anchors: the start and reference scores a normalized score is measured between, and where
they come from.

A normalized score is ``(y - start) / (reference - start)``; it is only as true as its two
anchors. Every pair used anywhere carries its provenance (:class:`Anchors`):

- ``published``: METR's figures (``environments/published.toml``, read by :func:`load_published`),
  measured by METR on H100s with METR's models, data and judges;
- ``measured``: figures this project measured and wrote into a manifest (its ``measured`` note
  says how and where);
- ``calibrated``: measured on this host by ``rebench-tui calibrate`` (a calibration file under
  the config folder, :mod:`.calibration`): the starting and the reference solution through the
  real scorer, N times each, with the host's facts;
- ``uncalibrated``: a manifest's placeholder nobody measured;
- ``log`` / ``file``: what a run's own log, or a file named on the command line, says;
- ``recorded``: a session recorded before sessions kept provenance (only the two numbers).

The profile's anchors *in effect* (:func:`anchors_in_effect`) are the ones calibrated here when
a calibration file exists, else the manifest's. A session records the ones it was normalized
with, and ``compare`` normalizes every run by its own.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import RebenchError
from ..scoring import Aggregation, Direction, normalize

if TYPE_CHECKING:
    from .manifest import Environment

PUBLISHED_FILE = "published.toml"
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


# -- published figures ------------------------------------------------------------------------
@dataclass(frozen=True)
class PublishedEnv:
    """One environment's published figures and scoring rule."""

    env_id: str
    family: str
    version: str
    title: str
    direction: Direction
    aggregation: Aggregation
    start: float
    reference: float
    hardware: str
    note: str
    source: dict[str, str]

    def anchors(self) -> Anchors:
        by = self.source.get("by", "METR")
        pub = self.source.get("publication", "")
        arxiv = re.search(r"arXiv:\S+?(?=\)|$|\s)", pub)
        short = (pub.split(":", 1)[0] + " paper" + (f", {arxiv.group(0)}" if arxiv else "")) if pub else "the RE-Bench paper"
        return Anchors(self.start, self.reference, "published",
                       f"published by {by} ({short}); measured on {self.hardware}",
                       {"by": by, "publication": pub, "hardware": self.hardware,
                        "hardware_family": self.source.get("hardware", ""), "note": self.note,
                        "env_id": self.env_id, "family": self.family, "version": self.version})


@dataclass(frozen=True)
class Published:
    """The table of published figures, by environment id."""

    path: Path
    source: dict[str, str]
    envs: dict[str, PublishedEnv]

    def get(self, env_id: str) -> PublishedEnv | None:
        return self.envs.get(env_id)


_ENV_FIELDS = {"family": str, "version": str, "title": str, "direction": str, "aggregation": str, "start": (int, float),
               "reference": (int, float), "hardware": str, "note": str}


def load_published(path: Path) -> tuple[Published | None, list[tuple[str, str]]]:
    """Read the published table; returns it (None if unreadable) and every problem as (field, message)."""
    problems: list[tuple[str, str]] = []
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None, [("", "missing: the published start/reference figures live here")]
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        return None, [("", f"cannot be read: {exc}")]
    source = data.get("source") if isinstance(data.get("source"), dict) else {}
    source = {str(k): str(v) for k, v in source.items()}
    envs: dict[str, PublishedEnv] = {}
    table = data.get("environments")
    if not isinstance(table, dict) or not table:
        return None, [("environments", "no [environments.<id>] tables")]
    for env_id, row in table.items():
        where = f"environments.{env_id}"
        if not isinstance(row, dict):
            problems.append((where, "must be a table"))
            continue
        bad = [k for k, t in _ENV_FIELDS.items() if not isinstance(row.get(k), t) or isinstance(row.get(k), bool)]
        extra = sorted(set(row) - set(_ENV_FIELDS))
        if extra:
            problems.append((where, f"unknown field(s) {extra} (a typo?)"))
        if bad:
            problems.append((where, f"missing or mistyped: {', '.join(bad)}"))
            continue
        try:
            direction, aggregation = Direction(row["direction"]), Aggregation(row["aggregation"])
        except ValueError as exc:
            problems.append((where, str(exc)))
            continue
        start, ref = float(row["start"]), float(row["reference"])
        if not (math.isfinite(start) and math.isfinite(ref)) or start == ref:
            problems.append((where, "start and reference must be finite and differ"))
            continue
        envs[env_id] = PublishedEnv(env_id, row["family"], row["version"], row["title"], direction, aggregation,
                                    start, ref, row["hardware"], row["note"], source)
    return Published(path, source, envs), problems


# -- a profile's anchors ----------------------------------------------------------------------
def manifest_anchors(env: "Environment", profile: str) -> Anchors:
    """The anchors a profile's manifest gives, with their provenance."""
    p = env.profile(profile)
    common = {"env_id": env.id, "profile": profile, "env_version": env.manifest.version,
              "manifest": str(env.path / "environment.toml")}
    if p.anchors == "published":
        pub = env.published
        if pub is not None and abs(pub.start - p.start_score) < SAME and abs(pub.reference - p.reference_score) < SAME:
            a = pub.anchors()
            return Anchors(p.start_score, p.reference_score, "published", a.summary,
                           {**a.provenance, **common, "measured": p.measured})
        # the catalog reports this as a problem; here the figures are taken as the manifest's own
    if p.anchors == "uncalibrated":
        return Anchors(p.start_score, p.reference_score, "uncalibrated",
                       "uncalibrated: placeholder figures nobody measured (run `rebench-tui calibrate`)",
                       {**common, "measured": p.measured})
    return Anchors(p.start_score, p.reference_score, "measured",
                   "measured by this project (the manifest's `measured` note says how and where)",
                   {**common, "measured": p.measured})


def anchors_in_effect(env: "Environment", profile: str, config_dir: Path | None) -> Anchors:
    """The anchors a new session of ``env``/``profile`` is normalized with here: calibrated on this
    host when a calibration file exists (see :mod:`.calibration`), else the manifest's.

    An unreadable calibration file is an error (naming it), not silently passed over."""
    if config_dir is not None:
        from .calibration import calibration_path, load_calibration

        path = calibration_path(config_dir, env.id, profile)
        if path.is_file():
            cal = load_calibration(path)
            if (cal.env_id, cal.profile) != (env.id, profile):
                raise AnchorsError(f"the calibration file {path} is for {cal.env_id}/{cal.profile}, not {env.id}/{profile}",
                                   fix=f"remove {path}, then run `rebench-tui calibrate {env.id} --profile {profile}`")
            return cal.anchors(env, path)
    return manifest_anchors(env, profile)
