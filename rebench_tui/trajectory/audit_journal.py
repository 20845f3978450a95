"""The audit log's side journal (``<log>.pending``), as an opening finds it: which of its rows the
chain can check and takes in, and where the rest are kept aside. The log's writer that keeps the
journal is :mod:`rebench_tui.trajectory.audit`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .entries import log_event


def unannounced(rows: list[dict[str, Any]], held: set[int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Split a side journal found at an open: results only at a held reservation's time, no
    scoring start rows (they are written before the reservation, never behind it)."""
    keep, refused = [], []
    for r in rows:
        content = r.get("content") if isinstance(r.get("content"), dict) else {}
        facts = log_event(content) or {}
        if (content.get("type") == "intermediateScore" and int(r.get("calledAt", -1)) not in held) \
                or facts.get("event") == "scoring_started":
            refused.append(r)
        else:
            keep.append(r)
    return keep, refused


def aside_path(path: Path) -> Path:
    """A new name beside the journal for the rows an opening did not take."""
    n = 1
    while path.with_name(f"{path.name}.refused-{n}").exists():
        n += 1
    return path.with_name(f"{path.name}.refused-{n}")
