"""The `task` command's requests and answers (``runtime/capture/task.py`` writes them in the sandbox).

A request is participant input: it is read with a size limit, parsed strictly, and refused in
the project's one-line error form when it is not exactly one of the known shapes. Nothing here
does anything; ``desk`` carries valid requests out through the session's own commands.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..clock import format_hms

MAX_REQUEST_BYTES = 8192
MAX_TEXT = 4000  # characters of a note or a submission value (the script says so before asking)
VERBS = ("status", "score", "note", "submit", "pause", "resume")
REQUEST_ID = re.compile(r"[0-9a-f]{8,32}")
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")  # newline and tab are text; other control bytes are not


class BadRequest(ValueError):
    """A request that is refused unread; ``request_id`` where one could be read, to answer it."""

    def __init__(self, what: str, request_id: str | None = None) -> None:
        super().__init__(what)
        self.request_id = request_id


@dataclass(frozen=True)
class TaskRequest:
    id: str
    verb: str
    text: str = ""


def parse_request(raw: bytes) -> TaskRequest:
    """The request in ``raw`` (the request file's bytes), or BadRequest saying what is wrong with it."""
    if len(raw) > MAX_REQUEST_BYTES:
        raise BadRequest(f"the request is over {MAX_REQUEST_BYTES} bytes; nothing was done")
    try:
        data = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        raise BadRequest("the request is not JSON text; nothing was done") from None
    if not isinstance(data, dict):
        raise BadRequest("the request is not a JSON object; nothing was done")
    rid = data.get("id")
    rid = rid if isinstance(rid, str) and REQUEST_ID.fullmatch(rid) else None
    if rid is None:
        raise BadRequest("the request has no valid id (8 to 32 lowercase hex digits); nothing was done")
    if data.get("v") != 1:
        raise BadRequest(f"the request's version {data.get('v')!r} is not 1 (the task command and the app differ); "
                         "nothing was done", rid)
    unknown = sorted(set(data) - {"v", "id", "verb", "text"})
    if unknown:
        raise BadRequest(f"the request has unknown fields {', '.join(map(str, unknown))[:200]}; nothing was done", rid)
    verb = data.get("verb")
    if verb not in VERBS:
        raise BadRequest(f"unknown request {str(verb)[:40]!r} (known: {', '.join(VERBS)}); nothing was done", rid)
    text = data.get("text", "")
    if not isinstance(text, str):
        raise BadRequest("the request's text is not a string; nothing was done", rid)
    if len(text) > MAX_TEXT:
        raise BadRequest(f"the text is {len(text)} characters, over {MAX_TEXT}; nothing was done", rid)
    if CONTROL.search(text):
        raise BadRequest("the text holds control characters; nothing was done", rid)
    text = text.strip()
    if verb == "note" and not text:
        raise BadRequest("the note is empty; nothing was done", rid)
    if verb not in ("note", "submit") and text:
        raise BadRequest(f"{verb} takes no text; nothing was done", rid)
    return TaskRequest(rid, verb, text)


def answer_bytes(ok: bool, text: str) -> bytes:
    return json.dumps({"ok": ok, "text": text}, ensure_ascii=False).encode("utf-8")


def prompt_words(remaining_s: float, running: bool, finished: bool) -> str:
    """The shell prompt's words: minutes are enough there (the file is rewritten when they change)."""
    if finished:
        return "session finished"
    left = max(0, int(remaining_s))
    hm = f"{left // 3600}:{left % 3600 // 60:02d}"
    return f"{hm} left" + ("" if running else ", paused")


def status_words(remaining_s: float, used_s: float, running: bool, finished: bool) -> str:
    state = "finished" if finished else "running" if running else "paused (task resume, or p in the app)"
    return f"working time: {format_hms(used_s)} used, {format_hms(max(0.0, remaining_s))} left; clock {state}"
