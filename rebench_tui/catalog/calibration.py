"""Calibration files: anchors measured on this host by ``rebench-tui calibrate``.

``<config>/calibration/<env>/<profile>.json`` (``~/.config/rebench-tui/calibration/...``) holds
one calibration: every run's raw score for the starting and the reference solution, their
medians (the anchors) and spread, and the facts of the setting they were measured in (GPU model
and count, driver, image id, package versions, scorer digest, prepared assets, date,
rebench-tui version and git commit). It is written whole or not at all (a temporary file renamed
into place), so a calibration that fails leaves the previous one as it was.
"""

from __future__ import annotations

import math
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..safe_write import write_json
from .anchor_pair import Anchors, AnchorsError

if TYPE_CHECKING:
    from .manifest import Environment

SCHEMA_VERSION = 1
FOLDER = "calibration"


def calibration_path(config_dir: Path, env_id: str, profile: str) -> Path:
    return Path(config_dir) / FOLDER / env_id / f"{profile}.json"


class SolutionRuns(BaseModel):
    """One solution's runs: each raw score in order, and what they add up to."""

    model_config = ConfigDict(extra="allow")

    scores: list[float]
    durations_s: list[float] = Field(default_factory=list)
    median: float
    low: float
    high: float
    spread: float  # high - low
    sd: float | None = None  # sample standard deviation (None for one run)
    setup: dict[str, Any] = Field(default_factory=dict)  # what was done before scoring (files, command, its time)
    messages: list[dict[str, Any]] = Field(default_factory=list)  # each run's scorer message, as shown

    @classmethod
    def of(cls, scores: list[float], durations_s: list[float] | None = None, **extra: Any) -> "SolutionRuns":
        if not scores or not all(math.isfinite(s) for s in scores):
            raise AnchorsError(f"a calibration needs finite scores, got {scores}")
        return cls(scores=list(scores), durations_s=list(durations_s or []), median=statistics.median(scores),
                   low=min(scores), high=max(scores), spread=max(scores) - min(scores),
                   sd=statistics.stdev(scores) if len(scores) > 1 else None, **extra)

    def within(self, score: float, tolerance: float = 0.0) -> bool:
        """Whether ``score`` lies in the runs' range widened by ``tolerance`` on both sides."""
        return math.isfinite(score) and self.low - tolerance <= score <= self.high + tolerance


class Calibration(BaseModel):
    """One calibration of one environment profile on one host."""

    model_config = ConfigDict(extra="allow")

    schema_version: int = SCHEMA_VERSION
    env_id: str
    profile: str
    env_version: str
    task_id: str
    direction: str
    runs: int
    start: SolutionRuns
    reference: SolutionRuns
    date: str  # ISO 8601, UTC, when the calibration finished
    duration_s: float
    host: dict[str, Any] = Field(default_factory=dict)  # hostname, runtime, engine, isolation, CPU
    gpus: list[dict[str, Any]] = Field(default_factory=list)  # name, driver, memory of each GPU the sandbox sees
    image: dict[str, Any] | None = None  # tag and id (digest) of the image scored in; None: local runtime
    packages: dict[str, str] = Field(default_factory=dict)  # the sandbox's Python packages (name -> version)
    scorer_reported: dict[str, Any] = Field(default_factory=dict)  # versions the scorer put in its details
    scorer_sha256: str  # the digest of the environment's protected/ folder as catalogued here
    scorer_sha256_reported: str | None = None  # the digest the scorer reported over its own files
    assets: dict[str, Any] | None = None  # the prepared assets scored against (folder, sha256 of MANIFEST.json)
    rebench_tui: str
    git: dict[str, Any] = Field(default_factory=dict)  # commit and whether the environment folder had changes
    manifest: dict[str, Any] = Field(default_factory=dict)  # the manifest's figures and their kind at the time
    session: str | None = None  # the calibration session's folder (its audit log has every scoring)

    @property
    def gpu_summary(self) -> str:
        if not self.gpus:
            return "no GPU"
        names: dict[str, int] = {}
        for g in self.gpus:
            names[str(g.get("name") or "GPU")] = names.get(str(g.get("name") or "GPU"), 0) + 1
        driver = self.gpus[0].get("driver")
        return ", ".join(f"{n} x {name}" for name, n in names.items()) + (f" (driver {driver})" if driver else "")

    def stale_reasons(self, env: "Environment") -> list[str]:
        """Why these anchors may no longer describe the environment as it is here."""
        out = []
        if self.scorer_sha256 != env.scorer_sha256:
            out.append("the scorer (protected/) changed since this calibration")
        if self.env_version != env.manifest.version:
            out.append(f"the environment's version is now {env.manifest.version} (calibrated at {self.env_version})")
        return out

    def anchors(self, env: "Environment | None" = None, path: Path | None = None) -> Anchors:
        """These anchors with their provenance (everything here but each run's message)."""
        record = self.model_dump(mode="json")
        for side in ("start", "reference"):
            record[side].pop("messages", None)
        stale = self.stale_reasons(env) if env is not None else []
        record["stale"] = stale
        if path is not None:
            record["file"] = str(path)
        host = self.host.get("hostname") or "this host"
        where = f"{self.host.get('runtime', '?')} runtime" + (f", image {self._image_short}" if self.image else "")
        summary = (f"calibrated on {host} {self.date[:10]}: {self.runs} run(s) each, start {self.start.low:.4g}–"
                   f"{self.start.high:.4g}, reference {self.reference.low:.4g}–{self.reference.high:.4g}; "
                   f"{self.gpu_summary}; {where}")
        if stale:
            summary += " — STALE: " + "; ".join(stale)
        return Anchors(self.start.median, self.reference.median, "calibrated", summary, record)

    @property
    def _image_short(self) -> str:
        img = self.image or {}
        ident = str(img.get("id") or "")
        return f"{img.get('tag', '?')} ({ident.removeprefix('sha256:')[:12]})" if ident else str(img.get("tag", "?"))

    def save(self, path: Path) -> Path:
        """Write atomically: the file is whole or absent (an earlier one stays until the rename)."""
        path.parent.mkdir(parents=True, exist_ok=True)
        return write_json(path, self.model_dump(mode="json"), durable=True, indent=2)


def load_calibration(path: Path) -> Calibration:
    """Read a calibration file; raises :class:`AnchorsError` naming the file and what to do."""
    try:
        cal = Calibration.model_validate_json(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise AnchorsError(f"the calibration file {path} cannot be read: {exc}",
                           fix=f"run `rebench-tui calibrate` again, or remove {path} to use the manifest's anchors") from None
    except ValidationError as exc:
        raise AnchorsError(f"the calibration file {path} is not a calibration: {str(exc).splitlines()[0]}",
                           fix=f"run `rebench-tui calibrate` again, or remove {path} to use the manifest's anchors") from None
    if cal.start.median == cal.reference.median:
        raise AnchorsError(f"the calibration file {path} has equal start and reference medians",
                           fix="run `rebench-tui calibrate` again")
    return cal


def read_calibration_anchors(path: Path, env: "Environment | None" = None) -> Anchors:
    return load_calibration(path).anchors(env, path)
