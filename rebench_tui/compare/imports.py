"""Readers that turn recorded attempts into :class:`~.runs.Run` objects.

Three shapes are read:

- **human session folders** (``session.json`` + ``audit.jsonl``): every ``intermediateScore``
  row, at its pause-excluded working time (``workingMs``; else ``usageTotalSeconds``; else
  ``calledAt`` minus the start minus the pauses in ``session.json``);
- **Inspect eval logs** (``.eval`` or ``.json``, through ``inspect_ai.log.read_eval_log``): one
  run per sample, from its intermediate ``ScoreEvent``s at the event metadata's
  ``working_time`` (seconds, pauses excluded) where present, else the event's
  ``working_start``; a ``human_cli`` log without score events is read from its store's
  ``HumanAgentState:scorings``;
- **Vivaria JSON** (``.json`` or ``.jsonl``): a list of trace entries, a list of score-log rows
  (``elapsedTime`` ms, pauses excluded), or a run object holding them (``taskId``, ``agent``,
  ``pauses``, ``startedAt``, ``entries``/``trace`` or ``scoreLog``; a ``runs`` list of such);
  also a run bundle folder (``run.json`` with ``trace_entries.jsonl``/``score_log.jsonl``, as
  ``rebench-tui export --format vivaria`` writes).

Each scoring keeps the attempt fingerprint its source recorded (``details.attempt.fingerprint`` of
a rebench-tui scoring, also in its Vivaria and Inspect exports), so re-scores of the same files
count as one attempt with their median, as the workstation counts them; other sources have none.

Which environment a run belongs to comes from its task name (``EnvResolver``); which anchors
normalize it, from the setting it was scored in (see :mod:`.runs`): a session's recorded anchors,
anchors its log carries (``metadata.anchors``, or ``start_score``/``reference_score``), else
METR's published ones for METR's tasks. A source named
on the command line that cannot be read is an error; one found while scanning a folder is
skipped with a warning, so one stray file does not stop a comparison.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..catalog.anchors import Anchors, AnchorsError
from ..scoring import Aggregation, Direction, attempt_fingerprint, is_recount
from .runs import (
    HUMAN_LABEL,
    CompareError,
    EnvInfo,
    EnvResolver,
    Run,
    Scoring,
    SourceKind,
    UnknownEnvironment,
    make_run,
    setting_differs,
)

INSPECT_SUFFIXES = (".eval",)
JSON_SUFFIXES = (".json", ".jsonl")
HUMAN_MODELS = ("none/none", "none")


# -- small parsers ----------------------------------------------------------------------------
def score_value(value: Any) -> float:
    """A score as a float: numbers, null/None (NaN), the strings NaN/Infinity/-Infinity.

    A mapping (an Inspect score with several values) counts if it has a ``score`` key or exactly
    one numeric value. Anything else is NaN: an invalid attempt.
    """
    if value is None or isinstance(value, bool):
        return math.nan
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return math.nan
    if isinstance(value, dict):
        if "score" in value:
            return score_value(value["score"])
        nums = [v for v in value.values() if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return float(nums[0]) if len(nums) == 1 else math.nan
    return math.nan


def paused_ms(pauses: Iterable[dict[str, Any]], start_ms: float, at_ms: float) -> float:
    """Milliseconds of pauses inside ``[start_ms, at_ms]`` (an open pause runs until ``at_ms``)."""
    total = 0.0
    for p in pauses:
        a = p.get("start")
        if a is None:
            continue
        b = p.get("end")
        b = at_ms if b is None else b
        lo, hi = max(float(a), start_ms), min(float(b), at_ms)
        total += max(0.0, hi - lo)
    return total


def row_working_s(row: dict[str, Any], start_ms: float, pauses: Sequence[dict[str, Any]] = ()) -> float:
    """Working seconds of one trace entry: ``workingMs``, else ``usageTotalSeconds``, else
    ``calledAt - start - pauses``."""
    if row.get("workingMs") is not None:
        return float(row["workingMs"]) / 1000
    if row.get("usageTotalSeconds") is not None:
        return float(row["usageTotalSeconds"])
    called = float(row["calledAt"])
    return max(0.0, (called - start_ms - paused_ms(pauses, start_ms, called)) / 1000)


def trace_scorings(rows: Sequence[dict[str, Any]], start_ms: float | None = None,
                   pauses: Sequence[dict[str, Any]] = ()) -> list[Scoring]:
    """Every ``intermediateScore`` entry as a scoring; ``start_ms`` defaults to the first calledAt."""
    rows = sorted((r for r in rows if "calledAt" in r), key=lambda r: r["calledAt"])
    if not rows:
        return []
    start = float(rows[0]["calledAt"]) if start_ms is None else float(start_ms)
    out = []
    for r in rows:
        c = r.get("content") or {}
        if c.get("type") == "intermediateScore":
            out.append(Scoring(row_working_s(r, start, pauses), score_value(c.get("score")),
                               attempt_fingerprint(c.get("details")), is_recount(c.get("details"))))
    return out


def _pause_dicts(pauses: Iterable[Any]) -> list[dict[str, Any]]:
    return [p.model_dump() if hasattr(p, "model_dump") else dict(p) for p in pauses or ()]


# -- human sessions ---------------------------------------------------------------------------
def is_session_folder(path: Path) -> bool:
    """A human session's folder: its session.json, or (that file lost or damaged) its audit log."""
    from ..trajectory.records import AUDIT, META

    return path.is_dir() and ((path / META).is_file() or (path / AUDIT).is_file())


