"""A read-only view of one session folder, shared by the exporters.

Reads ``session.json``, ``audit.jsonl`` (plus rows still waiting in ``audit.jsonl.pending``
after a crash) and the workspace's ``instructions.txt``, and derives what every export needs:
the scorings with their working time, the shell commands (an ``action`` row paired by ``id``
with its ``observation`` row: ``shell_commands``), and each row's pause-excluded working time.
Hidden scores sealed to a researcher's key (``sealing``) are opened where that key is set, and
stay sealed (``sealed`` counts them, a warning says so) where it is not. Nothing here writes to
the session folder, so exporting a session that is open in the app is safe.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

import pydantic_core

from ..errors import RebenchError
from ..scoring import Attempt, attempt_fingerprint, is_recount, normalize
from .records import AUDIT, META, WORKSPACE, CountingScore, SessionMeta
from .rules import RulesError, restore_rules
from .sealing import is_sealed, open_record, sealed_note
from .shell_commands import Command, pair_commands

__all__ = ["AUDIT", "Command", "Scoring", "SessionRecords", "log_parts", "read_rows", "score_value"]

INSTRUCTIONS = f"{WORKSPACE}/instructions.txt"


def score_value(raw: Any) -> float:
    """An audit-log score as a float: null and "NaN" are NaN, "Infinity"/"-Infinity" are infinite."""
    if raw is None:
        return math.nan
    return float(raw)  # float() reads "NaN", "Infinity", "-Infinity" as well as numbers


def read_rows(folder: Path) -> tuple[list[dict[str, Any]], list[str]]:
    """Every audit row (plus any still in the side journal), and warnings about what was skipped.

    An incomplete last line (the app was writing it, or a crash cut it) is skipped with a
    warning; any other unreadable line is an error, since an export must not hide a damaged record.
    """
    path = folder / AUDIT
    warnings: list[str] = []
    rows: list[dict[str, Any]] = []
    if not path.is_file():
        raise RebenchError(f"{folder.name} has no {AUDIT}", fix="is this a session folder? `rebench-tui sessions` lists them")
    raw = path.read_bytes()
    lines = raw.split(b"\n")
    for n, bline in enumerate(lines, start=1):
        if not bline.strip():
            continue
        last = n == len(lines)  # no newline after it
        try:
            row = _parse_line(bline)
            if not isinstance(row, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            if last:
                warnings.append(f"{AUDIT} line {n} is incomplete (being written or cut) and was left out")
                continue
            raise RebenchError(f"{folder.name}/{AUDIT} line {n} cannot be read: {exc}",
                               kept="the session folder is unchanged",
                               fix=f"`rebench-tui verify {folder.name}` shows what is damaged") from exc
        rows.append(row)
    pending = path.with_name(path.name + ".pending")
    if pending.is_file():
        extra = []
        for line in pending.read_text(encoding="utf-8").splitlines():
            try:
                extra.append(json.loads(line))
            except ValueError:
                continue
        if extra:
            warnings.append(f"{len(extra)} row(s) from {pending.name} (not yet merged into the log) are included")
            rows.extend(sorted(extra, key=lambda r: r["calledAt"]))
    return rows, warnings


def _parse_line(line: bytes) -> Any:
    """One JSON line: pydantic-core's Rust parser (2.4x the standard library on a 100k-row log),
    or the standard library where that refuses what the log may legally hold (a ``\\udcXX``
    escape for a file name that is not UTF-8)."""
    try:
        return pydantic_core.from_json(line)
    except ValueError:
        return json.loads(line.decode("utf-8"))


def log_parts(row: dict[str, Any]) -> tuple[str | None, str, dict[str, Any]]:
    """A ``log`` row's (title, first text line, first object payload); ``(None, "", {})`` otherwise."""
    c = row.get("content", {})
    if c.get("type") != "log":
        return None, "", {}
    title = (c.get("attributes") or {}).get("title")
    text: str | None = None
    payload: dict[str, Any] | None = None
    for x in c.get("content") or ():  # the first text line and the first object (one pass: 0.23 µs, not 0.82)
        if text is None and isinstance(x, str):
            text = x
        elif payload is None and isinstance(x, dict):
            payload = x
        if text is not None and payload is not None:
            break
    return title, text or "", payload if payload is not None else {}


@dataclass(frozen=True)
class Scoring:
    attempt: int  # 1-based, in audit order (as session.json's final_attempt counts)
    row: dict[str, Any]
    raw: Any  # the score as the audit log holds it: number, "NaN", "Infinity", "-Infinity" or null
    value: float
    normalized: float
    working_s: float
    elapsed_ms: int
    message: dict[str, Any]
    details: dict[str, Any]

    @property
    def called_at(self) -> int:
        return int(self.row["calledAt"])

    @property
    def valid(self) -> bool:
        return math.isfinite(self.value)

    @property
    def sealed(self) -> bool:
        """Its values are sealed to the researcher's key, and no key opened them."""
        return is_sealed(self.details)

    @property
    def fingerprint(self) -> str | None:
        """The attempt fingerprint of the files it scored (None: recorded without one)."""
        return attempt_fingerprint(self.details)


