"""Study (several participants, one collector): `study`, `collector`, `kiosk`. The commands live
with the study package; this is the group's one place in the command line."""

from __future__ import annotations

from ..study.commands import collector, study
from ..study.kiosk.command import kiosk

__all__ = ["collector", "kiosk", "study"]
