"""Checks a session's records: the audit log's hash chain and contract, the session's state as
the log says it (finished, active, interrupted; nothing after the finish row) against
``session.json``, the score log against the audit log, the session file's final score, and files
recorded at the finish.

Each check reports the first place it fails (a line number where it has one), so a reader
knows exactly where a record was changed. A damaged ``session.json`` or score log is a finding
(with ``rebench-tui repair`` as the way back), never a crash.
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from ..scoring import Aggregation, Direction, Rule, attempt_fingerprint, is_recount
from . import scoring_starts
from .audit import genesis_hash, line_hash
from .entries import TraceEntry
from .records import AUDIT, META, SessionMeta
from .rules import ChainRules, RulesError, chain_rules, chain_working_s, working_went_back
from .sealing import is_sealed
from .verify_score_log import REPAIR, _same, check_score_log
from .state import ChainState, chain_state


@dataclass
class Finding:
    check: str
    ok: bool
    detail: str
    line: int | None = None

    def __str__(self) -> str:
        where = f" (line {self.line})" if self.line else ""
        return f"{'ok  ' if self.ok else 'FAIL'} {self.check}{where}: {self.detail}"


@dataclass
class Report:
    folder: Path
    findings: list[Finding] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(f.ok for f in self.findings)

    def add(self, check: str, ok: bool, detail: str, line: int | None = None) -> None:
        self.findings.append(Finding(check, ok, detail, line))


def sha256_path(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _hash_problem(line: str, row: dict[str, Any], prev_hash: str) -> tuple[str | None, str | None]:
    """The row's claimed hash, and what is wrong with it and its link to the row before (None: nothing)."""
    claimed, actual = line_hash(line)
    if claimed is None:
        return claimed, "the row has no hash (written by an older version, or edited)"
    if claimed != actual or row.get("hash") != claimed:
        return claimed, "the row's bytes do not match its hash: it was changed after it was written"
    if row.get("prevHash") != prev_hash:
        return claimed, "the row does not follow the previous one: a row before it was removed, added or moved"
    return claimed, None


def _chained_row(n: int, bline: bytes, prev_hash: str | None, last_called: int, rows: list[dict[str, Any]],
                 report: Report) -> tuple[dict[str, Any], str, int] | None:
    """Line ``n`` checked after ``rows``: the row, its hash and its calledAt, or None once a finding is reported."""
    try:
        line = bline.decode("utf-8")
        row = json.loads(line)
    except (UnicodeDecodeError, ValueError) as exc:
        report.add("audit log", False, f"not valid JSON: {exc}", n)
        return None
    if not isinstance(row, dict):
        report.add("audit log", False, "a line is not a JSON object", n)
        return None
    if prev_hash is None:
        prev_hash = genesis_hash(row.get("runId", 0))
    claimed, problem = _hash_problem(line, row, prev_hash)
    if problem is not None:
        report.add("hash chain", False, problem, n)
        return None
    assert claimed is not None
    try:
        entry = TraceEntry.model_validate(row)
    except Exception as exc:  # noqa: BLE001 - reported as a finding
        report.add("trace-entry contract", False, str(exc).splitlines()[0], n)
        return None
    if entry.calledAt < last_called:
        report.add("calledAt order", False, f"calledAt {entry.calledAt} is before the previous row's {last_called}", n)
        return None
    if rows and entry.runId != rows[0]["runId"]:
        report.add("audit log", False, f"runId {entry.runId} differs from the first row's", n)
        return None
    return row, claimed, entry.calledAt


def check_chain(path: Path, report: Report) -> list[dict[str, Any]]:
    """The audit log: parse, contract, calledAt never decreasing, one runId, and the hash chain."""
    rows: list[dict[str, Any]] = []
    if not path.is_file():
        report.add("audit log", False, f"{path.name} is missing")
        return rows
    raw = path.read_bytes()
    if raw and not raw.endswith(b"\n"):
        report.add("audit log", False, "the last line is incomplete (no newline): cut or edited",
                   raw.count(b"\n") + 1)
        return rows
    prev_hash: str | None = None
    last_called = -1
    for n, bline in enumerate(raw.splitlines(keepends=True), start=1):
        checked = _chained_row(n, bline, prev_hash, last_called, rows, report)
        if checked is None:
            return rows
        row, prev_hash, last_called = checked
        rows.append(row)
    report.add("hash chain", True, f"{len(rows)} rows, every hash and link intact")
    pending = path.with_name(path.name + ".pending")
    if pending.exists():
        report.add("side journal", False, f"{pending.name} holds rows not yet merged (open the session once to merge them)")
    return rows


def read_meta(folder: Path, report: Report) -> dict[str, Any] | None:
    """session.json as a dict, or None with a finding saying why it cannot be read."""
    path = folder / META
    fix = REPAIR.format(id=folder.name)
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        report.add("session.json", False, f"missing; {fix}")
        return None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as exc:
        report.add("session.json", False, f"unreadable ({str(exc).splitlines()[0][:200]}); {fix}")
        return None
    if not isinstance(meta, dict):
        report.add("session.json", False, f"not a JSON object; {fix}")
        return None
    try:
        SessionMeta.model_validate(meta)
    except ValidationError as exc:  # still read for the checks below, which take what they need from it
        first = exc.errors()[0] if exc.errors() else {}
        where = ".".join(str(x) for x in first.get("loc", ())) or "the file"
        report.add("session.json", False, f"does not read as a session ({where}: {first.get('msg')}); {fix}")
    return meta


