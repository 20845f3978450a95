"""Who the participant is. Never from anything the participant typed: the forced command's own
``--participant`` (one authorized key per participant, each with its command), else the user
sudo names (``SUDO_USER``, set by sudo itself, when each participant logs in with their own
account and sudo runs the kiosk as the service account), else the account the kiosk runs as."""

from __future__ import annotations

import os
import pwd
from typing import Mapping

from ...errors import RebenchError


def participant_id(given: str | None, environ: Mapping[str, str], uid: int | None = None) -> str:
    if given:
        return given
    if environ.get("SUDO_USER"):
        return environ["SUDO_USER"]
    try:
        return pwd.getpwuid(os.getuid() if uid is None else uid).pw_name
    except KeyError:
        raise RebenchError("the kiosk cannot tell who is logged in (no --participant, no SUDO_USER, an unnamed account)",
                           fix="the study's researcher gives each participant's forced command --participant ID") from None
