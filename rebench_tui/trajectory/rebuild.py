"""``session.json`` and the score log rebuilt from the audit log, the record of truth.

Both are derived: ``session.json`` states what the log's rows say (the start row's setting,
anchors and score rule; pauses, warnings, the submission, the finish and its final score; the
clock as the last row left it), the score log has one row per scoring row. When either is
missing, damaged or disagrees with the log (``verify`` says so), :func:`rebuild` writes it again
from the log. What the log does not hold (the image tag, the software versions in ``metadata``)
is taken from the old ``session.json`` where it still reads as JSON, else from the environment's
manifest (``facts``), else left empty; ``metadata.repaired`` says when and what was rebuilt.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

from ..errors import SessionError
from ..hashing import sha256_file
from ..safe_write import write_whole
from . import score_log
from .audit import read_entries
from .entries import log_event
from .records import AUDIT, META, SCORE_LOG, ClockModel, Pause, SessionMeta
from .state import chain_state
from .verify import Report, check_chain, check_score_log, check_state, read_meta

STARTED = re.compile(r"session started: (?P<title>.*) \((?P<task>\S+) (?P<version>\S+)\), profile ")


def intact_rows(folder: Path) -> list[dict[str, Any]]:
    """The audit log's rows, once its chain checks out; a SessionError naming the damage otherwise."""
    report = Report(folder)
    rows = check_chain(folder / AUDIT, report)
    bad = [f for f in report.findings if not f.ok and f.check != "side journal"]  # waiting rows are not damage
    if bad or not rows:
        what = str(bad[0]) if bad else "the audit log holds no row"
        raise SessionError(f"session {folder.name}: nothing can be rebuilt from a damaged audit log: {what}",
                           kept="every file of the session, untouched",
                           fix="the audit log is the record itself and cannot be rebuilt; keep the folder as it is "
                               "(`rebench-tui verify` names the damaged line)")
    return rows


