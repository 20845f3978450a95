"""Reading Inspect eval logs (``.eval``, or Inspect's ``.json``) as runs: one run per sample, from
its intermediate ``ScoreEvent``s at their working time, or (a ``human_cli`` log without score
events) from its store's ``HumanAgentState:scorings``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ...scoring import attempt_fingerprint, is_recount
from ..runs import HUMAN_LABEL, CompareError, EnvInfo, EnvResolver, Run, Scoring, SourceKind, UnknownEnvironment, make_run, setting_differs
from .parsing import own_anchors, score_value, who_of

INSPECT_SUFFIXES = (".eval",)
HUMAN_MODELS = ("none/none", "none")


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
