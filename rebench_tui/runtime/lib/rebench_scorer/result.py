"""The scorer's result channel.

The supervisor gives the scorer ``REBENCH_RESULT_FD``, a descriptor of an unlinked file only root
can reach, and reads it back after the scorer ends: that is the only result the workstation
accepts. Importing this module takes the descriptor out of the environment and marks it
close-on-exec, so nothing the scorer starts (the participant's process above all) inherits it.

``emit`` also prints the result line on stdout, for a person running the scorer by hand; the
workstation never reads a result from stdout.
"""

from __future__ import annotations

import json
import math
import os
import sys
from typing import Any

FD_VARIABLE = "REBENCH_RESULT_FD"


def _claim() -> int | None:
    value = os.environ.pop(FD_VARIABLE, None)
    if value is None or not value.isdigit():
        return None
    fd = int(value)
    try:
        os.set_inheritable(fd, False)
    except OSError:
        return None
    return fd


_FD = _claim()


def channel_open() -> bool:
    """Whether this scorer was started with a result channel (by the workstation's supervisor)."""
    return _FD is not None


def _plain(score: float | None) -> float | str:
    if score is None or not isinstance(score, (int, float)) or not math.isfinite(score):
        return "NaN"
    return float(score)


def line(score: float | None, message: dict[str, Any], details: dict[str, Any] | None = None) -> str:
    return json.dumps({"score": _plain(score), "message": message, "details": details or {}}, default=str)


def _scorer_digest() -> str | None:
    try:
        from .identity import digest

        main = sys.modules.get("__main__")
        path = getattr(main, "__file__", None) or (sys.argv[0] if sys.argv else "")
        return digest(os.path.dirname(os.path.abspath(path))) if path else None
    except OSError:
        return None


def emit(score: float | None, message: dict[str, Any], details: dict[str, Any] | None = None) -> None:
    """Write the result: into the result channel (what counts) and on stdout (for people). The
    details get ``scorer_sha256``, the digest of the scorer's own files (see :mod:`identity`)."""
    details = dict(details or {})
    details.setdefault("scorer_sha256", _scorer_digest())
    text = line(score, message, details)
    if _FD is not None:
        data = (text + "\n").encode()
        while data:
            data = data[os.write(_FD, data):]
    sys.stdout.write(text + "\n")
    sys.stdout.flush()