def own_anchors(meta: dict[str, Any]) -> Anchors | None:
    """Anchors a run's metadata carries: a recorded ``anchors`` object (rebench-tui sessions and
    their exports), else ``start_score`` and ``reference_score`` (kind ``log``); None if neither reads."""
    if isinstance(meta.get("anchors"), dict):
        try:
            return Anchors.from_record(meta["anchors"])
        except AnchorsError:
            pass
    try:
        start, ref = float(meta["start_score"]), float(meta["reference_score"])
        return Anchors(start, ref, "log", "given by the run's own log (start_score, reference_score)")
    except (KeyError, TypeError, ValueError, AnchorsError):
        return None


def read_human_session(folder: Path, resolver: EnvResolver | None = None) -> Run:
    """A human session folder as a run, normalized by the anchors the session recorded (or by the
    resolver's override, if it has one)."""
    from ..trajectory.audit import read_entries
    from ..trajectory.records import AUDIT, META, SessionMeta
    from ..trajectory.rules import RulesError, restore_rules
    from ..trajectory.sealing import open_record, sealed_note

    try:
        meta = SessionMeta.load(folder / META)
    except Exception as exc:  # noqa: BLE001 - any damage is reported with the path
        raise CompareError(f"cannot read {folder / 'session.json'}: {getattr(exc, 'what', exc)}".splitlines()[0],
                           fix=getattr(exc, "fix", None) or "`rebench-tui verify` checks a session's records") from exc
    try:
        rows = read_entries(folder / AUDIT)
    except ValueError as exc:
        raise CompareError(f"{folder / 'audit.jsonl'} has a line that is not JSON: {exc}",
                           fix="`rebench-tui verify` finds the bad line") from exc
    # The rules that decide the score (direction, rule, timing, anchors, working time) are the
    # hash-chained start row's; session.json only repeats them (an edit there changes nothing here).
    try:
        restore_rules(meta, rows)
    except RulesError as exc:
        raise CompareError(f"{folder}: {exc.what}", fix="`rebench-tui verify` checks a session's records") from None
    try:
        anchors = Anchors.from_record(meta.anchors, fallback=(meta.start_score, meta.reference_score))
        env = EnvInfo(meta.env_id, meta.task_id.split("/", 1)[0], Direction(meta.direction),
                      Aggregation(meta.aggregation), anchors, meta.title, f"session:{meta.profile}", meta.timing)
    except AnchorsError as exc:
        raise CompareError(f"{folder / 'session.json'}: its anchors do not read: {exc.what}",
                           fix="`rebench-tui verify` checks a session's records") from None
    except ValueError as exc:
        raise CompareError(f"{folder / 'session.json'}: its score rule does not read: {str(exc).splitlines()[0]}",
                           fix="`rebench-tui verify` checks a session's records") from None
    if resolver is not None:
        env = resolver.apply(env, profile=meta.profile)
    rows, sealed = open_record(meta, rows)  # hidden scores: opened with the researcher's key, else they stay sealed
    scorings = trace_scorings(rows, meta.started_at, _pause_dicts(meta.pauses))
    notes = [sealed_note(sealed)] if sealed else []
    if meta.profile != "gpu":
        notes.append(f"profile {meta.profile}: normalized by {env.anchors.tag} anchors ({env.start:g} -> {env.reference:g}), "
                     "not the GPU setting's")
    return make_run(SourceKind.HUMAN_SESSION, meta.id, env, HUMAN_LABEL, scorings,
                    finished=meta.status == "finished", source=str(folder), working_s=meta.clock.banked_s,
                    human=True, notes=notes, setting_differs=setting_differs({"setting": meta.setting}),
                    participant=meta.participant.id, internet=meta.participant.internet, ai_tools=meta.participant.ai_tools)


