"""The rules that decide a session's score, as its hash-chained audit log recorded them.

``session.json`` repeats these (for readers in a hurry) but is not their source: a participant who
can edit the session folder could otherwise switch the finish's recount off, hand back spent
working time or move the anchors every normalized score is measured between. So the finish, the
clock, ``compare`` and the collector read them from here, and ``verify`` checks that
``session.json`` says the same.

The start row (event ``session_started``) states them; a later ``rules_changed`` row may change
any of them (its ``rules`` object holds the fields it changes, under the names used here).
Working time is the rows' ``workingMs``; it never goes back.

A record whose rules have the wrong type (``time_limit_s: "eight hours"``, direction
``"sideways"``) raises :class:`RulesError`, one line naming the field and the line.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from ..errors import RebenchError
from ..scoring import Aggregation, Direction, Rule
from .entries import log_event

START_EVENT = "session_started"
CHANGE_EVENT = "rules_changed"
MAX_RECOUNT = 25


class RulesError(RebenchError):
    """The audit log's rules do not read (a field of the wrong type or value)."""


@dataclass(frozen=True)
class ChainRules:
    env_id: str
    profile: str
    direction: str
    aggregation: str
    visibility: str
    timing: bool
    recount_runs: int
    time_limit_s: float
    anchors: dict[str, Any] | None
    setting: dict[str, Any] | None
    start_line: int  # the start row's line (1-based)
    changed_at: list[int] = field(default_factory=list)  # lines of rows that changed a rule
    recorded: frozenset[str] = frozenset()  # the rules the rows state (older sessions lack some)
    seal_to: str | None = None  # the public key hidden scores are sealed to (trajectory.sealing); None: in clear

    @property
    def start_score(self) -> float:
        return float((self.anchors or {}).get("start", math.nan))

    @property
    def reference_score(self) -> float:
        return float((self.anchors or {}).get("reference", math.nan))

    def rule(self) -> Rule:
        return Rule(Aggregation(self.aggregation), Direction(self.direction), failures_count=self.timing)

    def meta_fields(self) -> dict[str, Any]:
        """What session.json must say for each rule the rows state (its field names, its shapes)."""
        every = {"env_id": self.env_id, "profile": self.profile, "direction": self.direction,
                "aggregation": self.aggregation, "visibility": self.visibility, "timing": self.timing,
                "recount_runs": self.recount_runs, "clock.limit_s": self.time_limit_s, "anchors": self.anchors,
                "start_score": self.start_score, "reference_score": self.reference_score, "setting": self.setting,
                "seal_to": self.seal_to}
        named = {"clock.limit_s": "time_limit_s", "start_score": "anchors", "reference_score": "anchors"}
        return {k: v for k, v in every.items() if named.get(k, k) in self.recorded}


def _bad(n: int, name: str, value: Any, want: str) -> RulesError:
    return RulesError(f"line {n} of the audit log records {name} {str(value)[:60]!r}, which is not {want}",
                      kept="every record, untouched",
                      fix="`rebench-tui verify` checks the session; its score cannot be counted by these rules")


def _read(n: int, facts: dict[str, Any], into: dict[str, Any]) -> None:
    """The rules a start or change row states, checked for type, into ``into``."""
    score = facts.get("score")
    if score is not None and not isinstance(score, dict):
        raise _bad(n, "score", score, "an object")
    score = score or {}
    flat = {**score, **{k: v for k, v in facts.items() if k != "score"}}
    for key, enum in (("direction", Direction), ("aggregation", Aggregation)):
        if key in flat:
            try:
                into[key] = enum(flat[key]).value
            except (ValueError, TypeError):
                raise _bad(n, key, flat[key], "one of " + ", ".join(e.value for e in enum)) from None
    if "visibility" in flat:
        if flat["visibility"] not in ("visible", "hidden"):
            raise _bad(n, "visibility", flat["visibility"], "visible or hidden")
        into["visibility"] = flat["visibility"]
    if "timing" in flat:
        if not isinstance(flat["timing"], bool):
            raise _bad(n, "timing", flat["timing"], "true or false")
        into["timing"] = flat["timing"]
    recount = flat.get("recount", flat.get("recount_runs"))
    if recount is not None:
        if isinstance(recount, bool) or not isinstance(recount, int) or not 0 <= recount <= MAX_RECOUNT:
            raise _bad(n, "recount", recount, f"a whole number from 0 to {MAX_RECOUNT}")
        into["recount_runs"] = recount
    if "time_limit_s" in flat:
        limit = flat["time_limit_s"]
        if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not math.isfinite(limit) or limit <= 0:
            raise _bad(n, "time_limit_s", limit, "a positive number of seconds")
        into["time_limit_s"] = float(limit)
    for key in ("env", "profile"):
        if key in flat:
            if not isinstance(flat[key], str):
                raise _bad(n, key, flat[key], "a name")
            into["env_id" if key == "env" else key] = flat[key]
    _read_records(n, flat, into)


