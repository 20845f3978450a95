"""Loopback proxy to the code model: adds the API key so participant code never sees it. Stdlib only.

    python3 model_proxy.py [--host 127.0.0.1] [--port 8701] [--upstream URL] [--model NAME]

Started as root by the runtime (a profile `service`), with the profile's secrets in its
environment:

    CODE_MODEL_BASE_URL   upstream OpenAI-compatible base URL, e.g. https://api.example.com/v1
    CODE_MODEL_API_KEY    sent upstream as `Authorization: Bearer ...` (optional for a keyless upstream)
    CODE_MODEL_NAME       the model every request is sent to

(--upstream and --model override the first and last; a missing variable is also looked up in
$REBENCH_PROTECTED/secrets.env, root-only.) The participant's code talks to
http://127.0.0.1:8701/v1 (REBENCH_MODEL_URL) without a key:

- POST /v1/chat/completions: the JSON body is forwarded to <upstream>/chat/completions with the
  key added and `model` replaced by the configured model (whatever the caller asked for);
  `stream` is refused. The upstream status and body come back as they are, except that the
  response's `model` reads "code-model" and the key, should an upstream echo it, is blanked.
- GET /v1/models lists the one model as "code-model"; GET /health answers without calling upstream.
- Connection failures come back as 502 with an OpenAI-style error object.

Each request is logged to stderr (the service's root-only log) without the key.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

PUBLIC_MODEL = "code-model"
MAX_BODY = 8 * 2**20
UPSTREAM_TIMEOUT = 600.0


def secrets_file_values() -> dict[str, str]:
    path = Path(os.environ.get("REBENCH_PROTECTED", "/protected")) / "secrets.env"
    values: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return values
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key and not key.startswith("#"):
            values[key.strip()] = value.strip().strip('"').strip("'")
    return values


def settings_from_env(upstream: str | None = None, model: str | None = None) -> dict[str, str | None]:
    """The upstream URL, key and model: arguments first, then the environment, then secrets.env."""
    file_values: dict[str, str] | None = None

    def get(name: str) -> str | None:
        nonlocal file_values
        if os.environ.get(name):
            return os.environ[name]
        if file_values is None:
            file_values = secrets_file_values()
        return file_values.get(name) or None

    return {"upstream": (upstream or get("CODE_MODEL_BASE_URL") or "").rstrip("/") or None,
            "key": get("CODE_MODEL_API_KEY"), "model": model or get("CODE_MODEL_NAME")}


class Handler(BaseHTTPRequestHandler):
    server_version = "model-proxy/1"
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def _send_bytes(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        self._send_bytes(status, json.dumps({"error": {"message": message, "type": kind}}).encode())

    def do_GET(self):
        path = self.path.split("?")[0].rstrip("/")
        if path in ("/health", "/v1/health", ""):
            self._send_bytes(200, json.dumps({"status": "ok", "model": PUBLIC_MODEL,
                                              "upstream_configured": bool(self.server.upstream)}).encode())
        elif path == "/v1/models":
            self._send_bytes(200, json.dumps({"object": "list", "data": [{"id": PUBLIC_MODEL, "object": "model",
                                                                          "owned_by": "rebench"}]}).encode())
        else:
            self._error(404, f"no such path {self.path}", "not_found")

    def _clean(self, data: bytes) -> bytes:
        key = self.server.key
        if key and len(key) >= 8 and key.encode() in data:  # (a very short "key" would mangle ordinary text)
            data = data.replace(key.encode(), b"[redacted]")
        return data

    def do_POST(self):
        started = time.monotonic()
        path = self.path.split("?")[0].rstrip("/")
        length = int(self.headers.get("Content-Length") or 0)
        if length > MAX_BODY:
            self._error(413, f"request body over {MAX_BODY} bytes")
            return
        raw = self.rfile.read(length) if length else b""
        if path != "/v1/chat/completions":
            self._error(404, f"no such path {self.path}; the proxy forwards POST /v1/chat/completions only", "not_found")
            return
        if not self.server.upstream:
            self._error(503, "the model proxy has no upstream configured (CODE_MODEL_BASE_URL)", "server_error")
            return
        try:
            body = json.loads(raw or b"null")
        except ValueError as exc:
            self._error(400, f"the body is not JSON: {exc}")
            return
        if not isinstance(body, dict):
            self._error(400, "the body must be a JSON object")
            return
        if body.get("stream"):
            self._error(400, "streaming is not supported by the proxy; leave `stream` unset")
            return
        if self.server.model:
            body["model"] = self.server.model
        headers = {"Content-Type": "application/json"}
        if self.server.key:
            headers["Authorization"] = f"Bearer {self.server.key}"
        req = urllib.request.Request(self.server.upstream + "/chat/completions", data=json.dumps(body).encode(),
                                     headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=UPSTREAM_TIMEOUT) as resp:
                status, data, ctype = resp.status, resp.read(), resp.headers.get("Content-Type", "application/json")
        except urllib.error.HTTPError as exc:
            status, data, ctype = exc.code, exc.read(), exc.headers.get("Content-Type", "application/json")
        except (urllib.error.URLError, OSError, TimeoutError) as exc:
            reason = getattr(exc, "reason", exc)
            self._log(502, started, body)
            self._error(502, f"the model upstream could not be reached: {type(exc).__name__}: {reason}", "upstream_error")
            return
        data = self._clean(data)
        try:
            doc = json.loads(data)
            if isinstance(doc, dict) and "model" in doc:
                doc["model"] = PUBLIC_MODEL
                data = json.dumps(doc).encode()
        except ValueError:
            pass
        self._log(status, started, body)
        self._send_bytes(status, data, ctype)

    def _log(self, status: int, started: float, body: dict) -> None:
        with self.server.lock:
            self.server.requests += 1
            count = self.server.requests
        print(json.dumps({"t": round(time.time(), 3), "request": count, "status": status,
                          "seconds": round(time.monotonic() - started, 3),
                          "messages": len(body.get("messages") or []) if isinstance(body.get("messages"), list) else None}),
              file=sys.stderr, flush=True)


def make_server(host: str, port: int, upstream: str | None, key: str | None, model: str | None) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    server.upstream = (upstream or "").rstrip("/") or None
    server.key = key
    server.model = model
    server.lock = threading.Lock()
    server.requests = 0
    return server


def serve(host: str = "127.0.0.1", port: int = 0, upstream: str | None = None, key: str | None = None,
          model: str | None = None) -> ThreadingHTTPServer:
    """A running proxy in a daemon thread (port 0 picks a free one: see server.server_address)."""
    server = make_server(host, port, upstream, key, model)
    threading.Thread(target=server.serve_forever, daemon=True, name="model-proxy").start()
    return server


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Loopback proxy that adds the model API key.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8701)
    ap.add_argument("--upstream", default=None, help="upstream base URL (default: CODE_MODEL_BASE_URL)")
    ap.add_argument("--model", default=None, help="model to use (default: CODE_MODEL_NAME)")
    a = ap.parse_args(argv)
    s = settings_from_env(a.upstream, a.model)
    if not s["upstream"]:
        print("model proxy: no upstream (set CODE_MODEL_BASE_URL or pass --upstream); requests will get 503",
              file=sys.stderr, flush=True)
    server = make_server(a.host, a.port, s["upstream"], s["key"], s["model"])
    print(f"model proxy on http://{a.host}:{server.server_address[1]}/v1 -> {s['upstream']} "
          f"(key {'set' if s['key'] else 'not set'}, model {'set' if s['model'] else 'as requested'})",
          file=sys.stderr, flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
