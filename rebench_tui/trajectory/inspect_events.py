"""The events of an Inspect sample, built from a session's audit rows: clock start/stop
``InfoEvent``s, intermediate and final ``ScoreEvent``s, a ``ToolEvent`` per shell command, a
``SandboxEvent`` per file change, notes and every other record as ``InfoEvent``s, in timestamp
order (:mod:`.export_inspect` says what each carries). The Inspect classes come in as a dict, so
this module never imports Inspect itself."""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, datetime
from typing import Any, Literal

from ..clock import format_hms
from .session_records import Command, SessionRecords, log_parts

SCORER = "rebench_score"
INPUT_LINES = 100  # Inspect cuts a SandboxEvent's input to this many lines


def utc_datetime(ms: int | float) -> datetime:
    """A record's epoch milliseconds as an aware UTC datetime."""
    return datetime.fromtimestamp(ms / 1000, UTC)


def stable_id(*parts: Any) -> str:
    """A deterministic 22-character id (the length of Inspect's shortuuids): re-exports are identical."""
    return hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()[:22]


def _cut_lines(text: str | None, n: int = INPUT_LINES) -> str | None:
    if text is None or text.count("\n") < n:  # short enough: most diffs (no split needed)
        return text
    lines = text.splitlines(keepends=True)
    return text if len(lines) <= n else "".join(lines[:n]) + f"... ({len(lines) - n} more lines in metadata.diff)\n"


def finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


