"""METR's published figures (``environments/published.toml``): each environment's start and
reference scores, its scoring rule and the hardware they were measured on, as :class:`Anchors`.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..scoring import Aggregation, Direction
from .anchor_pair import Anchors

PUBLISHED_FILE = "published.toml"


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
