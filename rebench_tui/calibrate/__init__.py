"""``rebench-tui calibrate``: measure a profile's anchors on this host.

The starting solution and the reference solution go through the real scorer in the real sandbox
(a container, or the local runtime on a GPU host without Docker), ``runs`` times each, in one
session kept under the cache folder (``calibration-sessions/``; its audit log holds every
scoring). Where the reference is files only, the two take turns (start, reference, start, ...)
so that a change in the machine's load falls on both; where a command builds it (a training
run), every start scoring comes first. How the reference is put in place is data in the manifest (``[profiles.<p>.calibration]``:
repository files copied into the home, then an optional command run as the participant), so
nothing here knows any environment. The medians become the anchors, written with each run's raw
score, their spread and the host's facts (GPU model, count and driver, image id, package
versions, scorer digest, prepared assets, date, rebench-tui version, git commit) to
``<config>/calibration/<env>/<profile>.json`` (:mod:`rebench_tui.catalog.calibration`).

The steps live in their own modules: :mod:`.command` (the whole calibration), :mod:`.solutions`
(putting a solution in place), :mod:`.measure` (the probe and the scorings), :mod:`.record` (the
file's record of the host) and :mod:`.outcome` (what comes back); their names are importable
from this package.
"""

from __future__ import annotations

from .command import SESSIONS, calibrate, calibration_secrets
from .measure import PROBE, probe, score_both
from .outcome import CalibrationError, Outcome, Progress, drift_lines
from .record import calibration_record, previous_calibration
from .solutions import closed_to, copy_setup_files, give_home, put_in_place

__all__ = [
    "PROBE", "SESSIONS", "CalibrationError", "Outcome", "Progress", "calibrate", "calibration_record", "calibration_secrets",
    "closed_to", "copy_setup_files", "drift_lines", "give_home", "previous_calibration", "probe", "put_in_place",
    "score_both",
]
