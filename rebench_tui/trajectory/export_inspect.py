"""Export a session as an Inspect AI eval log, shaped like Inspect's own ``human_cli`` baseline.

One eval, one sample (id ``family/task``, epoch 1), written through the public
``inspect_ai.log.write_eval_log`` and loadable by ``read_eval_log`` and ``inspect view``.

What the sample holds:

- ``store``: the ``HumanAgentState:*`` keys Inspect's human agent writes (instructions,
  scorings as ``{time: working seconds, scores: [Score]}``, answer, logs, running_state,
  started_running, accumulated_time), so ``sample.store_as(HumanAgentState)`` works.
- ``events``, in timestamp order (events of one moment in audit-log order): a ``SampleInitEvent``
  first; clock start/stop as
  ``InfoEvent(source="human_agent", data={"action": "start"|"stop", "total_time": "H:MM:SS"})``
  (start when the session starts and on every resume, stop on every pause and at the finish);
  each scoring as a ``ScoreEvent(intermediate=True)`` (value = score, explanation = the message
  as JSON, metadata = the details); the final score as a ``ScoreEvent(intermediate=False)``;
  each shell command as a ``ToolEvent`` (function ``bash``, arguments ``{"command": ...}``,
  result = output, timestamps from the command's own start and end); each file change as a
  ``SandboxEvent(action="write_file")`` with the full diff in metadata (the event's ``input``
  is cut to 100 lines, as Inspect cuts it); notes as ``InfoEvent(source="human_agent",
  data={"note": ...})``; every other record (session start/finish, time warnings, cancelled
  scorings, shell open/close, command gaps, the submission, errors) as an
  ``InfoEvent(source="rebench_tui")`` whose object data carries the row's title, text and payload.
- Every event's ``metadata`` has ``working_time`` (pause-excluded working seconds, from the
  row's ``workingMs``) and ``trace_index`` (the audit row's Vivaria ``index``). ``working_start``
  is wall seconds since the session started: like Inspect's own human agent, it does not
  exclude pauses.

Scores: a number stays a number. An invalid scoring (the audit log's ``"NaN"`` or ``null``) is
``Score(value=nan)``, Inspect's own "unscored" sentinel, which ``write_eval_log`` writes as the
JSON constant ``NaN`` and ``read_eval_log`` reads back as ``float('nan')``; ``"Infinity"`` and
``"-Infinity"`` become the float infinities. The event's metadata keeps the audit log's raw
value (``vivaria_score``) so null and NaN stay apart.

Status: a finished session is ``status="success"`` with ``results`` and ``sample.scores`` (the
counting score: the median of the counting attempt's re-scores, whose scorings its metadata's
``counting`` names; NaN with an explanation when no scoring was valid). An unfinished session is
``status="started"`` (Inspect's status for a run still in progress): no ``results``, no
``sample.scores``, no final ``ScoreEvent``; its intermediate scorings, clock events and
``HumanAgentState:running_state`` say where it stands.
"""

from __future__ import annotations

import gc
import hashlib
import json
import math
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Iterator, Literal

from .. import __version__
from ..clock import format_hms
from ..errors import RebenchError
from .session_records import Command, SessionRecords, log_parts

SCORER = "rebench_score"
SOLVER = "human_cli"
SOLVER_PARAMS: dict[str, Any] = {
    "answer": False,  # RE-Bench scores the files in the sandbox; the submission string is optional
    "intermediate_scoring": True,
    "record_session": True,
    "user": None,
    "instructions": None,
    "bashrc": None,
}
INPUT_LINES = 100  # Inspect cuts a SandboxEvent's input to this many lines
INSTALL_FIX = "pip install 'rebench-tui[inspect]'"


def _inspect() -> dict[str, Any]:
    """The Inspect classes, imported only when an export runs (Inspect is an optional extra)."""
    try:
        from inspect_ai import __version__ as inspect_version
        from inspect_ai.dataset import Sample
        from inspect_ai.event import InfoEvent, SampleInitEvent, SandboxEvent, ScoreEvent, ToolEvent
        from inspect_ai.log import (EvalConfig, EvalDataset, EvalLog, EvalMetric, EvalPlan, EvalPlanStep, EvalResults,
                                    EvalSample, EvalScore, EvalSpec, EvalStats, write_eval_log)
        from inspect_ai.model import ChatMessageUser, ModelOutput
        from inspect_ai.scorer import Score
        from inspect_ai.util import SandboxEnvironmentSpec
    except ImportError as exc:
        raise RebenchError(f"exporting to Inspect needs the inspect_ai package ({exc})",
                           kept="the session folder is unchanged", fix=INSTALL_FIX) from exc
    return dict(locals())  # the names imported above, by name