def _events(rows: list[dict[str, Any]]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    return [(r, f) for r in rows if (f := log_event(r.get("content"))) is not None]


def _clock(rows: list[dict[str, Any]], limit_s: float, finished: bool) -> tuple[ClockModel, list[Pause]]:
    """The clock as the last row left it, and the pauses: working time keeps running unless paused."""
    running, pauses = True, []
    for row, facts in _events(rows):
        event, at = facts.get("event"), int(row["calledAt"])
        if event == "pause":
            running = False
            pauses.append(Pause(start=at, reason="pauseHook"))
        elif event == "resume":
            running = True
            if pauses and pauses[-1].end is None:
                pauses[-1].end = at
        elif event == "session_finished":
            running = False
            if pauses and pauses[-1].end is None:
                pauses[-1].end = at
    last = rows[-1]
    banked = float(last.get("workingMs", (last.get("usageTotalSeconds") or 0) * 1000)) / 1000
    since = None if (finished or not running) else int(last["calledAt"]) / 1000
    return ClockModel(limit_s=limit_s, banked_s=min(banked, limit_s), running_since_wall=since), pauses


def _warnings(rows: list[dict[str, Any]]) -> list[int]:
    given: list[int] = []
    for _row, facts in _events(rows):
        if facts.get("event") == "time_warning":
            given += sorted({int(facts["remaining_s"]), *map(int, facts.get("also_passed") or [])}, reverse=True)
    return given


def _named(started: dict[str, Any], text: str, base: dict[str, Any], facts: dict[str, Any]) -> dict[str, Any]:
    """Task id, version and title: the manifest's (``facts``), the old file's, or the start row's words."""
    m = STARTED.match(text)
    words = {"task_id": m["task"], "task_version": m["version"], "title": m["title"]} if m else {}
    out = {}
    for key in ("task_id", "task_version", "title"):
        out[key] = facts.get(key) or base.get(key) or words.get(key) or started.get("env") or "unknown"
    return out


def meta_from_chain(rows: list[dict[str, Any]], folder: Path, base: dict[str, Any] | None = None,
                    facts: dict[str, Any] | None = None) -> SessionMeta:
    """``session.json`` as the audit log's rows state it (see the module's docstring)."""
    base, facts = dict(base or {}), dict(facts or {})
    evs = _events(rows)
    first_row, started = next(((r, f) for r, f in evs if f.get("event") == "session_started"), (rows[0], {}))
    state = chain_state(rows, folder)
    finish = state.finish or {}
    sandbox = started.get("sandbox") or (base.get("metadata") or {}).get("sandbox") or {}
    score = started.get("score") or {}
    anchors = started.get("anchors") or base.get("anchors") or {}
    limit = float(started.get("time_limit_s") or (base.get("clock") or {}).get("limit_s") or 8 * 3600)
    clock, pauses = _clock(rows, limit, state.finished)
    submissions = [r["content"]["value"] for r in rows if r["content"].get("type") == "submission"]
    text = (first_row["content"].get("content") or [""])[0]
    metadata = {**(base.get("metadata") if isinstance(base.get("metadata"), dict) else {}), "sandbox": sandbox}
    return SessionMeta(
        id=folder.name, run_id=int(rows[0]["runId"]), env_id=str(started.get("env") or base.get("env_id") or "unknown"),
        **_named(started, str(text), base, facts), profile=str(started.get("profile") or base.get("profile") or "unknown"),
        runtime=str(sandbox.get("runtime") or base.get("runtime") or "local"),
        host=str(sandbox.get("host") or base.get("host") or "local"),
        isolated=bool(sandbox.get("isolated", base.get("isolated", False))),
        image=base.get("image") if isinstance(base.get("image"), str) else None,
        container=sandbox.get("container") or base.get("container"),
        created_at=int(base.get("created_at") or first_row["calledAt"]),
        started_at=int(base.get("started_at") or first_row["calledAt"]),
        completed_at=(int(base.get("completed_at") or rows[state.finish_line - 1]["calledAt"])
                      if state.finish_line else None),
        status=state.status, finish_reason=finish.get("reason"), clock=clock, pauses=pauses,
        warnings_given=_warnings(rows), direction=str(score.get("direction") or base.get("direction")),
        aggregation=str(score.get("aggregation") or base.get("aggregation")),
        visibility=str(score.get("visibility") or base.get("visibility") or "visible"),
        start_score=float(anchors.get("start", base.get("start_score", math.nan))),
        reference_score=float(anchors.get("reference", base.get("reference_score", math.nan))),
        anchors=anchors or None, setting=started.get("setting", base.get("setting")),
        score_timeout_s=float(facts.get("score_timeout_s") or base.get("score_timeout_s") or score.get("timeout") or 600),
        gpus=_rehearsal_gpus(sandbox, base, facts),
        participant=started.get("participant") or base.get("participant") or {},
        timing=bool(score.get("timing", base.get("timing", False))),
        recount_runs=int(score.get("recount", base.get("recount_runs", 0)) or 0),
        submission=submissions[-1] if submissions else None,
        final_score=_number(finish.get("final_score")), final_attempt=finish.get("final_attempt"),
        final_scorings=list(finish.get("final_scorings") or []), metadata=metadata,
        seal_to=started.get("seal_to"), final_sealed=finish.get("final_sealed"),
    )


def _rehearsal_gpus(sandbox: dict[str, Any], base: dict[str, Any], facts: dict[str, Any]) -> int | None:
    """GPUs of a rehearsal (fewer than the profile's), as the old file said or the sandbox shows."""
    if "gpus" in base:
        return base["gpus"]
    held, own = sandbox.get("gpus"), facts.get("profile_gpus")
    return held if isinstance(held, int) and isinstance(own, int) and held != own else None


def _number(value: Any) -> float | None:
    if value is None:
        return None
    return float(value)  # "NaN"/"Infinity" strings read as floats too


def _old_meta(folder: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((folder / META).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _why(finding: Any) -> str:
    """A verify finding's words, without its pointer to repair (which is what is running)."""
    return str(finding.detail).split("; `rebench-tui repair")[0]


def _set_aside(path: Path) -> str | None:
    """Move what is at ``path`` (a damaged file, or a folder in its way) aside, never deleting it;
    returns its new name, or None where there was nothing."""
    if not path.exists() and not path.is_symlink():
        return None
    n = 0
    while (aside := path.with_name(f"{path.name}.before-repair-{n}")).exists():
        n += 1
    path.rename(aside)
    return aside.name


def _write_score_log(folder: Path, rows: list[dict[str, Any]]) -> int:
    """score_log.csv from the scoring rows, as the scorer writes it (timestamp: the row's calledAt)."""
    lines = [score_log.row_text(None, math.nan, {}, {})]
    for r in rows:
        c = r["content"]
        if c.get("type") == "intermediateScore":
            value = math.nan if c["score"] is None else float(c["score"])
            lines.append(score_log.row_text(int(r["calledAt"]) / 1000, value, c.get("message") or {}, c.get("details") or {}))
    write_whole(folder / SCORE_LOG, "".join(lines), durable=True)
    return len(lines) - 1


def _against_finish(folder: Path, rows: list[dict[str, Any]]) -> str:
    """For a finished session: whether the rebuilt score log is the one the finish row hashed."""
    recorded = ((chain_state(rows, folder).finish or {}).get("files") or {}).get(SCORE_LOG)
    if recorded is None:
        return ""
    if sha256_file(folder / SCORE_LOG) == recorded:
        return "; byte for byte the file the finish row recorded (its sha256 matches)"
    return "; it differs from the file the finish row recorded (its sha256 does not match: `verify` will say so)"


def rebuild(folder: Path, facts: dict[str, Any] | None = None) -> list[str]:
    """Rewrite what disagrees with the audit log (or is missing or damaged): ``session.json``,
    ``score_log.csv``. Returns one line per file saying what was done. The caller holds the lock."""
    rows = intact_rows(folder)
    done = []
    check = Report(folder)
    meta = read_meta(folder, check)
    check_state(folder, rows, meta, check)
    check_score_log(folder, rows, check)
    meta_bad = [f for f in check.findings if not f.ok and f.check in ("session.json", "session state")]
    log_bad = [f for f in check.findings if not f.ok and f.check == "score log"]
    if meta_bad:
        base = _old_meta(folder)
        new = meta_from_chain(rows, folder, base, facts)
        new.metadata["repaired"] = {"rebuilt": META, "why": meta_bad[0].detail[:300],
                                    "kept_from_old_file": base is not None}
        aside = _set_aside(folder / META)
        new.save(folder / META)
        done.append(f"{META}: rebuilt from the audit log ({len(rows)} rows): status {new.status}, "
                    f"{len(new.pauses)} pause(s), final score {new.final_score}"
                    + ("; fields the log does not hold kept from the old file" if base is not None else "")
                    + f" — it was: {_why(meta_bad[0])}" + (f"; the old one kept as {aside}" if aside else ""))
    else:
        done.append(f"{META}: agrees with the audit log; left as it is")
    if log_bad:
        aside = _set_aside(folder / SCORE_LOG)
        n = _write_score_log(folder, rows)
        done.append(f"{SCORE_LOG}: rebuilt from the audit log's {n} scoring row(s) — it was: {_why(log_bad[0])}"
                    + _against_finish(folder, rows) + (f"; the old one kept as {aside}" if aside else ""))
    else:
        done.append(f"{SCORE_LOG}: agrees with the audit log; left as it is")
    return done