def who_of(meta: Any) -> dict[str, Any]:
    """The participant and conditions a log's metadata records (rebench-tui's exports write them)."""
    if not isinstance(meta, dict):
        return {}
    internet = meta.get("internet")
    return {"participant": meta.get("participant") if isinstance(meta.get("participant"), str) else None,
            "internet": internet if isinstance(internet, bool) else None,
            "ai_tools": meta.get("ai_tools") if isinstance(meta.get("ai_tools"), str) else None}


def read_sessions_dir(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if is_session_folder(p)) if folder.is_dir() else []


# -- Inspect logs -----------------------------------------------------------------------------
def _read_eval_log(path: Path):
    try:
        from inspect_ai.log import read_eval_log
    except ImportError as exc:
        raise CompareError(f"reading the Inspect log {path} needs the inspect_ai package, which is not installed",
                           fix="pip install 'rebench-tui[inspect]'") from exc
    try:
        return read_eval_log(str(path))
    except Exception as exc:  # noqa: BLE001 - inspect raises many kinds; report them the same way
        raise CompareError(f"cannot read the Inspect log {path}: {exc}".splitlines()[0]) from exc


def _attr(obj: Any, name: str, default: Any = None) -> Any:
    if isinstance(obj, dict):
        return obj.get(name, default)
    return getattr(obj, name, default)


def _inspect_is_human(log: Any) -> bool:
    if str(_attr(log.eval, "model", "")).lower() in HUMAN_MODELS:
        return True
    plan = _attr(log, "plan")
    steps = _attr(plan, "steps") or []
    return any("human" in str(_attr(s, "solver", "")).lower() for s in steps)


def _inspect_env(sample: Any, log: Any, resolver: EnvResolver, task: str | None) -> EnvInfo:
    meta = _attr(sample, "metadata") or {}
    candidates: list[str] = []
    if task:
        candidates.append(task)
    if meta.get("task_family"):
        candidates.append(str(meta["task_family"]))
    if isinstance(sample.id, str):
        candidates.append(sample.id)
    candidates.append(str(log.eval.task))
    if _attr(log.eval, "task_registry_name"):
        candidates.append(str(log.eval.task_registry_name))
    first: UnknownEnvironment | None = None
    own = own_anchors(meta) if isinstance(meta, dict) else None
    for name in candidates:
        try:
            return resolver.info(name, own)
        except UnknownEnvironment as exc:
            first = first or exc
    assert first is not None
    raise first


def _event_working_s(event: Any) -> float:
    meta = _attr(event, "metadata") or {}
    wt = meta.get("working_time") if isinstance(meta, dict) else None
    if isinstance(wt, (int, float)) and not isinstance(wt, bool):
        return float(wt)
    return float(_attr(event, "working_start", 0.0) or 0.0)


