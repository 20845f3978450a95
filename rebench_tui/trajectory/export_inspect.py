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
import math
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Literal

from .. import __version__
from ..clock import format_hms
from ..errors import RebenchError
from .inspect_events import SCORER, EventBuilder, finite_or_none, stable_id, utc_datetime
from .session_records import SessionRecords

SOLVER = "human_cli"
SOLVER_PARAMS: dict[str, Any] = {
    "answer": False,  # RE-Bench scores the files in the sandbox; the submission string is optional
    "intermediate_scoring": True,
    "record_session": True,
    "user": None,
    "instructions": None,
    "bashrc": None,
}
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


def _iso(ms: int | float | None) -> str:
    return "" if ms is None else utc_datetime(ms).isoformat()


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
                                 uuid=stable_id(m.id, "sample_init"), timestamp=utc_datetime(m.started_at), working_start=0.0,
                                 metadata={"working_time": 0.0})


def _store(rec: SessionRecords, builder: EventBuilder) -> dict[str, Any]:
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
        uuid=stable_id(m.id, m.run_id, "sample"),
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
                      "normalized_score": None if fc is None else finite_or_none(fc.normalized),
                      "direction": m.direction, "aggregation": m.aggregation,
                      "start_score": m.start_score, "reference_score": m.reference_score,
                      "anchors": rec.anchors_record})])


def _eval_spec(rec: SessionRecords, ia: dict[str, Any]) -> Any:
    m = rec.meta
    return ia["EvalSpec"](
        eval_id=stable_id(m.id, "eval"), run_id=stable_id(m.id, "run"), created=_iso(m.created_at),
        task=rec.task_family, task_id=stable_id(rec.task_id, m.task_version), task_version=m.task_version,
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
    builder = EventBuilder(rec, ia)
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