def check_state(folder: Path, rows: list[dict[str, Any]], meta: dict[str, Any] | None, report: Report) -> ChainState:
    """The state the audit log says (finished, active, interrupted), nothing after the finish row,
    and session.json saying the same."""
    state = chain_state(rows, folder)
    if state.after_finish:
        report.add("rows after the finish", False, f"{state.after_finish} row(s) follow the finish row of line "
                   f"{state.finish_line}: a finished session takes no row", (state.finish_line or 0) + 1)
    if meta is None:
        report.add("session state", True, f"{state.detail} (from the audit log)")
        return state
    stated = meta.get("status")
    ok = stated == state.status
    if ok and state.finished and meta.get("finish_reason") != (state.finish or {}).get("reason"):
        ok = False
        stated = f"finished ({meta.get('finish_reason')})"
    report.add("session state", ok, f"{state.detail} (from the audit log)" + (
        "; session.json agrees" if ok else f"; session.json says {stated!s}: edited, or written without its row; "
                                           + REPAIR.format(id=folder.name)))
    return state


def check_final(folder: Path, rows: list[dict[str, Any]], report: Report, meta: dict[str, Any] | None = None,
                state: ChainState | None = None) -> None:
    """A finished session (by its finish row, or by session.json): session.json's final score is
    the one the scorings give, the finish row is there, and the files it hashed are unchanged.
    ``meta``/``state``: session.json and the chain's state where the caller has them already."""
    if meta is None and (folder / META).is_file():
        meta = read_meta(folder, Report(folder))  # its problems are check_state's findings
    state = state or chain_state(rows, folder)
    if not state.finished and (meta or {}).get("status") != "finished":
        report.add("final score", True, "session not finished: no final score to check")
        return
    if meta is not None:
        _check_final_score(rows, meta, report)
    if not state.finished:
        report.add("finish record", False, "the session is marked finished but the audit log has no finish row")
        return
    recorded = (state.finish or {}).get("files", {})
    changed = [rel for rel, digest in recorded.items()
               if not (folder / rel).is_file() or sha256_path(folder / rel) != digest]
    report.add("files at finish", not changed,
               f"{len(recorded)} files match the hashes recorded at the finish" if not changed
               else f"changed since the finish: {', '.join(changed[:10])}")


def _check_final_score(rows: list[dict[str, Any]], meta: dict[str, Any], report: Report) -> None:
    """session.json's final score (and final scorings) is what the audit log's scorings give."""
    scorings = [r["content"] for r in rows if r["content"]["type"] == "intermediateScore"]
    if meta.get("final_sealed") or any(is_sealed(c.get("details")) for c in scorings):
        stated = meta.get("final_score")  # sealed: the chain covers the ciphertext; no value may stand beside it
        report.add("final score", stated is None, "sealed to the researcher's key (not counted here: it opens only "
                                                  "with that key)" if stated is None else
                   f"session.json states {stated!r} beside scores that are sealed")
        return
    values = [math.nan if c["score"] is None else float(c["score"]) for c in scorings]
    # Re-scores of unchanged files (the same attempt fingerprint) count with their median; a row
    # recorded without a fingerprint (an older session) is an attempt of its own; a recount at the
    # finish counts alone (scoring.Rule).
    fingerprints = [attempt_fingerprint(c.get("details")) for c in scorings]
    # The rule is the chain's (its start row); session.json's only for a session recorded before
    # the start row held it. Direction plays a part only where failures count.
    try:
        rules = chain_rules(rows)
    except RulesError as exc:
        report.add("final score", False, f"no rule to count by: {exc.what}")
        return
    aggregation = rules.aggregation if rules is not None else meta.get("aggregation")
    try:
        rule = rules.rule() if rules is not None else Rule(
            Aggregation(meta.get("aggregation")), Direction(meta.get("direction", "lower")),
            failures_count=bool(meta.get("timing")))
    except (ValueError, TypeError):
        report.add("final score", False, f"session.json's rule ({meta.get('aggregation')!r}, "
                                         f"{meta.get('direction')!r}) is not one")
        return
    counting = rule.attempt(values, fingerprints, [is_recount(c.get("details")) for c in scorings])
    expected = None if counting is None else counting.score
    stated = meta.get("final_score")
    try:
        ok = (expected is None and stated is None) or (expected is not None and stated is not None
                                                        and _same(expected, float(stated)))
    except (TypeError, ValueError):
        ok = False
    how = "" if counting is None or counting.n == 1 else (
        f" (the {'worst valid' if counting.failures and rule.failures_count else 'median'} of attempt "
        f"{counting.number}'s {counting.n} scorings "
        f"{', '.join(str(i + 1) for i in counting.valid_indexes)})")
    report.add("final score", ok, f"session.json says {stated}, the audit log's scorings give {expected}{how} "
                                  f"by rule {aggregation}")
    named = meta.get("final_scorings")
    if named:  # written since attempts are grouped: the scorings whose median the final score is
        want = [] if counting is None else [i + 1 for i in counting.valid_indexes]
        report.add("final scorings", named == want, f"session.json names scorings {named}, the audit log gives {want}")