def _inspect_scorings(sample: Any) -> tuple[list[Scoring], list[str]]:
    events = [e for e in (_attr(sample, "events") or []) if _attr(e, "event") == "score"]
    inter = [e for e in events if _attr(e, "intermediate", False)]
    if inter:
        return [Scoring(_event_working_s(e), score_value(_attr(_attr(e, "score"), "value")),
                        attempt_fingerprint(_attr(_attr(e, "score"), "metadata")),
                        is_recount(_attr(_attr(e, "score"), "metadata"))) for e in inter], []
    store = _attr(sample, "store") or {}
    stored = store.get("HumanAgentState:scorings") if isinstance(store, dict) else None
    if stored:
        out = []
        for s in stored:
            scores = _attr(s, "scores") or []
            value = _attr(scores[0], "value") if scores else None
            out.append(Scoring(float(_attr(s, "time", 0.0) or 0.0), score_value(value)))
        return out, ["scorings from the store's HumanAgentState:scorings"]
    if events:
        return ([Scoring(_event_working_s(e), score_value(_attr(_attr(e, "score"), "value"))) for e in events],
                ["no intermediate scores: the final score event stands in"])
    return [], ["no score events"]


def read_inspect_log(path: Path, resolver: EnvResolver, *, task: str | None = None, label: str | None = None) -> list[Run]:
    """One run per sample of an Inspect log (``.eval`` or ``.json``)."""
    log = _read_eval_log(path)
    human = _inspect_is_human(log)
    lab = HUMAN_LABEL if human else (label or str(log.eval.model))
    samples = log.samples or []
    runs = []
    for i, sample in enumerate(samples):
        env = _inspect_env(sample, log, resolver, task)
        scorings, notes = _inspect_scorings(sample)
        rid = path.stem if len(samples) == 1 else f"{path.stem}:{sample.id}:{sample.epoch}"
        working = _attr(sample, "working_time") or _attr(sample, "total_time")
        finished = log.status == "success" and _attr(sample, "error") is None
        runs.append(make_run(SourceKind.INSPECT, rid, env, lab, scorings, finished=finished, source=str(path),
                             working_s=None if working is None else float(working), human=human, notes=notes,
                             setting_differs=setting_differs(_attr(sample, "metadata")),
                             **who_of(_attr(sample, "metadata"))))
    if not runs:
        raise CompareError(f"the Inspect log {path} holds no samples",
                           fix="write the log with its samples (a header-only log has no scores)")
    return runs


# -- Vivaria JSON -----------------------------------------------------------------------------
def load_json_or_jsonl(path: Path) -> Any:
    text = path.read_text(encoding="utf-8")
    try:
        return json.loads(text)
    except ValueError:
        pass
    rows = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except ValueError as exc:
            raise CompareError(f"{path} is neither JSON nor JSON lines (line {n}: {exc})") from exc
    return rows


def _is_trace_row(r: Any) -> bool:
    return isinstance(r, dict) and isinstance(r.get("content"), dict) and "calledAt" in r


def _is_score_row(r: Any) -> bool:
    return isinstance(r, dict) and "score" in r and "elapsedTime" in r


def _vivaria_label(obj: dict[str, Any], fallback: str | None) -> str:
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    for key in ("agent", "label", "model"):
        if obj.get(key):
            return str(obj[key])
    if obj.get("agentRepoName"):
        pack = obj.get("agentSettingsPack")
        return f"{obj['agentRepoName']}" + (f"+{pack}" if pack else "")
    for key in ("agent", "model"):
        if meta.get(key):
            return str(meta[key])
    return fallback or "agent"


