"""METR's published per-run results (``all_runs.jsonl``) as agent runs.

METR publishes the runs behind its time-horizon work as JSON lines, one run per line, most of
them of other task suites. This reader keeps the RE-Bench rows and makes one :class:`~.runs.Run`
of each:

- **environment**: the row's ``task_family`` looked up in the published table
  (``environments/published.toml``: every environment there names its METR ``family``), so the
  mapping is data, not code. Families of other suites are ignored and counted.
- **group**: the model's display name (``alias``); **budget**: ``time_limit`` (seconds), kept on
  the run (:attr:`Run.budget_s`) so the paper's view can group by model and budget.
- **score**: ``score`` is METR's normalized score on its published anchors (what was checked,
  and how, is in the user docs, ``docs/metr-published-runs.md``). The run holds one scoring at
  its budget whose raw value is that normalized score mapped back through the published
  anchors, ``start + score * (reference - start)``: normalized by the published anchors it
  gives back the row's number exactly, and ``--anchors`` can still put it on another scale.
  ``human_score`` is not read (its meaning is not settled; see the docs).
- **start and end**: ``started_at`` / ``completed_at`` (ms since the epoch) kept on the run.
  Their difference is wall-clock time, not working time: the scoring sits at the budget.
- Rows that ended on a fatal error other than their budget (``fatal_error_from`` other than
  ``usageLimits``) are left out and counted apart, by where the error came from.

A row that does not read stops the file with one line naming the line number and the field.
Only RE-Bench rows are validated field by field; a row of another suite only needs to be a JSON
object naming its ``task_family``.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..catalog.anchors import Anchors
from .runs import CompareError, EnvInfo, EnvResolver, Run, Scoring, SourceKind

FILE_NAME = "all_runs.jsonl"
BUDGET_END = "usageLimits"  # fatal_error_from of a run that stopped at its budget: a normal end
# Keys whose presence on a first row tells METR's published rows from other JSON lines.
SIGNATURE = ("task_family", "alias", "time_limit", "score")


class PublishedRow(BaseModel):
    """The fields of one RE-Bench row this reader uses (others are ignored)."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    run_id: str | int
    task_id: str
    task_family: str
    alias: str = Field(min_length=1)
    model: str | None = None
    score: float | None
    time_limit: float = Field(gt=0)
    started_at: int | None = None
    completed_at: int | None = None
    fatal_error_from: str | None = None


@dataclass
class PublishedRuns:
    """What one file gave: runs, and what was left out and why (said beside the table)."""

    path: Path
    runs: list[Run] = field(default_factory=list)
    rows: int = 0
    other_suites: int = 0  # rows of task families that are not RE-Bench environments
    fatal: Counter = field(default_factory=Counter)  # fatal_error_from -> rows left out

    @property
    def notes(self) -> list[str]:
        out = [f"{self.path}: {len(self.runs)} RE-Bench run(s) of METR's published results read from {self.rows} row(s); "
               f"ignored {self.other_suites} row(s) of other task suites"]
        if self.fatal:
            n = sum(self.fatal.values())
            out.append(f"{self.path}: left out {n} RE-Bench run(s) that ended on a fatal error other than their budget ("
                       + ", ".join(f"{k} ×{v}" for k, v in sorted(self.fatal.items())) + ")")
        return out


def looks_published(obj: Any) -> bool:
    """Whether a parsed row has the shape of METR's published rows."""
    return isinstance(obj, dict) and all(k in obj for k in SIGNATURE)


def is_published_file(path: Path) -> bool:
    """A ``.jsonl`` file whose first non-empty line is one of METR's published rows."""
    if path.suffix.lower() != ".jsonl" or not path.is_file():
        return False
    try:
        with path.open("r", encoding="utf-8") as f:
            for line in f:
                if line.strip():
                    return looks_published(json.loads(line))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return False


def published_file_in(folder: Path) -> Path | None:
    """``all_runs.jsonl`` directly inside a folder, if it is there."""
    p = folder / FILE_NAME
    return p if p.is_file() else None


def _field_error(path: Path, n: int, exc: ValidationError) -> CompareError:
    e = exc.errors()[0]
    name = ".".join(str(x) for x in e.get("loc", ())) or "(row)"
    got = e.get("input")
    shown = "missing" if e.get("type") == "missing" else f"{json.dumps(got)[:60]}"
    return CompareError(f"{path} line {n}: field {name!r}: {e.get('msg', 'invalid')} (got {shown})",
                        kept="nothing from this file",
                        fix="fix or remove that line (METR's rows carry run_id, task_id, task_family, alias, score, "
                            "time_limit in seconds)")


def read_published(path: Path, resolver: EnvResolver) -> PublishedRuns:
    """Every RE-Bench run of a published ``all_runs.jsonl`` (see the module text)."""
    table = resolver.published
    if table is None:
        raise CompareError(f"{path}: METR's published runs need the published anchors table, which does not read",
                           fix="check environments/published.toml (`rebench-tui doctor`)")
    families = {p.family: p.env_id for p in table.envs.values()}
    envs: dict[str, tuple[EnvInfo, Anchors]] = {}  # by env id: the runs' rule, and the anchors their scores are on
    out = PublishedRuns(path)
    try:
        f = path.open("r", encoding="utf-8")
    except OSError as exc:
        raise CompareError(f"{path}: cannot be read: {exc}") from None
    with f:
        for n, line in enumerate(f, start=1):
            if not line.strip():
                continue
            out.rows += 1
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise CompareError(f"{path} line {n}: not JSON ({exc})", kept="nothing from this file",
                                   fix="fix or remove that line") from None
            family = obj.get("task_family") if isinstance(obj, dict) else None
            if not isinstance(family, str):
                raise CompareError(f"{path} line {n}: field 'task_family': "
                                   + ("missing or not a string" if isinstance(obj, dict) else "the row is not a JSON object"),
                                   kept="nothing from this file", fix="fix or remove that line")
            env_id = families.get(family)
            if env_id is None:
                out.other_suites += 1
                continue
            try:
                row = PublishedRow.model_validate(obj)
            except ValidationError as exc:
                raise _field_error(path, n, exc) from None
            if row.fatal_error_from not in (None, BUDGET_END):
                out.fatal[row.fatal_error_from] += 1
                continue
            got = envs.get(env_id)
            if got is None:
                got = envs[env_id] = (resolver.info(env_id), table.envs[env_id].anchors())
            out.runs.append(_run(row, n, path, *got))
    return out


def _run(row: PublishedRow, n: int, path: Path, env: EnvInfo, published: Anchors) -> Run:
    score = math.nan if row.score is None else float(row.score)
    raw = published.start + score * (published.reference - published.start) if math.isfinite(score) else math.nan
    note = (f"line {n} of {path.name}: score {score:.6g} on METR's published anchors "
            f"({published.start:g} → {published.reference:g}), budget {row.time_limit:g} s")
    # One scoring, so already in order: built directly (make_run would sort, and replace copy it).
    return Run(SourceKind.PUBLISHED, str(row.run_id), env, row.alias, (Scoring(row.time_limit, raw),),
               row.completed_at is not None, f"{path}:{n}", row.time_limit, notes=(note,),
               budget_s=row.time_limit, started_ms=row.started_at, ended_ms=row.completed_at)