def _event_rows(rows: list[dict[str, Any]], event: str) -> list[dict[str, Any]]:
    """The detail dicts of the log rows recording ``event`` (session_started, session_finished, ...)."""
    out = []
    for r in rows:
        content = r["content"].get("content")
        if isinstance(content, list) and len(content) > 1 and isinstance(content[1], dict) and content[1].get("event") == event:
            out.append(content[1])
    return out


def check_setting(rows: list[dict[str, Any]], meta: dict[str, Any] | None, report: Report) -> None:
    """The setting session.json states (what compare flags and --paper-setting-only leaves out) is
    the one the hash-chained start row recorded: an edit to make a run look like the paper's shows."""
    started = _event_rows(rows, "session_started")
    if meta is None or not started or "setting" not in started[0]:
        return  # no readable session.json (a finding already), or a session from before settings were recorded
    stated = meta.get("setting")
    recorded = started[0]["setting"]
    same = stated == recorded
    report.add("paper setting", same, (
        "session.json states the setting the start row recorded: " + ("none" if recorded is None else
                                                                      f"{len(recorded.get('differs', []))} difference(s)")
        if same else "session.json's setting differs from the one the start row recorded (edited after the start?)"))


def check_scoring_starts(rows: list[dict[str, Any]], report: Report) -> None:
    """Each result against a start row recorded before it, once, inside the time limit."""
    started = _event_rows(rows, "session_started")
    limit = started[0].get("time_limit_s") if started else None
    for ok, what, line in scoring_starts.check(rows, limit if isinstance(limit, (int, float)) else None):
        report.add("scoring starts", ok, what, line)


def _meta_value(meta: dict[str, Any], key: str) -> Any:
    value: Any = meta
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def _equal(a: Any, b: Any) -> bool:
    def number(x: Any) -> bool:
        return isinstance(x, (int, float)) and not isinstance(x, bool)
    if number(a) and number(b):
        return _same(float(a), float(b))
    return type(a) is type(b) and a == b


def check_rules(rows: list[dict[str, Any]], meta: dict[str, Any] | None, report: Report) -> ChainRules | None:
    """The rules that decide the score, as the start row (and any rules_changed row) recorded
    them: session.json must repeat each one, and working time never goes back (in the rows, or in
    session.json's clock against the rows)."""
    back = working_went_back(rows)
    if back is not None:
        line, now_ms, before_ms = back
        report.add("working time", False, f"the row records {now_ms} ms of working time, less than the "
                                          f"{before_ms} ms an earlier row recorded: working time never goes back", line)
    try:
        rules = chain_rules(rows)
    except RulesError as exc:
        report.add("rules", False, exc.what)
        return None
    if rules is None or meta is None:
        return rules
    differ = [f"{key} (session.json {str(_meta_value(meta, key))[:60]}, the audit log {str(want)[:60]})"
              for key, want in rules.meta_fields().items() if key != "setting"  # check_setting says that one
              and not _equal(_meta_value(meta, key), want)]
    where = f"line {rules.start_line}" + (f" and {len(rules.changed_at)} change(s)" if rules.changed_at else "")
    report.add("rules", not differ, f"session.json states the rules the audit log recorded ({where})" if not differ
               else f"session.json's {'; '.join(differ)} differ from the audit log ({where}): edited after the "
                    f"start; the audit log's count; " + REPAIR.format(id=report.folder.name))
    clock = meta.get("clock") if isinstance(meta.get("clock"), dict) else {}
    try:
        banked = float(clock.get("banked_s", 0.0))
        since = clock.get("running_since_wall")
        last_s = rows[-1]["calledAt"] / 1000 if rows else 0.0
        at_last = banked + (max(0.0, last_s - float(since)) if since is not None else 0.0)
    except (TypeError, ValueError):
        return rules  # session.json's own shape is read_meta's finding
    recorded = chain_working_s(rows)
    if at_last + 1.0 < recorded:  # a second's grace for rounding
        report.add("working time", False, f"session.json's clock gives {at_last:.0f} s of working time at the last "
                                          f"row, but the audit log recorded {recorded:.0f} s: spent time was handed "
                                          f"back; " + REPAIR.format(id=report.folder.name))
    elif back is None:
        report.add("working time", True, f"never goes back ({recorded:.0f} s recorded)")
    return rules


def verify(folder: Path) -> Report:
    report = Report(folder)
    rows = check_chain(folder / AUDIT, report)
    if report.ok:
        meta = read_meta(folder, report)
        state = check_state(folder, rows, meta, report)
        check_score_log(folder, rows, report)
        check_setting(rows, meta, report)
        check_rules(rows, meta, report)
        check_scoring_starts(rows, report)
        check_final(folder, rows, report, meta, state)
    return report