def _env_from(resolver: EnvResolver, task_name: str, meta: dict[str, Any]) -> EnvInfo:
    """The environment of a task name. A run whose metadata carries its own anchors (rebench-tui's
    exports: ``anchors``, or ``start_score``/``reference_score``) is normalized by those, like its
    session folder; with ``env_id``, ``direction`` and ``aggregation`` too, they also make an
    environment the resolver does not know readable."""
    own = own_anchors(meta)
    has_rule = all(meta.get(k) is not None for k in ("env_id", "direction", "aggregation"))
    try:
        base: EnvInfo | None = resolver.info(task_name, own)
    except UnknownEnvironment:
        if not (has_rule and own is not None):
            raise
        base = None
    if not (has_rule and own is not None):
        assert base is not None
        return base
    try:
        info = EnvInfo(base.env_id if base else str(meta["env_id"]), base.family if base else task_name.split("/", 1)[0].lower(),
                       Direction(meta["direction"]), Aggregation(meta["aggregation"]), own,
                       str(meta.get("title") or (base.title if base else "")), f"file:{meta.get('profile') or ''}".rstrip(":"))
    except (TypeError, ValueError):
        if base is not None:
            return base
        raise UnknownEnvironment(f"task {task_name!r} is unknown and its metadata's scoring facts do not read") from None
    return resolver.apply(info, profile=meta.get("profile") if isinstance(meta.get("profile"), str) else None)


def _vivaria_run(obj: dict[str, Any], path: Path, resolver: EnvResolver, task: str | None, label: str | None,
                 rid_default: str) -> Run:
    entries = next((obj[k] for k in ("entries", "trace", "traceEntries") if isinstance(obj.get(k), list)), None)
    score_rows = next((obj[k] for k in ("scoreLog", "score_log", "scores") if isinstance(obj.get(k), list)), None)
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    task_name = task or obj.get("taskId") or next((r.get("taskId") for r in (entries or score_rows or [])
                                                   if isinstance(r, dict) and r.get("taskId")), None)
    if not task_name:
        raise CompareError(f"{path}: the run names no task (no taskId)",
                           fix="add taskId to the file, or pass --task (e.g. --task ai_rd_fix_embedding/main)")
    env = _env_from(resolver, str(task_name), meta)
    human = bool(obj.get("isInteractive") or meta.get("isInteractive"))
    lab = HUMAN_LABEL if human else _vivaria_label(obj, label)
    pauses = obj.get("pauses") or []
    notes: list[str] = []
    if entries is not None:
        rows = [r for r in entries if _is_trace_row(r)]
        start = obj.get("startedAt")
        scorings = trace_scorings(rows, start, pauses)
        start_ms = float(start) if start is not None else (min(r["calledAt"] for r in rows) if rows else 0.0)
        working = max((row_working_s(r, start_ms, pauses) for r in rows), default=None)
        finished = any((r["content"].get("type") == "submission") for r in rows)
    elif score_rows is not None:
        scorings = [Scoring(float(r["elapsedTime"]) / 1000, score_value(r.get("score")), attempt_fingerprint(r.get("details")),
                            is_recount(r.get("details"))) for r in score_rows if _is_score_row(r)]
        working = max((s.working_s for s in scorings), default=None)
        finished = False
        notes.append("from score-log rows")
    else:
        raise CompareError(f"{path}: a run object needs entries (trace entries) or scoreLog (score-log rows)")
    if obj.get("usageTotalSeconds") is not None:
        working = float(obj["usageTotalSeconds"])
    elif isinstance(obj.get("usage"), dict) and obj["usage"].get("total_seconds") is not None:
        working = float(obj["usage"]["total_seconds"])
    status = str(obj.get("status") or "").lower()
    if "finished" in obj:
        finished = bool(obj["finished"])
    elif "completedAt" in obj:
        finished = obj["completedAt"] is not None
    elif status:
        finished = status in ("finished", "submitted", "success", "complete", "completed")
    elif obj.get("submission") is not None:
        finished = True
    rid = str(obj.get("runId") or obj.get("id") or rid_default)
    return make_run(SourceKind.VIVARIA, rid, env, lab, scorings, finished=finished, source=str(path),
                    working_s=working, human=human, notes=notes, setting_differs=setting_differs(meta), **who_of(meta))


def _group_rows(rows: list[dict[str, Any]], stem: str) -> list[tuple[str, list[dict[str, Any]]]]:
    """Rows of several runs (or agent branches) apart, in first-seen order."""
    groups: dict[tuple[Any, Any], list[dict[str, Any]]] = {}
    for r in rows:
        groups.setdefault((r.get("runId"), r.get("agentBranchNumber") or 0), []).append(r)
    out = []
    for (run_id, branch), rs in groups.items():
        rid = str(run_id) if run_id is not None else stem
        out.append((rid if not branch else f"{rid}.{branch}", rs))
    return out