@dataclass
class SessionRecords:
    folder: Path
    meta: SessionMeta
    rows: list[dict[str, Any]]
    instructions: str
    warnings: list[str] = field(default_factory=list)
    sealed: int = 0  # scorings whose values stay sealed (no researcher's key set: trajectory.sealing)

    @classmethod
    def load(cls, folder: Path) -> "SessionRecords":
        folder = Path(folder)
        meta_path = folder / META
        if not meta_path.is_file() and not (folder / AUDIT).is_file():
            raise RebenchError(f"no session at {folder} (missing {META})", fix="`rebench-tui sessions` lists the sessions")
        try:  # a session's lost or damaged session.json: SessionMeta.load's error names the repair
            meta = SessionMeta.load(meta_path)
        except Exception as exc:  # noqa: BLE001 - reported as a readable error
            what = exc.what if isinstance(exc, RebenchError) else str(exc).splitlines()[0]
            raise RebenchError(f"{folder.name}/{META} cannot be read: {what}", kept="the session folder is unchanged",
                               fix=exc.fix if isinstance(exc, RebenchError) else None) from exc
        rows, warnings = read_rows(folder)
        rows, sealed = open_record(meta, rows)  # hidden scores sealed: opened where the researcher's key is set
        if sealed:
            warnings.append(sealed_note(sealed))
        try:  # the rules that decide the score are the chain's: session.json only repeats them
            changed = restore_rules(meta, rows)
        except RulesError as exc:
            changed = []
            warnings.append(f"the start row's rules cannot be read ({exc.what}): session.json's are repeated")
        if changed:
            warnings.append(f"session.json differs from the audit log in {', '.join(changed)}: the log's values are used")
        instr = folder / INSTRUCTIONS
        instructions = instr.read_text(encoding="utf-8") if instr.is_file() else ""
        if not instr.is_file():
            warnings.append(f"{INSTRUCTIONS} is missing: the export has no instructions text")
        return cls(folder, meta, rows, instructions, warnings, sealed)

    # -- identity ----------------------------------------------------------------------------
    @property
    def session_id(self) -> str:
        return self.meta.id

    @property
    def task_id(self) -> str:
        return self.meta.task_id.lower()

    @property
    def task_family(self) -> str:
        return self.task_id.split("/", 1)[0]

    @property
    def task_name(self) -> str:
        parts = self.task_id.split("/", 1)
        return parts[1] if len(parts) > 1 else "main"

    @property
    def finished(self) -> bool:
        return self.meta.status == "finished"

    # -- time --------------------------------------------------------------------------------
    @property
    def started_at(self) -> int:
        return self.meta.started_at

    @cached_property
    def end_ms(self) -> int:
        """When the record ends: the completion time, else the last row's time."""
        if self.meta.completed_at is not None:
            return self.meta.completed_at
        return max([self.started_at] + [int(r["calledAt"]) for r in self.rows])

    def elapsed_ms(self, called_at: int) -> int:
        """Vivaria's working time: ``calledAt - startedAt - (pauses that ended before calledAt)``."""
        paused = sum(p.end - p.start for p in self.meta.pauses if p.end is not None and p.end < called_at)
        return int(called_at - self.started_at - paused)

    def working_s(self, row: dict[str, Any]) -> float:
        """Pause-excluded working seconds when the row was written (the session clock's own value,
        ``workingMs``; else ``usageTotalSeconds``; else Vivaria's formula)."""
        if row.get("workingMs") is not None:
            return row["workingMs"] / 1000
        if row.get("usageTotalSeconds") is not None:
            return float(row["usageTotalSeconds"])
        return max(0, self.elapsed_ms(int(row["calledAt"]))) / 1000

    @cached_property
    def working_total_s(self) -> float:
        """Working seconds at the end of the record (the clock's banked time for a finished session)."""
        if self.finished:
            return self.meta.clock.banked_s
        return max([self.meta.clock.banked_s] + [self.working_s(r) for r in self.rows])

    @cached_property
    def submission(self) -> str | None:
        """The last ``submission`` row's value (session.json's ``submission`` where the log has none)."""
        for row in reversed(self.rows):
            c = row.get("content", {})
            if c.get("type") == "submission":
                return c.get("value")
        return self.meta.submission

    # -- scores ------------------------------------------------------------------------------
    def normalize(self, value: float) -> float:
        try:
            return normalize(value, self.meta.start_score, self.meta.reference_score, clip=False)
        except ValueError:
            return math.nan

    @cached_property
    def scorings(self) -> list[Scoring]:
        out: list[Scoring] = []
        for row in self.rows:
            c = row.get("content", {})
            if c.get("type") != "intermediateScore":
                continue
            value = score_value(c.get("score"))
            out.append(Scoring(len(out) + 1, row, c.get("score"), value, self.normalize(value), self.working_s(row),
                               self.elapsed_ms(int(row["calledAt"])), c.get("message") or {}, c.get("details") or {}))
        return out

    @cached_property
    def attempts(self) -> list[Attempt]:
        """The scorings grouped into attempts (same fingerprint: re-scores of the same files)."""
        return self.meta.rule().attempts([s.value for s in self.scorings], [s.fingerprint for s in self.scorings])

    @cached_property
    def counting(self) -> CountingScore | None:
        """The score that counts by the rule (``SessionMeta.rule``), from the log: the median of the
        best attempt's valid scorings, or the finish's recount. For a finished session it is
        session.json's final score (``rebench-tui verify`` checks that they agree)."""
        a = self.meta.rule().attempt([s.value for s in self.scorings], [s.fingerprint for s in self.scorings],
                                     self.recounts)
        return None if a is None else CountingScore.of(a, [s.attempt for s in self.scorings], self.normalize,
                                                       self.recounts)

    @property
    def recounts(self) -> list[bool]:
        """Which scorings the finish took to recount the leading attempt (``scoring.is_recount``)."""
        return [is_recount(s.details) for s in self.scorings]

    @property
    def paper_score(self) -> float:
        """The score by RE-Bench's rule: the best valid scoring the participant asked for (the last
        for ``last``), recounts left out (``scoring.Rule.paper``); NaN if none is valid."""
        return self.meta.rule().paper([s.value for s in self.scorings], self.recounts)

    @property
    def final_scoring(self) -> Scoring | None:
        """The scoring that stands for the score that counts (the counting attempt's scoring nearest
        its median): session.json's final attempt once finished, else the current one by rule. Its
        value is the counting score only when the attempt was scored once: use :attr:`counting`
        for the score itself."""
        if self.finished:
            n = self.meta.final_attempt
            return self.scorings[n - 1] if n is not None and 0 < n <= len(self.scorings) else None
        c = self.counting
        return None if c is None else self.scorings[c.representative - 1]

    # -- commands ----------------------------------------------------------------------------
    @cached_property
    def commands(self) -> list[Command]:
        """Actions paired with their observations by ``id`` (``shell_commands.pair_commands``)."""
        return pair_commands(self.rows)

    @cached_property
    def paired_observations(self) -> set[int]:
        """Trace indexes of observation rows that belong to a recorded action."""
        return {int(c.observation_row["index"]) for c in self.commands if c.observation_row is not None}

    @cached_property
    def command_ids(self) -> set[str]:
        return {c.id for c in self.commands}

    @property
    def run_facts(self) -> dict[str, Any]:
        """The session's identity and scoring rules, shared by every export's metadata."""
        m = self.meta
        return {
            "session_id": m.id, "env_id": m.env_id, "title": m.title, "profile": m.profile, "runtime": m.runtime,
            "host": m.host, "isolated": m.isolated, "image": m.image, "status": m.status, "finish_reason": m.finish_reason,
            "direction": m.direction, "aggregation": m.aggregation, "visibility": m.visibility,
            "start_score": m.start_score, "reference_score": m.reference_score,
            "anchors": self.anchors_record,
            "setting": m.setting,  # how its profile stands on the paper's setting (catalog.setting)
            # who worked and under which conditions; ai_tools in Vivaria's words
            "participant": m.participant.id, "internet": m.participant.internet, "ai_tools": m.participant.ai_tools,
            # the scores by both rules (scoring.Rule): RE-Bench's best single scoring, and the workstation's
            "scores": self.scores_by_rule,
        }

    @property
    def scores_by_rule(self) -> dict[str, Any]:
        """The score by the paper's rule and by the workstation's (``counting``), and how the
        latter was counted: ``recount`` (fresh scorings at the finish), ``attempt medians``, or
        None where it cannot be computed (no scoring carries a fingerprint)."""
        paper = self.paper_score
        c = self.counting
        how = None
        if c is not None:
            how = "recount" if c.recount else "attempt medians"
        if self.scorings and not any(s.fingerprint for s in self.scorings):
            how = None
        return {"paper": paper if math.isfinite(paper) else None,
                "robust": None if how is None or c is None else c.score, "robust_how": how,
                "timing": self.meta.timing, "recount_runs": self.meta.recount_runs}

    @property
    def anchors_record(self) -> dict[str, Any]:
        """The anchors the session was normalized with and their provenance (session.json's
        ``anchors``; for sessions recorded before it existed, the two numbers, kind ``recorded``)."""
        from ..catalog.anchors import Anchors

        return Anchors.from_record(self.meta.anchors, fallback=(self.meta.start_score, self.meta.reference_score)).to_record()
