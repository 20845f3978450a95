"""A scoring exists only if its start was recorded first.

Before a scoring's scorer runs, the session writes a start row (a ``log`` row, event
``scoring_started``) naming the scoring's token, the attempt and the working time; the scoring's
result row carries the same token (``details.room.token``). So a result is recorded only against a
start the chain (and a study's witness) had before the result existed. :func:`check` reads a
session's rows: every result with a token has exactly one earlier start of that token, no token
is used twice, and a start past the time limit is only the final scoring's. A result without a
token is a session from before scoring rooms, unless the session has start rows: then it is one
that no start row announced.
"""

from __future__ import annotations

from typing import Any

from .entries import log_event

STARTED = "scoring_started"


def _token(content: dict[str, Any]) -> str | None:
    details = content.get("details") if isinstance(content.get("details"), dict) else {}
    room = details.get("room") if isinstance(details.get("room"), dict) else {}
    token = room.get("token")
    if token is None and isinstance(details.get("interrupted"), dict):
        token = details["interrupted"].get("token")
    if token is None and isinstance(details.get("recovered"), dict):
        token = details["recovered"].get("token")
    return token if isinstance(token, str) else None


def check(rows: list[dict[str, Any]], limit_s: float | None) -> list[tuple[bool, str, int | None]]:
    """(ok, what, line) findings over a session's chained rows (1-based lines)."""
    starts: dict[str, tuple[int, dict[str, Any]]] = {}
    used: set[str] = set()
    problems: list[tuple[bool, str, int | None]] = []
    any_start = any((log_event(r.get("content")) or {}).get("event") == STARTED for r in rows)
    results = 0
    for n, row in enumerate(rows, 1):
        content = row.get("content") if isinstance(row.get("content"), dict) else {}
        facts = log_event(content)
        if facts is not None and facts.get("event") == STARTED:
            token = facts.get("token")
            if not isinstance(token, str) or token in starts:
                problems.append((False, f"a scoring start row names no token, or one named before ({token!r})", n))
                continue
            starts[token] = (n, facts)
            working = facts.get("working_s")
            if (limit_s is not None and isinstance(working, (int, float)) and working > limit_s + 1e-6
                    and not facts.get("final")):
                problems.append((False, f"scoring {token[:12]} started at {working:.0f} s of working time, past the "
                                        f"limit of {limit_s:.0f} s, and is not the final scoring", n))
            continue
        if content.get("type") != "intermediateScore":
            continue
        results += 1
        token = _token(content)
        if token is None:
            if any_start:
                problems.append((False, "a scoring result that no start row announced (no token)", n))
            continue
        if token not in starts:
            problems.append((False, f"a scoring result (token {token[:12]}) with no earlier start row", n))
        elif token in used:
            problems.append((False, f"a second result for scoring {token[:12]} (a result counts once)", n))
        used.add(token)
    if not problems and any_start:
        problems.append((True, f"{results} scoring result(s), each against a start row recorded before it", None))
    return problems