def read_vivaria(path: Path, resolver: EnvResolver, *, task: str | None = None, label: str | None = None,
                 data: Any = None) -> list[Run]:
    """Runs from a Vivaria-shaped JSON or JSON-lines file."""
    data = load_json_or_jsonl(path) if data is None else data
    if isinstance(data, dict) and isinstance(data.get("runs"), list):
        objs = data["runs"]
    elif isinstance(data, dict):
        objs = [data]
    elif isinstance(data, list) and data and all(_is_trace_row(r) for r in data):
        objs = [{"runId": rid, "entries": rs, "taskId": next((r.get("taskId") for r in rs if r.get("taskId")), None)}
                for rid, rs in _group_rows(data, path.stem)]
    elif isinstance(data, list) and data and all(_is_score_row(r) for r in data):
        objs = [{"runId": rid, "scoreLog": rs, "taskId": next((r.get("taskId") for r in rs if r.get("taskId")), None)}
                for rid, rs in _group_rows(data, path.stem)]
    elif isinstance(data, list) and data and all(isinstance(r, dict) and ("entries" in r or "scoreLog" in r) for r in data):
        objs = data
    else:
        raise CompareError(f"{path} is not Vivaria-shaped: expected trace entries (calledAt, content), score-log rows "
                           "(elapsedTime, score) or a run object with entries/scoreLog")
    runs = [_vivaria_run(o, path, resolver, task, label, path.stem if len(objs) == 1 else f"{path.stem}:{i}")
            for i, o in enumerate(objs)]
    return runs


# -- Vivaria run bundles (a folder: run.json + trace_entries.jsonl / score_log.jsonl) ------------
BUNDLE_RUN = "run.json"
BUNDLE_TRACE = "trace_entries.jsonl"
BUNDLE_SCORES = "score_log.jsonl"
BUNDLE_PAUSES = "run_pauses.jsonl"


def is_vivaria_bundle(path: Path) -> bool:
    return (path.is_dir() and (path / BUNDLE_RUN).is_file()
            and ((path / BUNDLE_SCORES).is_file() or (path / BUNDLE_TRACE).is_file()))


def read_vivaria_bundle(folder: Path, resolver: EnvResolver, *, task: str | None = None, label: str | None = None) -> Run:
    """A run bundle folder (as ``rebench-tui export --format vivaria`` writes): the run object from
    ``run.json``, scorings from ``score_log.jsonl`` (ms precision) or else ``trace_entries.jsonl``
    with ``run_pauses.jsonl``."""
    run = load_json_or_jsonl(folder / BUNDLE_RUN)
    if not isinstance(run, dict):
        raise CompareError(f"{folder / BUNDLE_RUN} is not a run object")
    obj = dict(run)
    if (folder / BUNDLE_SCORES).is_file():
        obj["scoreLog"] = load_json_or_jsonl(folder / BUNDLE_SCORES)
        if not isinstance(obj["scoreLog"], list):
            obj["scoreLog"] = [obj["scoreLog"]]
    else:
        obj["entries"] = load_json_or_jsonl(folder / BUNDLE_TRACE)
        if (folder / BUNDLE_PAUSES).is_file():
            pauses = load_json_or_jsonl(folder / BUNDLE_PAUSES)
            obj["pauses"] = pauses if isinstance(pauses, list) else [pauses]
    r = _vivaria_run(obj, folder, resolver, task, label, folder.name)
    return make_run(r.kind, r.run_id, r.env, r.label, r.scorings, finished=r.finished, source=str(folder),
                    working_s=r.working_s, human=r.human, notes=[n for n in r.notes if n != "from score-log rows"],
                    setting_differs=r.setting_differs, participant=r.participant, internet=r.internet,
                    ai_tools=r.ai_tools)


# -- any source -------------------------------------------------------------------------------
def _looks_like_inspect_json(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("eval"), dict) and "version" in data