def _read_records(n: int, flat: dict[str, Any], into: dict[str, Any]) -> None:
    """The anchors, the setting and the key hidden scores are sealed to that a row states."""
    if "seal_to" in flat:
        if flat["seal_to"] is not None and not isinstance(flat["seal_to"], str):
            raise _bad(n, "seal_to", flat["seal_to"], "a public key")
        into["seal_to"] = flat["seal_to"]
    if "anchors" in flat:
        anchors = flat["anchors"]
        if anchors is not None:
            try:
                ok = isinstance(anchors, dict) and all(
                    not isinstance(anchors[k], bool) and math.isfinite(float(anchors[k])) for k in ("start", "reference"))
            except (KeyError, TypeError, ValueError):
                ok = False
            if not ok:
                raise _bad(n, "anchors", anchors, "an object with a numeric start and reference")
        into["anchors"] = anchors
    if "setting" in flat:
        if flat["setting"] is not None and not isinstance(flat["setting"], dict):
            raise _bad(n, "setting", flat["setting"], "an object")
        into["setting"] = flat["setting"]


def check_rule_facts(facts: dict[str, Any], line: int) -> None:
    """A start row's or a rules_changed row's rules read (RulesError naming the field otherwise)."""
    got: dict[str, Any] = {}
    if facts.get("event") == CHANGE_EVENT:
        if not isinstance(facts.get("rules"), dict):
            raise _bad(line, "rules", facts.get("rules"), "an object")
        _read(line, facts["rules"], got)
        return
    _read(line, facts, got)
    for key in ("direction", "aggregation"):
        if key not in got:
            raise RulesError(f"line {line} of the audit log (the start row) records no {key}",
                             kept="every record, untouched", fix="`rebench-tui verify` checks the session")


def chain_rules(rows: list[dict[str, Any]]) -> ChainRules | None:
    """The rules the rows record (None: no start row, a session recorded before it held them)."""
    got: dict[str, Any] = {}
    start_line: int | None = None
    changed: list[int] = []
    for n, row in enumerate(rows, start=1):
        facts = log_event(row.get("content")) if isinstance(row, dict) else None
        if facts is None:
            continue
        event = facts.get("event")
        if event == START_EVENT and start_line is None:
            start_line = n
            _read(n, facts, got)
        elif event == CHANGE_EVENT and start_line is not None:
            rules = facts.get("rules")
            if not isinstance(rules, dict):
                raise _bad(n, "rules", rules, "an object")
            _read(n, rules, got)
            changed.append(n)
    if start_line is None:
        return None
    for key in ("direction", "aggregation"):
        if key not in got:
            raise RulesError(f"line {start_line} of the audit log (the start row) records no {key}",
                             kept="every record, untouched", fix="`rebench-tui verify` checks the session")
    return ChainRules(env_id=got.get("env_id", ""), profile=got.get("profile", ""), direction=got["direction"],
                      aggregation=got["aggregation"], visibility=got.get("visibility", "visible"),
                      timing=got.get("timing", False), recount_runs=got.get("recount_runs", 0),
                      time_limit_s=got.get("time_limit_s", 8 * 3600.0), anchors=got.get("anchors"),
                      setting=got.get("setting"), start_line=start_line, changed_at=changed,
                      recorded=frozenset(got), seal_to=got.get("seal_to"))


def working_ms(row: dict[str, Any]) -> int | None:
    """The working time a row records (ms), or None where it records none."""
    value = row.get("workingMs")
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return int(value)
    usage = row.get("usageTotalSeconds")
    if isinstance(usage, (int, float)) and not isinstance(usage, bool):
        return int(usage * 1000)
    return None


def working_went_back(rows: list[dict[str, Any]]) -> tuple[int, int, int] | None:
    """The first line whose working time is less than an earlier row's: (line, its ms, the earlier ms)."""
    most = -1
    for n, row in enumerate(rows, start=1):
        w = working_ms(row)
        if w is None:
            continue
        if w < most:
            return n, w, most
        most = w
    return None


def chain_working_s(rows: list[dict[str, Any]]) -> float:
    """The most working time any row records (seconds)."""
    return max([0] + [w for r in rows if (w := working_ms(r)) is not None]) / 1000


def restore_rules(meta: Any, rows: list[dict[str, Any]]) -> list[str]:
    """Put the chain's rules (and its working time, where the clock says less) into ``meta`` (a
    ``SessionMeta`` about to be written to): what the session counts by from here on. Returns the
    fields that session.json had otherwise (edited, or written without its row)."""
    rules = chain_rules(rows)
    changed: list[str] = []
    if rules is not None:
        for key, want in rules.meta_fields().items():
            owner, name = (meta.clock, "limit_s") if key == "clock.limit_s" else (meta, key)
            have = getattr(owner, name)
            same = (have == want or (isinstance(have, float) and isinstance(want, float)
                                     and math.isnan(have) and math.isnan(want)))
            if not same:
                setattr(owner, name, want)
                changed.append(key)
    if rows:
        last_s = rows[-1]["calledAt"] / 1000
        since = meta.clock.running_since_wall
        at_last = meta.clock.banked_s + (max(0.0, last_s - since) if since is not None else 0.0)
        recorded = chain_working_s(rows)
        if at_last + 1.0 < recorded:  # spent working time handed back: the rows' figure holds
            meta.clock.banked_s = recorded
            meta.clock.running_since_wall = last_s if since is not None else None
            changed.append("clock.banked_s")
    return changed
