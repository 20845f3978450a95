"""Reading human session folders (``session.json`` + ``audit.jsonl``) as runs: every
``intermediateScore`` row at its pause-excluded working time, normalized by the anchors the
session recorded, under the rules its hash-chained start row holds."""

from __future__ import annotations

from pathlib import Path

from ...catalog.anchors import Anchors, AnchorsError
from ...scoring import Aggregation, Direction
from ..runs import HUMAN_LABEL, CompareError, EnvInfo, EnvResolver, Run, SourceKind, make_run, setting_differs
from .parsing import _pause_dicts, trace_scorings


def is_session_folder(path: Path) -> bool:
    """A human session's folder: its session.json, or (that file lost or damaged) its audit log."""
    from ...trajectory.records import AUDIT, META

    return path.is_dir() and ((path / META).is_file() or (path / AUDIT).is_file())


def read_human_session(folder: Path, resolver: EnvResolver | None = None) -> Run:
    """A human session folder as a run, normalized by the anchors the session recorded (or by the
    resolver's override, if it has one)."""
    from ...trajectory.audit import read_entries
    from ...trajectory.records import AUDIT, META, SessionMeta
    from ...trajectory.rules import RulesError, restore_rules
    from ...trajectory.sealing import open_record, sealed_note

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


def read_sessions_dir(folder: Path) -> list[Path]:
    return sorted(p for p in folder.iterdir() if is_session_folder(p)) if folder.is_dir() else []