def read_file(path: Path, resolver: EnvResolver, *, task: str | None = None, label: str | None = None) -> list[Run]:
    """Runs from one file, told apart by suffix and content."""
    suffix = path.suffix.lower()
    if suffix in INSPECT_SUFFIXES:
        return read_inspect_log(path, resolver, task=task, label=label)
    if suffix in JSON_SUFFIXES:
        data = load_json_or_jsonl(path)
        if _looks_like_inspect_json(data):
            return read_inspect_log(path, resolver, task=task, label=label)
        return read_vivaria(path, resolver, task=task, label=label, data=data)
    raise CompareError(f"{path}: not a run file (expected .eval, .json or .jsonl)")


@dataclass
class Loaded:
    runs: list[Run] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what a source left out on purpose (METR's other suites)

    def add(self, runs: Iterable[Run]) -> None:
        seen = {(r.kind, r.source, r.run_id) for r in self.runs}
        for r in runs:
            if (r.kind, r.source, r.run_id) not in seen:
                self.runs.append(r)
                seen.add((r.kind, r.source, r.run_id))


def _scan(folder: Path) -> list[Path]:
    """Session folders and run files under a folder (session folders are not entered)."""
    found: list[Path] = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith((".", "_")):
            continue
        if is_session_folder(p) or is_vivaria_bundle(p):
            found.append(p)
        elif p.is_dir():
            found += _scan(p)
        elif p.suffix.lower() in INSPECT_SUFFIXES + JSON_SUFFIXES:
            found.append(p)
    return found


def read_path(path: Path, resolver: EnvResolver, *, task: str | None = None, label: str | None = None) -> list[Run]:
    if is_session_folder(path):
        return [read_human_session(path, resolver)]
    if is_vivaria_bundle(path):
        return [read_vivaria_bundle(path, resolver, task=task, label=label)]
    return read_file(path, resolver, task=task, label=label)


def load_sources(sources: Sequence[str | Path], resolver: EnvResolver, *, sessions_dir: Path | None = None,
                 task: str | None = None, label: str | None = None) -> Loaded:
    """Read every source: session ids (looked up in ``sessions_dir``), session folders, run files,
    or folders of any of these. Named sources must read; scanned ones may be skipped (warned)."""
    from ..workstation import find_session

    from .published_runs import is_published_file, read_published

    loaded = Loaded()

    def read_one(f: Path) -> None:
        if is_published_file(f):
            got = read_published(f, resolver)
            loaded.add(got.runs)
            loaded.notes += got.notes
        else:
            loaded.add(read_path(f, resolver, task=task, label=label))

    for src in sources:
        path = Path(src)
        if not path.exists():
            if path.suffix.lower() in INSPECT_SUFFIXES + JSON_SUFFIXES:  # a run file's name, not a session id
                raise CompareError(f"{src}: no such file (looked in {path.absolute().parent})", kept="nothing was compared",
                                   fix="check the file's name and folder")
            if sessions_dir is None or isinstance(src, Path) or "/" in str(src):
                raise CompareError(f"{src}: no such file, folder or session",
                                   fix="name a session id, a session folder, an .eval/.json/.jsonl file or a folder of them")
            path = find_session(sessions_dir, str(src))
        if path.is_dir() and not is_session_folder(path) and not is_vivaria_bundle(path):
            files = _scan(path)
            if not files:
                loaded.warnings.append(f"{path}: no sessions or run files found")
            for f in files:
                try:
                    read_one(f)
                except CompareError as exc:
                    loaded.warnings.append(f"skipped {f}: {exc.what}")
        else:
            read_one(path)
    return loaded


def filter_runs(runs: Iterable[Run], resolver: EnvResolver, envs: Sequence[str] = (), *,
                finished_only: bool = False) -> list[Run]:
    """Runs of the named environments (any accepted name), finished ones only if asked."""
    runs = list(runs)
    present = {r.env_id for r in runs}
    wanted = {e if e in present else resolver.env_id(e) for e in envs} if envs else None
    out = []
    for r in runs:
        if wanted is not None and r.env_id not in wanted:
            continue
        if finished_only and not r.finished:
            continue
        out.append(r)
    return out