class EventBuilder:
    """A sample's events, one audit row at a time (:meth:`build_events`); also the counting
    score and each scoring as Inspect ``Score`` objects."""

    def __init__(self, rec: SessionRecords, ia: dict[str, Any]) -> None:
        self.rec = rec
        self.ia = ia
        self.events: list[Any] = []
        self.running = False
        self.final_done = False
        self.by_action = {id(c.action_row): c for c in rec.commands}
        self.session_id, self.started_at = rec.session_id, rec.started_at  # read once per event otherwise

    # -- helpers ---------------------------------------------------------------------------
    def meta(self, row: dict[str, Any], **extra: Any) -> dict[str, Any]:
        """Every event's metadata: pause-excluded working seconds and the audit row's index."""
        return {"working_time": self.rec.working_s(row), "trace_index": row["index"], **extra}

    def common(self, row: dict[str, Any], at_ms: int | None = None, tag: str = "", **meta: Any) -> dict[str, Any]:
        at = int(row["calledAt"]) if at_ms is None else at_ms
        return {
            "uuid": stable_id(self.session_id, row["index"], tag),
            "timestamp": utc_datetime(at),
            "working_start": max(0.0, (at - self.started_at) / 1000),
            "metadata": self.meta(row, **meta),
        }

    def score(self, s: Any) -> Any:
        return self.ia["Score"](value=s.value, explanation=json.dumps(s.message, ensure_ascii=False), metadata=dict(s.details))

    def clock(self, row: dict[str, Any], action: Literal["start", "stop"], **extra: Any) -> None:
        self.running = action == "start"
        self.events.append(self.ia["InfoEvent"](
            source="human_agent", data={"action": action, "total_time": format_hms(self.rec.working_s(row))},
            **self.common(row, tag=f"clock-{action}", **extra)))

    def info(self, row: dict[str, Any], data: dict[str, Any], source: str = "rebench_tui", tag: str = "") -> None:
        self.events.append(self.ia["InfoEvent"](source=source, data=data, **self.common(row, tag=tag)))

    # -- rows --------------------------------------------------------------------------------
    def log_row(self, row: dict[str, Any]) -> None:
        title, text, payload = log_parts(row)
        event = payload.get("event")
        if title == "clock" and event in ("pause", "resume"):
            action: Literal["start", "stop"] = "stop" if event == "pause" else "start"
            if (action == "start") != self.running:
                self.clock(row, action, reason=payload.get("reason"))
            return
        if title == "note" or event == "note":
            self.info(row, {"note": payload.get("note", text)}, source="human_agent")
            return
        if title == "file":
            self.file_row(row, text, payload)
            return
        if title == "command" and event != "command_gap" and str(payload.get("id")) in self.rec.command_ids:
            return  # the ToolEvent of its action holds the same command and output
        data = {"title": title, "text": text, **payload}
        if event == "session_finished":
            self.info(row, data)
            if self.rec.finished:
                self.final(row)
            if self.running:
                self.clock(row, "stop")
            return
        self.info(row, data)
        if event == "session_started":
            self.clock(row, "start")
        elif event == "session_resumed" and payload.get("clock_running") is not None and bool(payload["clock_running"]) != self.running:
            self.clock(row, "start" if payload["clock_running"] else "stop")

    def file_row(self, row: dict[str, Any], text: str, p: dict[str, Any]) -> None:
        kind = p.get("event", "modified")
        path = p.get("dest") if kind == "moved" and p.get("dest") else p.get("path")
        diff = p.get("diff")
        body = diff if diff is not None else (text or f"{kind} {p.get('path')}")
        extra = {"file_event": kind, "path": p.get("path"), "summary": text}
        for k in ("dest", "size", "sha256", "diff", "diff_truncated", "events", "note"):
            if p.get(k) is not None:
                extra[k] = p[k]
        self.events.append(self.ia["SandboxEvent"](action="write_file", file=path, input=_cut_lines(body),
                                                   **self.common(row, tag="file", **extra)))

    def tool(self, c: Command) -> None:
        row = c.action_row
        args = c.action.get("args") if isinstance(c.action.get("args"), dict) else {}
        function = "bash" if c.kind == "run_bash" else c.kind
        arguments = {"command": c.command} if c.kind == "run_bash" else dict(args)
        extra: dict[str, Any] = {"cwd": c.cwd, "exit_status": c.exit_status, "output_bytes": c.output_bytes,
                                 "truncated": c.truncated, "command_id": c.id}
        if c.observation.get("notes"):
            extra["notes"] = c.observation["notes"]
        if c.observation_row is not None:
            extra["observation_trace_index"] = c.observation_row["index"]
            extra["working_time_end"] = self.rec.working_s(c.observation_row)
        else:
            extra["no_observation"] = True  # still running when the record ends, or its result was lost
        kwargs = self.common(row, at_ms=c.started_at, tag="tool", **extra)
        truncated = None
        if c.truncated and c.output_bytes is not None:
            truncated = (int(c.output_bytes), len(c.output.encode("utf-8")))
        self.events.append(self.ia["ToolEvent"](
            id=c.id, function=function, arguments=arguments, result=c.output, truncated=truncated,
            completed=None if c.ended_at is None else utc_datetime(c.ended_at), working_time=c.duration_s, **kwargs))

    def final(self, row: dict[str, Any]) -> None:
        s = self.final_score()
        if s is None or self.final_done:
            return
        self.final_done = True
        fc = self.rec.counting
        self.events.append(self.ia["ScoreEvent"](
            score=s, target="", intermediate=False, scorer=SCORER,
            **self.common(row, tag="final-score", final_attempt=None if fc is None else fc.representative,
                          final_scorings=None if fc is None else list(fc.scorings),
                          normalized_score=None if fc is None else finite_or_none(fc.normalized),
                          aggregation=self.rec.meta.aggregation)))

    def final_score(self) -> Any | None:
        """The counting score (the median of the counting attempt's re-scores); its explanation and
        metadata are those of the scoring that stands for the attempt, plus ``counting``."""
        if not self.rec.finished:
            return None
        fc = self.rec.counting
        Score = self.ia["Score"]
        if fc is None:
            return Score(value=math.nan, answer=self.rec.submission,
                         explanation=json.dumps({"error": "no valid scoring"}), reason="scoring_failed")
        fs = self.rec.scorings[fc.representative - 1]
        counting = {"attempt": fc.attempt, "scorings": list(fc.scorings), "n": fc.n, "median": fc.score,
                    "low": fc.low, "high": fc.high}
        return Score(value=fc.score, answer=self.rec.submission,
                     explanation=json.dumps(fs.message, ensure_ascii=False), metadata={**fs.details, "counting": counting})

    def build_events(self) -> list[Any]:
        rec = self.rec
        by_row = {id(s.row): s for s in rec.scorings}
        for row in rec.rows:
            c = row.get("content", {})
            kind = c.get("type")
            if kind == "log":
                self.log_row(row)
            elif kind == "intermediateScore":
                s = by_row[id(row)]
                self.events.append(self.ia["ScoreEvent"](
                    score=self.score(s), target="", intermediate=True, scorer=SCORER,
                    **self.common(row, tag="score", attempt=s.attempt, vivaria_score=s.raw,
                                  normalized_score=finite_or_none(s.normalized), elapsed_ms=s.elapsed_ms)))
            elif kind == "action":
                self.tool(self.by_action[id(row)])
            elif kind == "observation":
                if int(row["index"]) not in rec.paired_observations:
                    self.info(row, {"event": "observation", **c["observation"]})
            elif kind == "submission":
                self.info(row, {"event": "submission", "value": c.get("value")})
            elif kind == "error":
                self.info(row, {"event": "error", **{k: v for k, v in c.items() if k != "type"}})
            else:
                self.info(row, {"event": kind, **{k: v for k, v in c.items() if k != "type"}})
        if rec.finished and not self.final_done and rec.rows:  # finished, but the finish row was never written
            self.final(rec.rows[-1])
        # In timestamp order: a command's rows are written when it ends, but its ToolEvent carries
        # the time it started, before the file changes and scorings made while it ran. The sort is
        # stable, so events of one moment keep the audit log's order.
        self.events.sort(key=_timestamp)
        return self.events


def _timestamp(event: Any) -> datetime:
    return event.timestamp
