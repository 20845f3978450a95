"""Reading Vivaria-shaped runs: a JSON or JSON-lines file of trace entries, of score-log rows
(``elapsedTime`` ms, pauses excluded), or of run objects holding them (``taskId``, ``agent``,
``pauses``, ``startedAt``, ``entries``/``trace`` or ``scoreLog``; a ``runs`` list of such); and a
run bundle folder (``run.json`` with ``trace_entries.jsonl``/``score_log.jsonl``, as
``rebench-tui export --format vivaria`` writes)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from ...scoring import Aggregation, Direction, attempt_fingerprint, is_recount
from ..runs import HUMAN_LABEL, CompareError, EnvInfo, EnvResolver, Run, Scoring, SourceKind, UnknownEnvironment, make_run, setting_differs
from .parsing import own_anchors, row_working_s, score_value, trace_scorings, who_of

JSON_SUFFIXES = (".json", ".jsonl")


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