def inspect_available() -> None:
    """Raise the readable error now if Inspect is missing (before a batch starts)."""
    _inspect()


def _dt(ms: int | float) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def _iso(ms: int | float | None) -> str:
    return "" if ms is None else _dt(ms).isoformat()


def _stable_id(*parts: Any) -> str:
    """A deterministic 22-character id (the length of Inspect's shortuuids): re-exports are identical."""
    return hashlib.sha256(":".join(str(p) for p in parts).encode()).hexdigest()[:22]


def _cut_lines(text: str | None, n: int = INPUT_LINES) -> str | None:
    if text is None or text.count("\n") < n:  # short enough: most diffs (no split needed)
        return text
    lines = text.splitlines(keepends=True)
    return text if len(lines) <= n else "".join(lines[:n]) + f"... ({len(lines) - n} more lines in metadata.diff)\n"


def _finite_or_none(x: float) -> float | None:
    return x if math.isfinite(x) else None


def _commands_log(rec: SessionRecords) -> str:
    """A terminal-like transcript of the captured commands, for ``HumanAgentState:logs``."""
    out = []
    for c in rec.commands:
        if c.kind != "run_bash":
            continue
        wt = format_hms(rec.working_s(c.action_row))
        out.append(f"[{wt}] {c.cwd or ''}$ {c.command}\n")
        if c.observation_row is None:
            out.append("(no result recorded)\n")
            continue
        if c.output:
            out.append(c.output if c.output.endswith("\n") else c.output + "\n")
        if c.truncated:
            out.append(f"... (output cut; {c.output_bytes} bytes in all)\n")
        out.append(f"[exit {c.exit_status}]\n")
    return "".join(out)


class _Builder:
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
            "uuid": _stable_id(self.session_id, row["index"], tag),
            "timestamp": _dt(at),
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
            completed=None if c.ended_at is None else _dt(c.ended_at), working_time=c.duration_s, **kwargs))

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
                          normalized_score=None if fc is None else _finite_or_none(fc.normalized),
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
                                  normalized_score=_finite_or_none(s.normalized), elapsed_ms=s.elapsed_ms)))
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


def _sample_metadata(rec: SessionRecords) -> dict[str, Any]:
    m = rec.meta
    sample_meta = {
        "task_family": rec.task_family,
        "task_name": rec.task_name,
        "instructions": rec.instructions,
        **rec.run_facts,
        "run_id": m.run_id,
        "task_version": m.task_version,
        "time_limit_s": m.clock.limit_s,
        "working_time_s": rec.working_total_s,
        "pauses": [p.model_dump() for p in m.pauses],
    }
    if rec.warnings:
        sample_meta["export_warnings"] = list(rec.warnings)
    return sample_meta


def _init_event(rec: SessionRecords, ia: dict[str, Any]) -> Any:
    """The ``SampleInitEvent`` that opens the sample's events."""
    m = rec.meta
    instructions = rec.instructions
    ds_sample = ia["Sample"](id=rec.task_id, input=instructions, target="", metadata={
        "task_family": rec.task_family, "task_name": rec.task_name, "instructions": instructions})
    return ia["SampleInitEvent"](sample=ds_sample, state={"messages": [{"role": "user", "content": instructions}]},
                                 uuid=_stable_id(m.id, "sample_init"), timestamp=_dt(m.started_at), working_start=0.0,
                                 metadata={"working_time": 0.0})


def _store(rec: SessionRecords, builder: _Builder) -> dict[str, Any]:
    """The ``HumanAgentState:*`` keys Inspect's human agent writes."""
    m = rec.meta
    scorings = [{"time": s.working_s, "scores": [builder.score(s).model_dump()]} for s in rec.scorings]
    running = (not rec.finished) and m.clock.running_since_wall is not None
    logs = {"rebench_commands.log": _commands_log(rec)} if rec.commands else {}
    return {
        "HumanAgentState:instructions": rec.instructions,
        "HumanAgentState:scorings": scorings,
        "HumanAgentState:answer": rec.submission if rec.finished else None,
        "HumanAgentState:logs": logs,
        "HumanAgentState:running_state": running,
        "HumanAgentState:started_running": m.clock.running_since_wall if running else rec.end_ms / 1000,
        "HumanAgentState:accumulated_time": m.clock.banked_s,
    }


