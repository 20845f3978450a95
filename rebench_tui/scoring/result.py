"""A scorer's result as the supervisor hands it back: parsed strictly into a :class:`ScoreResult`, with
what it printed kept as tails for the researcher; and a score or message as the records write them."""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Any

OUTPUT_TAIL_CHARS = 4000
EXIT_KILLED = 137  # 128 + SIGKILL: the kernel's OOM killer (timeouts are reported separately)


@dataclass(frozen=True)
class ScoreResult:
    score: float
    message: dict[str, Any] = field(default_factory=dict)
    details: dict[str, Any] = field(default_factory=dict)

    @property
    def valid(self) -> bool:
        return math.isfinite(self.score)


def _tail(text: str, limit: int = OUTPUT_TAIL_CHARS) -> str:
    return text if len(text) <= limit else "…" + text[-limit:]


def _as_float(value: Any) -> float | None:
    """A score value as a float: numbers, null, and the strings NaN/Infinity/-Infinity."""
    if value is None:
        return math.nan
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


def _plain_json(obj: dict[str, Any]) -> dict[str, Any]:
    """``obj`` with NaN and Infinity written as the strings "NaN", "Infinity", "-Infinity", so the
    audit log (strict JSON) and the score log keep the same value."""
    try:
        return json.loads(json.dumps(obj), parse_constant=lambda c: c)
    except (ValueError, RecursionError):
        return {"value": "unreadable (nested too deeply)"}


def _find_result_line(stdout: str) -> tuple[dict[str, Any], str] | None:
    for line in reversed(stdout.splitlines()):
        line = line.strip()
        if not (line.startswith("{") and line.endswith("}")):
            continue
        try:
            obj = json.loads(line)
        except (ValueError, RecursionError):  # garbage, or nesting deeper than the parser goes
            continue
        if isinstance(obj, dict) and "score" in obj:
            return obj, line
    return None


def _tails(stdout: str, stderr: str, exit_code: int, result_line: str | None = None) -> dict[str, Any]:
    """What the scorer printed besides its result line, for the researcher (only what is non-empty)."""
    if result_line is not None:
        lines = stdout.splitlines()
        for i in range(len(lines) - 1, -1, -1):
            if lines[i].strip() == result_line:
                del lines[i]
                break
        stdout = "\n".join(lines)
    out: dict[str, Any] = {"exit_code": exit_code}
    if stdout.strip():
        out["stdout_tail"] = _tail(stdout)
    if stderr.strip():
        out["stderr_tail"] = _tail(stderr)
    return out


def parse_scorer_output(channel: str | None, stdout: str, stderr: str, exit_code: int, *,
                        timed_out: bool = False) -> ScoreResult:
    """Turn one scorer run into a result, mapping every failure to NaN with a reason.

    ``channel``: what the scorer wrote into its result channel (None: nothing). The result is taken
    from there alone; a result line on stdout does not count."""
    tails = _tails(stdout, stderr, exit_code)
    if timed_out:
        return ScoreResult(math.nan, {"timeout": True}, tails)
    if exit_code == EXIT_KILLED:
        return ScoreResult(math.nan, {"out_of_memory": True}, tails)
    found = _find_result_line(channel or "")
    if found is None:
        if exit_code != 0:
            reason = f"the scorer exited with status {exit_code}"
        elif _find_result_line(stdout) is not None:
            reason = "the scorer wrote no result into its result channel (a result line on its output does not count)"
        else:
            reason = "the scorer wrote no result line into its result channel"
        return ScoreResult(math.nan, {"error": reason}, tails)
    obj, line = found
    tails = _tails(stdout, stderr, exit_code, line)
    message = obj.get("message", {})
    details = obj.get("details", {})
    message = _plain_json(message if isinstance(message, dict) else {"value": message})
    details = _plain_json(details if isinstance(details, dict) else {"value": details})
    details = {**details, **tails}
    score = _as_float(obj.get("score"))
    if score is None:
        return ScoreResult(math.nan, {**message, "error": f"the scorer's score is not a number: {obj.get('score')!r}"}, details)
    if exit_code != 0 and math.isfinite(score):
        return ScoreResult(math.nan, {**message, "error": f"the scorer exited with status {exit_code}"}, {**details, "reported_score": score})
    return ScoreResult(score, message, details)



def message_words(message: dict[str, Any]) -> str:
    """A scorer's message as a reader takes it: "answer 7; secret ok: yes", not a Python dict.
    Numbers to 4 significant digits, flags as yes/no, anything nested as compact JSON."""
    def value(v: Any) -> str:
        if isinstance(v, bool):
            return "yes" if v else "no"
        if isinstance(v, float):
            return f"{v:.4g}"
        if isinstance(v, (dict, list)):
            return json.dumps(v, default=str, separators=(", ", ": "))
        return str(v)

    return "; ".join(f"{str(k).replace('_', ' ')}: {value(v)}" for k, v in message.items())


def json_score(score: float) -> float | str:
    """A score as Vivaria's trace schema accepts it: finite numbers, or the strings NaN/Infinity/-Infinity."""
    if math.isnan(score):
        return "NaN"
    if math.isinf(score):
        return "Infinity" if score > 0 else "-Infinity"
    return score
