"""Stand-in code model for the smoke profile: an OpenAI-compatible chat endpoint, stdlib only.

    python3 model_server.py [--host 127.0.0.1] [--port 8700] [--problems DIR] [--require-key-env NAME]

With --require-key-env NAME it answers chat requests only when they carry `Authorization: Bearer
<value of the environment variable NAME>` (the smoke profile passes CODE_MODEL_API_KEY, its
secret, so requests must go through model_proxy.py, which adds the key, like the real endpoint).

It knows the hand-written smoke problems (DIR, default smoke/ next to this file: problem.toml,
good.rs and bad.rs per problem) and answers `POST /v1/chat/completions` deterministically, so a
better scaffold gets a better score. The rule, applied to all messages of the request:

1. Which problem: a problem is mentioned when its name or the first 60 characters of its
   statement (whitespace collapsed, case ignored) occur in a message; if several are, the one
   mentioned last counts. None: the reply asks for the statement and holds no code.
2. Not Rust: if no message mentions "rust", the reply is a Python program.
3. Quality q, one point each for:
   - examples: every public example's input and output (whitespace collapsed) occur;
   - "step by step" (or step-by-step) occurs in a message;
   - a system message that mentions "rust";
   - feedback: an assistant message is followed by a user message that contains one of
     error, wrong, expected, timed out, time limit, failed, incorrect.
4. The reply holds the problem's good program if q >= the problem's difficulty (1 to 4), else
   its bad program (per problem: a compile error, a wrong answer, or an endless loop; some bad
   programs pass the public examples and fail only hidden tests).

The reply is markdown with one ```rust block (with a short plan before it when asked to think
step by step). `n` > 1 gives n identical choices. GET /health and GET /v1/models answer too.
Each decision is logged to stderr (the service's root-only log).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import threading
import time
import tomllib
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

HERE = Path(__file__).resolve().parent
MODEL_ID = "stand-in-code-model"
FEEDBACK_WORDS = ("error", "wrong", "expected", "timed out", "time limit", "failed", "incorrect")
STEP_BY_STEP = re.compile(r"step[\s-]*by[\s-]*step", re.IGNORECASE)
MARKER_CHARS = 60
MAX_BODY = 8 * 2**20

PYTHON_PROGRAM = """import sys

def main():
    data = sys.stdin.read().split()
    print(len(data))

main()
"""


def squash(text: str) -> str:
    return " ".join(text.split()).lower()


def load_problems(folder: Path) -> list[dict]:
    problems = []
    for toml in sorted(folder.glob("*/problem.toml")):
        doc = tomllib.loads(toml.read_text(encoding="utf-8"))
        problems.append({
            "slug": toml.parent.name,
            "name": doc["name"],
            "difficulty": int(doc["difficulty"]),
            "markers": [squash(doc["name"]), squash(doc["description"])[:MARKER_CHARS]],
            "examples": [(squash(t["input"]), squash(t["output"])) for t in doc["public_tests"]],
            "good": (toml.parent / "good.rs").read_text(encoding="utf-8"),
            "bad": (toml.parent / "bad.rs").read_text(encoding="utf-8"),
        })
    return problems


def text_of(content) -> str:
    """A message's content: a string, or a list of parts with "text" (the OpenAI multi-part form)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def decide(problems: list[dict], messages: list[dict]) -> dict:
    """The rule of the module docstring: which problem, the hints found, q, and the reply text."""
    texts = [(str(m.get("role", "")), text_of(m.get("content"))) for m in messages]
    everything = "\n".join(t for _r, t in texts)
    flat = squash(everything)
    found = None
    for p in problems:
        pos = max(flat.rfind(m) for m in p["markers"])
        if pos >= 0 and (found is None or pos > found[0]):
            found = (pos, p)
    if found is None:
        return {"problem": None, "variant": "none", "q": 0, "hints": [],
                "reply": "I could not tell which problem you mean. Please include the full problem statement "
                         "(with its input and output format) and I will write a solution."}
    problem = found[1]
    if "rust" not in flat:
        return {"problem": problem["slug"], "variant": "python", "q": 0, "hints": [],
                "reply": "Here is a solution in Python:\n\n```python\n" + PYTHON_PROGRAM + "```\n"}
    hints = []
    if all(i in flat and o in flat for i, o in problem["examples"]):
        hints.append("examples")
    if STEP_BY_STEP.search(everything):
        hints.append("step_by_step")
    if any(role == "system" and "rust" in t.lower() for role, t in texts):
        hints.append("system")
    last_assistant = max((i for i, (role, _t) in enumerate(texts) if role == "assistant"), default=None)
    if last_assistant is not None and any(role == "user" and any(w in t.lower() for w in FEEDBACK_WORDS)
                                          for role, t in texts[last_assistant + 1:]):
        hints.append("feedback")
    q = len(hints)
    variant = "good" if q >= problem["difficulty"] else "bad"
    code = problem[variant]
    if "step_by_step" in hints:
        reply = ("Let me think step by step.\n\n1. Read the whole input and parse the numbers.\n"
                 "2. Work out the answer as the statement defines it, watching the edge cases.\n"
                 "3. Print the result.\n\nHere is the Rust program:\n\n```rust\n" + code + "```\n")
    else:
        reply = "Here is a Rust solution:\n\n```rust\n" + code + "```\n"
    return {"problem": problem["slug"], "variant": variant, "q": q, "hints": hints,
            "difficulty": problem["difficulty"], "reply": reply}


