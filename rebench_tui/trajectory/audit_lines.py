"""The audit log's lines: the hash chain each line carries (``prevHash`` and, last on the line,
``hash``), escaping what JSON cannot hold, reading the rows back, and checking them against the
trace-entry contract. The writer that appends them is :mod:`rebench_tui.trajectory.audit`."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Any, Callable

from .entries import TraceEntry

HASH_KEY = ',"hash":"'


def genesis_hash(run_id: int) -> str:
    return hashlib.sha256(f"rebench-audit:{run_id}".encode()).hexdigest()


Redact = Callable[[str], str]


_SURROGATE = re.compile("[\ud800-\udfff]")


def escape_surrogates(text: str) -> str:
    """JSON text with lone surrogates (a file name that is not UTF-8, decoded by the OS layer with
    surrogateescape) written as ``\\udcXX`` escapes: valid JSON and UTF-8, and it reads back the same."""
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def chain_line(row: dict[str, Any], prev_hash: str, redact: Redact | None = None) -> tuple[str, str]:
    """Serialize a row with ``prevHash`` and a trailing ``hash`` of the line's own bytes."""
    line, digest, _redacted = _chain(row, prev_hash, redact)
    return line, digest


def _chain(row: dict[str, Any], prev_hash: str, redact: Redact | None) -> tuple[str, str, bool]:
    """:func:`chain_line`, also saying whether redaction changed the text."""
    body = {k: v for k, v in row.items() if k not in ("prevHash", "hash")}
    body["prevHash"] = prev_hash
    text = escape_surrogates(json.dumps(body, ensure_ascii=False, allow_nan=False, separators=(",", ":")))
    redacted = False
    if redact is not None:
        clean = redact(text)  # secret values never reach the file (the hash covers the redacted bytes)
        redacted, text = clean != text, clean
    prefix = text[:-1] + HASH_KEY
    digest = hashlib.sha256(prefix.encode("utf-8")).hexdigest()
    return prefix + digest + '"}\n', digest, redacted


def line_hash(line: str) -> tuple[str | None, str | None]:
    """(claimed hash, recomputed hash) of one log line; (None, None) if it has no hash field."""
    text = line.rstrip("\n")
    at = text.rfind(HASH_KEY)
    if at < 0:
        return None, None
    prefix = text[: at + len(HASH_KEY)]
    rest = text[at + len(HASH_KEY):]
    claimed = rest[:-2] if rest.endswith('"}') else rest
    return claimed, hashlib.sha256(prefix.encode("utf-8")).hexdigest()


def read_entries(path: Path) -> list[dict[str, Any]]:
    """Every row of an audit log as plain dicts (no validation)."""
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def validate_file(path: Path) -> list[tuple[int, str]]:
    """Check every line against the trace-entry contract; returns (line number, problem) pairs."""
    problems: list[tuple[int, str]] = []
    last = -1
    run_id = None
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, start=1):
            try:
                row = json.loads(line)
                entry = TraceEntry.model_validate(row)
            except Exception as exc:  # noqa: BLE001 - every failure is a finding
                problems.append((n, str(exc).splitlines()[0] if str(exc) else type(exc).__name__))
                continue
            if entry.calledAt < last:
                problems.append((n, f"calledAt {entry.calledAt} is before the previous row's {last}"))
            last = entry.calledAt
            if run_id is None:
                run_id = entry.runId
            elif entry.runId != run_id:
                problems.append((n, f"runId {entry.runId} differs from the first row's {run_id}"))
    return problems
