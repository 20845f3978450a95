"""Shell commands as the audit log holds them: an ``action`` row paired by ``id`` with its
``observation`` row (read by the exporters through ``session_records.SessionRecords.commands``)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Command:
    """One shell command: its ``action`` row and, once it ended, its ``observation`` row."""

    id: str
    action_row: dict[str, Any]
    observation_row: dict[str, Any] | None = None

    @property
    def action(self) -> dict[str, Any]:
        return self.action_row["content"]["action"]

    @property
    def observation(self) -> dict[str, Any]:
        return {} if self.observation_row is None else self.observation_row["content"]["observation"]

    @property
    def kind(self) -> str:
        return str(self.action.get("type", "run_bash"))

    @property
    def command(self) -> str:
        args = self.action.get("args") or {}
        return str(args.get("command", "")) if isinstance(args, dict) else ""

    @property
    def cwd(self) -> str | None:
        return self.observation.get("cwd", self.action.get("cwd"))

    @property
    def started_at(self) -> int:
        return int(self.observation.get("started_at") or self.action.get("started_at") or self.action_row["calledAt"])

    @property
    def ended_at(self) -> int | None:
        end = self.observation.get("ended_at")
        return None if end is None else int(end)

    @property
    def duration_s(self) -> float | None:
        d = self.observation.get("duration_s")
        if d is None and self.ended_at is not None:
            d = (self.ended_at - self.started_at) / 1000
        return d

    @property
    def exit_status(self) -> int | None:
        return self.observation.get("exit_status")

    @property
    def output(self) -> str:
        out = self.observation.get("output")
        return "" if out is None else str(out)

    @property
    def output_bytes(self) -> int | None:
        n = self.observation.get("output_bytes")
        if n is None and self.observation_row is not None:
            n = len(self.output.encode("utf-8"))
        return n

    @property
    def truncated(self) -> bool:
        return bool(self.observation.get("truncated", False))


def pair_commands(rows: list[dict[str, Any]]) -> list[Command]:
    """Actions paired with their observations by ``id``, in the order the actions were recorded.

    An action with no ``id`` pairs with the next observation that has none (the plain
    Vivaria convention: an observation answers the preceding action)."""
    found: list[Command] = []
    by_id: dict[str, int] = {}
    waiting_anonymous: list[int] = []
    for row in rows:
        c = row.get("content", {})
        if c.get("type") == "action":
            cid = c["action"].get("id")
            key = str(cid) if cid is not None else f"trace-{row['index']}"
            by_id[key] = len(found)
            if cid is None:
                waiting_anonymous.append(len(found))
            found.append(Command(key, row))
        elif c.get("type") == "observation":
            oid = c["observation"].get("id")
            at = by_id.get(str(oid)) if oid is not None else (waiting_anonymous.pop(0) if waiting_anonymous else None)
            if at is not None and found[at].observation_row is None:
                found[at] = Command(found[at].id, found[at].action_row, row)
    return found