class Handler(BaseHTTPRequestHandler):
    server_version = "stand-in/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # one line per decision instead (see do_POST)
        pass

    def _send(self, status: int, obj: dict) -> None:
        body = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._send(status, {"error": {"message": message, "type": kind}})

    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/")
        if path in ("/health", "/v1/health", ""):
            self._send(200, {"status": "ok", "model": MODEL_ID, "problems": len(self.server.problems)})
        elif path == "/v1/models":
            self._send(200, {"object": "list", "data": [{"id": MODEL_ID, "object": "model", "owned_by": "rebench"}]})
        else:
            self._error(404, f"no such path {self.path}", "not_found")

    def do_POST(self):
        path = self.path.split("?")[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._error(413, f"request body over {MAX_BODY} bytes")
            return
        raw = self.rfile.read(length) if length else b""
        if path != "/v1/chat/completions":
            self._error(404, f"no such path {self.path}; use POST /v1/chat/completions", "not_found")
            return
        key = self.server.require_key
        if key and self.headers.get("Authorization", "") != f"Bearer {key}":
            self._error(401, "missing or wrong API key", "authentication_error")
            return
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            self._error(400, f"the body is not JSON: {exc}")
            return
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list) or not body["messages"] \
                or not all(isinstance(m, dict) for m in body["messages"]):
            self._error(400, "the body must be a JSON object with a non-empty list `messages` of {role, content} objects")
            return
        if body.get("stream"):
            self._error(400, "streaming is not supported by the stand-in; leave `stream` unset")
            return
        n = body.get("n", 1)
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 16:
            self._error(400, "`n` must be an integer from 1 to 16")
            return
        d = decide(self.server.problems, body["messages"])
        with self.server.lock:
            self.server.requests += 1
            count = self.server.requests
        print(json.dumps({"t": round(time.time(), 3), "request": count, "problem": d["problem"], "variant": d["variant"],
                          "q": d["q"], "hints": d["hints"], "messages": len(body["messages"])}), file=sys.stderr, flush=True)
        prompt_tokens = sum(len(text_of(m.get("content")).split()) for m in body["messages"])
        completion_tokens = len(d["reply"].split())
        digest = hashlib.sha256(raw).hexdigest()[:24]
        self._send(200, {
            "id": f"chatcmpl-standin-{digest}", "object": "chat.completion", "created": int(time.time()),
            "model": MODEL_ID,
            "choices": [{"index": i, "message": {"role": "assistant", "content": d["reply"]}, "finish_reason": "stop"}
                        for i in range(n)],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens * n,
                      "total_tokens": prompt_tokens + completion_tokens * n},
        })


def serve(host: str = "127.0.0.1", port: int = 8700, problems_dir: Path | None = None,
          require_key: str | None = None) -> ThreadingHTTPServer:
    """A running server in a daemon thread (port 0 picks a free one: see server.server_address)."""
    server = make_server(host, port, problems_dir, require_key)
    threading.Thread(target=server.serve_forever, daemon=True, name="stand-in-model").start()
    return server


def make_server(host: str, port: int, problems_dir: Path | None, require_key: str | None) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.problems = load_problems(problems_dir or HERE / "smoke")
    server.require_key = require_key
    server.lock = threading.Lock()
    server.requests = 0
    return server


def proxy_secret(name: str) -> str | None:
    """A secret from $REBENCH_PROTECTED/secrets.env (root-only), when it is not in the environment."""
    path = Path(os.environ.get("REBENCH_PROTECTED", "/protected")) / "secrets.env"
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            k, sep, v = line.strip().partition("=")
            if sep and k.strip() == name:
                return v.strip().strip('"').strip("'") or None
    except OSError:
        pass
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Stand-in OpenAI-compatible code model for the smoke profile.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8700)
    ap.add_argument("--problems", type=Path, default=HERE / "smoke")
    ap.add_argument("--require-key-env", default=None, metavar="NAME",
                    help="answer only requests with `Authorization: Bearer $NAME` (the key is read from the environment)")
    a = ap.parse_args(argv)
    key = None
    if a.require_key_env:
        key = os.environ.get(a.require_key_env) or proxy_secret(a.require_key_env)
        if not key:
            print(f"stand-in model: {a.require_key_env} is not set; refusing to start without the key", file=sys.stderr)
            return 2
    server = make_server(a.host, a.port, a.problems, key)
    print(f"stand-in model on http://{a.host}:{server.server_address[1]}/v1 with {len(server.problems)} problems"
          f"{' (key required)' if key else ''}",
          file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
