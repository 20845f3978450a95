"""A stand-in for the judge LLM (smoke profile, tests): an OpenAI-compatible
``POST /v1/chat/completions`` endpoint on loopback that decides by a fixed rule. Stdlib only.

It understands the comparison messages of solution/judge.py (headings "### User message",
"### Reply A", "### Reply B") and answers "A" or "B" as the assistant message. The rule:

* words: maximal runs of letters, lower-cased; content words: words of 3 or more letters that
  are not in STOPWORDS. A reply that is exactly "(empty)" is the empty reply.
* relevance(reply) = how many distinct content words of the user message the reply contains;
  variety(reply) = how many distinct content words the reply has.
* The reply with the higher relevance wins; equal relevance: the higher variety; equal again:
  the reply whose UTF-8 text has the smaller sha256 (stripped of surrounding whitespace).
* Identical replies: "A" (the scorer never asks about identical replies; it counts them as ties).

Every step compares the two replies' own properties, so a reply wins or loses the same way in
either position. Requests in any other format get HTTP 400.

If the environment variable JUDGE_API_KEY is set (a secret given to the services), requests must
carry ``Authorization: Bearer <that value>`` (HTTP 401 otherwise): tests use this to check that
the proxy adds the key. Usage: ``python3 judge_standin.py --port 8701`` (port 0: any free port;
the first line printed says which).
"""

from __future__ import annotations

import argparse
import hashlib
import hmac
import json
import os
import re
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROUTE = "/v1/chat/completions"
HEADINGS = ("### User message", "### Reply A", "### Reply B", "### Which reply is better? Answer A or B.")
STOPWORDS = frozenset("""
the and for are but not you your yours with this that these those what when where which who whom why how
was were been being have has had having does did doing can could should would will shall may might must
about above after again against all any because before below between both down during each few from further
here into more most other off once only own same some such than then there they them their theirs too very
just over under until upon also its it's our ours out she her hers him his himself herself itself myself
let lets tell give please want need know like make made get got one two three four five many much
""".split())
WORD = re.compile(r"[^\W\d_]+")


def content_words(text: str) -> set[str]:
    return {w for w in (m.lower() for m in WORD.findall(text)) if len(w) >= 3 and w not in STOPWORDS}


def key(message: str, reply: str) -> tuple[int, int]:
    words = content_words(reply)
    return len(words & content_words(message)), len(words)


def decide(message: str, reply_a: str, reply_b: str) -> str:
    """'A' or 'B' by the rule in the module docstring."""
    reply_a, reply_b = ("" if r.strip() == "(empty)" else r.strip() for r in (reply_a, reply_b))
    if reply_a == reply_b:
        return "A"
    ka, kb = key(message, reply_a), key(message, reply_b)
    if ka != kb:
        return "A" if ka > kb else "B"
    ha, hb = (hashlib.sha256(r.encode("utf-8")).hexdigest() for r in (reply_a, reply_b))
    return "A" if ha < hb else "B"


def split_comparison(text: str) -> tuple[str, str, str] | None:
    """(message, reply A, reply B) from a comparison prompt, or None if it is not one."""
    positions = [text.find(h) for h in HEADINGS]
    if any(p < 0 for p in positions) or positions != sorted(positions):
        return None
    parts = [text[positions[i] + len(HEADINGS[i]):positions[i + 1]].strip() for i in range(3)]
    return parts[0], parts[1], parts[2]


class Handler(BaseHTTPRequestHandler):
    server_version = "standin-judge/1"
    api_key: str | None = None

    def log_message(self, fmt: str, *args) -> None:  # one short line per request, no contents
        sys.stdout.write(f"{time.strftime('%H:%M:%S')} {self.command} {self.path} {fmt % args}\n")
        sys.stdout.flush()

    def _send(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._send(status, {"error": {"message": message, "type": "invalid_request_error"}})

    def do_GET(self) -> None:  # noqa: N802
        self._error(404, f"only POST {ROUTE} is served")

    def do_POST(self) -> None:  # noqa: N802
        if self.path.rstrip("/") != ROUTE:
            return self._error(404, f"only POST {ROUTE} is served")
        if self.api_key is not None:
            given = self.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), f"Bearer {self.api_key}".encode()):
                return self._error(401, "missing or wrong API key")
        try:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            messages = body["messages"]
            user = next(m["content"] for m in reversed(messages) if m.get("role") == "user")
        except (ValueError, KeyError, TypeError, StopIteration):
            return self._error(400, "expected a JSON chat request with a user message")
        parts = split_comparison(user) if isinstance(user, str) else None
        if parts is None:
            return self._error(400, "the stand-in judge only answers the comparison prompts of solution/judge.py")
        verdict = decide(*parts)
        self._send(200, {
            "id": "standin-" + hashlib.sha256(user.encode()).hexdigest()[:16],
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or "standin-judge",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": verdict}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": len(user.split()), "completion_tokens": 1, "total_tokens": len(user.split()) + 1},
        })


def start_private(require_key: str | None = None) -> tuple[str, ThreadingHTTPServer]:
    """An instance in a daemon thread of this process on a port the kernel picks (the scorer's
    own, in the smoke profile): (its base URL, the server)."""
    import threading

    handler = type("PrivateHandler", (Handler,), {"api_key": require_key, "log_message": lambda *_a: None})
    ThreadingHTTPServer.request_queue_size = 128
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True, name="private-standin-judge").start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1", server


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8701)
    a = ap.parse_args()
    Handler.api_key = os.environ.get("JUDGE_API_KEY") or None
    ThreadingHTTPServer.request_queue_size = 128  # the default backlog (5) refuses connections under parallel clients
    server = ThreadingHTTPServer((a.host, a.port), Handler)
    server.daemon_threads = True
    print(f"stand-in judge listening on {a.host}:{server.server_address[1]}"
          + (" (requires the API key)" if Handler.api_key else ""), flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