def _eval_sample(rec: SessionRecords, ia: dict[str, Any], final: Any | None, sample_meta: dict[str, Any],
                 store: dict[str, Any], events: list[Any]) -> Any:
    m = rec.meta
    instructions = rec.instructions
    output = ia["ModelOutput"].from_content("none/none", rec.submission) if (rec.finished and rec.submission is not None) \
        else ia["ModelOutput"]()
    return ia["EvalSample"](
        id=rec.task_id, epoch=1, input=instructions, target="",
        messages=[ia["ChatMessageUser"](content=instructions)] if instructions else [],
        output=output, scores=None if final is None else {SCORER: final}, metadata=sample_meta, store=store,
        events=events, started_at=_iso(m.started_at), completed_at=_iso(m.completed_at) or None,
        total_time=(rec.end_ms - m.started_at) / 1000, working_time=rec.working_total_s,
        uuid=_stable_id(m.id, m.run_id, "sample"),
    )


def _results(rec: SessionRecords, ia: dict[str, Any], final: Any) -> Any:
    """A finished session's results: the counting score, and which scorings it counted."""
    m = rec.meta
    fc = rec.counting
    return ia["EvalResults"](
        total_samples=1, completed_samples=1,
        scores=[ia["EvalScore"](
            name=SCORER, scorer=SCORER, scored_samples=1, unscored_samples=0,
            metrics={"mean": ia["EvalMetric"](name="mean", value=final.value if isinstance(final.value, (int, float)) else math.nan)},
            metadata={"final_attempt": None if fc is None else fc.representative,
                      "final_scorings": None if fc is None else list(fc.scorings),
                      "normalized_score": None if fc is None else _finite_or_none(fc.normalized),
                      "direction": m.direction, "aggregation": m.aggregation,
                      "start_score": m.start_score, "reference_score": m.reference_score,
                      "anchors": rec.anchors_record})])


def _eval_spec(rec: SessionRecords, ia: dict[str, Any]) -> Any:
    m = rec.meta
    return ia["EvalSpec"](
        eval_id=_stable_id(m.id, "eval"), run_id=_stable_id(m.id, "run"), created=_iso(m.created_at),
        task=rec.task_family, task_id=_stable_id(rec.task_id, m.task_version), task_version=m.task_version,
        task_display_name=m.title, task_attribs={"env_id": m.env_id, "task_id": rec.task_id},
        solver=SOLVER, solver_args=dict(SOLVER_PARAMS),
        dataset=ia["EvalDataset"](name=rec.task_family, samples=1, sample_ids=[rec.task_id]),
        sandbox=ia["SandboxEnvironmentSpec"](type=m.runtime),
        model="none/none", config=ia["EvalConfig"](epochs=1, working_limit=int(m.clock.limit_s)),
        packages={"rebench-tui": __version__, "inspect_ai": ia["inspect_version"]},
        metadata={"rebench_tui": {"session_id": m.id, "run_id": m.run_id, "env_id": m.env_id,
                                  "status": m.status, "isInteractive": True, "session": m.metadata,
                                  "participant": m.participant.model_dump(mode="json")}},
    )


def build_eval_log(rec: SessionRecords) -> Any:
    """The session as an ``inspect_ai.log.EvalLog`` (not yet written)."""
    ia = _inspect()
    m = rec.meta
    sample_meta = _sample_metadata(rec)
    builder = _Builder(rec, ia)
    events = [_init_event(rec, ia)] + builder.build_events()
    store = _store(rec, builder)
    final = builder.final_score()
    sample = _eval_sample(rec, ia, final, sample_meta, store, events)
    results = _results(rec, ia, final) if rec.finished else None
    spec = _eval_spec(rec, ia)
    return ia["EvalLog"](
        version=2, status="success" if rec.finished else "started", eval=spec,
        plan=ia["EvalPlan"](name="plan", steps=[ia["EvalPlanStep"](solver=SOLVER, params=dict(SOLVER_PARAMS))]),
        results=results,
        stats=ia["EvalStats"](started_at=_iso(m.started_at), completed_at=_iso(m.completed_at)),
        samples=[sample],
    )


@contextmanager
def _bulk() -> Iterator[None]:
    """The cyclic garbage collector off while a log is read, built and written.

    A long session makes hundreds of thousands of small objects (rows, events, their dicts),
    none of them in a reference cycle; the collector's generation passes over them took about a
    third of an export of 100k rows (benchmarks/README.md). Reference counting still frees
    everything; the collector is back on (as it was) when the export ends, error or not."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def export_inspect(folder: Path, out: Path, fmt: Literal["eval", "json"] = "eval") -> Path:
    """Write the session in ``folder`` as an Inspect log at ``out`` (``.eval`` or ``.json``); returns ``out``."""
    if fmt not in ("eval", "json"):
        raise RebenchError(f"unknown Inspect log format {fmt!r}", fix="use eval or json")
    ia = _inspect()
    with _bulk():
        rec = SessionRecords.load(Path(folder))
        log = build_eval_log(rec)
        out = Path(out)
        out.parent.mkdir(parents=True, exist_ok=True)
        ia["write_eval_log"](log, str(out), format=fmt)
    return out
