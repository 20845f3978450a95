"""What a calibration gives back: its :class:`Outcome` (the file written, the one it replaced,
where the manifest's figures drift from the medians), the :class:`CalibrationError` every step
raises, and the progress callback type they all take."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..catalog.calibration import Calibration
from ..errors import RebenchError

Progress = Callable[[str], None]


class CalibrationError(RebenchError):
    """A calibration that could not run or did not give usable anchors."""


@dataclass
class Outcome:
    calibration: Calibration
    path: Path
    previous: Calibration | None  # the file this one replaced, if any
    manifest_start: float
    manifest_reference: float

    def drift(self) -> list[str]:
        """Where the manifest's figures lie outside the profile's tolerance of these medians."""
        return drift_lines(self.calibration, self.manifest_start, self.manifest_reference, self.tolerance)

    tolerance: tuple[float, float] | None = None


def drift_lines(cal: Calibration, start: float, reference: float, tolerance: tuple[float, float] | None) -> list[str]:
    if tolerance is None:
        return []
    out = []
    for side, figure, runs, tol in (("start", start, cal.start, tolerance[0]), ("reference", reference, cal.reference, tolerance[1])):
        if abs(figure - runs.median) > tol:
            out.append(f"the manifest's {side} {figure:g} is {abs(figure - runs.median):.3g} from the calibrated median "
                       f"{runs.median:.6g} (tolerance {tol:g})")
    return out
