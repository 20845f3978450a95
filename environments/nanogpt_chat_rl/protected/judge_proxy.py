"""The judge proxy: the only way to the judge LLM, for the participant and for the scorer.

Runs as root inside the container (a service of the environment's profile), on loopback only.
It serves exactly one route, ``POST /v1/chat/completions`` (anything else: 404), and forwards
each request to ``$JUDGE_BASE_URL/chat/completions`` with ``Authorization: Bearer $JUDGE_API_KEY``
added. The participant talks to it at ``$JUDGE_PROXY_URL`` and never sees the key.

What it forwards is rebuilt, not passed through: the model is always ``$JUDGE_MODEL``, the
temperature always 0, ``max_tokens`` at most --max-tokens-cap (default 16 when absent), and only
``messages`` (1-64 of role system/user/assistant with string content, --max-body bytes in all)
come from the request. The upstream's status and JSON body come back unchanged except that the
key, should it appear in them, is blanked.

Rate limits: two token buckets, one for requests carrying the header ``X-Judge-Scorer-Token``
with this proxy's own random token (written at start to --token-file when one is given, a
root-only file) and one for everything else (the participant). Over the limit: HTTP 429 with
Retry-After.

The scorer does not use this service: a port on loopback can be taken by anyone (a participant
may start a server of their own on it before the service starts, or after it stops), so the
scorer runs a private instance of this proxy inside its own process (:func:`start_private`) on a
port the kernel gives it, which answers only requests with that instance's token, and in the
smoke profile a private stand-in judge behind it. The held-out messages and the baselines'
answers therefore never travel to a port the participant could hold. At most --max-inflight requests go
upstream at once. One log line per request (time, client, status, seconds; never contents or the
key) goes to stdout, which the runtime keeps in a root-only log.

Configuration: JUDGE_BASE_URL, JUDGE_MODEL and JUDGE_API_KEY from the environment (the runtime
gives services the profile's secrets), else from ``$REBENCH_PROTECTED/secrets.env``, else
--default-base-url / --default-model (the smoke profile points these at the stand-in judge and
needs no key). Stdlib only.
"""

from __future__ import annotations

import argparse
import hmac
import json
import os
import secrets
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

ROUTE = "/v1/chat/completions"
SCORER_HEADER = "X-Judge-Scorer-Token"
ROLES = ("system", "user", "assistant")
MAX_MESSAGES = 64


def read_secrets_env(path: Path) -> dict[str, str]:
    values = {}
    try:
        for line in path.read_text(encoding="utf-8").splitlines():
            k, sep, v = line.partition("=")
            if sep and k.strip():
                values[k.strip()] = v.strip()
    except OSError:
        pass
    return values


class Bucket:
    """A token bucket: ``rate`` requests a second on average, bursts up to ``burst``."""

    def __init__(self, rate: float, burst: float) -> None:
        self.rate, self.burst = rate, burst
        self.tokens, self.t = burst, time.monotonic()
        self.lock = threading.Lock()

    def take(self) -> float:
        """0 if a request may go now (and counts it), else the seconds to wait."""
        with self.lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.t) * self.rate)
            self.t = now
            if self.tokens >= 1:
                self.tokens -= 1
                return 0.0
            return (1 - self.tokens) / self.rate


class Config:
    def __init__(self, a: argparse.Namespace, scorer_only: bool = False) -> None:
        file_values = read_secrets_env(Path(os.environ.get("REBENCH_PROTECTED", "/protected")) / "secrets.env")

        def pick(name: str, default: str | None) -> str | None:
            return os.environ.get(name) or file_values.get(name) or default

        self.base_url = (pick("JUDGE_BASE_URL", a.default_base_url) or "").rstrip("/")
        self.model = pick("JUDGE_MODEL", a.default_model) or ""
        self.key = pick("JUDGE_API_KEY", None)
        self.args = a
        self.buckets = {"scorer": Bucket(a.scorer_rate, a.scorer_burst), "participant": Bucket(a.rate, a.burst)}
        self.inflight = threading.BoundedSemaphore(a.max_inflight)
        self.token = secrets.token_hex(24)
        self.scorer_only = scorer_only  # a private instance: every request must carry the token
        # Loopback upstreams (the stand-in) never go through an http_proxy; real ones may.
        handlers = [urllib.request.ProxyHandler({})] if self.base_url.startswith(("http://127.", "http://localhost")) else []
        self.opener = urllib.request.build_opener(*handlers)
        self.counts: dict[str, int] = {}

    def redact(self, data: bytes) -> bytes:
        if self.key and len(self.key) >= 4:
            data = data.replace(self.key.encode(), b"[redacted]")
        return data


def build_upstream(cfg: Config, body: object) -> tuple[dict | None, str]:
    """The request sent upstream, or (None, why the request is refused)."""
    if not isinstance(body, dict):
        return None, "the body must be a JSON object"
    messages = body.get("messages")
    if not isinstance(messages, list) or not 1 <= len(messages) <= MAX_MESSAGES:
        return None, f"'messages' must be a list of 1 to {MAX_MESSAGES} messages"
    clean = []
    for m in messages:
        if not isinstance(m, dict) or m.get("role") not in ROLES or not isinstance(m.get("content"), str):
            return None, "each message must be {'role': 'system'|'user'|'assistant', 'content': '<text>'}"
        clean.append({"role": m["role"], "content": m["content"]})
    max_tokens = body.get("max_tokens", body.get("max_completion_tokens", 16))
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
        return None, "'max_tokens' must be an integer"
    out = {"model": cfg.model, "messages": clean, cfg.args.tokens_field: max(1, min(max_tokens, cfg.args.max_tokens_cap))}
    if not cfg.args.no_temperature:
        out["temperature"] = 0
    return out, ""


class Handler(BaseHTTPRequestHandler):
    server_version = "judge-proxy/1"
    cfg: Config  # set on the per-server subclass (make_server)

    def log_message(self, fmt: str, *args) -> None:
        pass  # our own line per request instead (no paths of other routes' probing in detail)

    def _log(self, client: str, status: int, started: float, note: str = "") -> None:
        key = f"{client}:{status}"
        self.cfg.counts[key] = self.cfg.counts.get(key, 0) + 1
        if self.cfg.scorer_only:
            return  # a private instance inside the scorer: its stdout carries the result line only
        sys.stdout.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {client} {self.command} {self.path[:80]} {status} "
                         f"{time.monotonic() - started:.2f}s {note}\n")
        sys.stdout.flush()

    def _send(self, status: int, data: bytes, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        self._send(status, json.dumps({"error": {"message": message, "type": "judge_proxy"}}).encode(), headers)

    def _refuse_route(self) -> None:
        started = time.monotonic()
        self._error(404, f"the judge proxy serves only POST {ROUTE}")
        self._log("-", 404, started, "route refused")

    do_GET = do_PUT = do_DELETE = do_PATCH = do_HEAD = do_OPTIONS = _refuse_route  # noqa: N815

    def do_POST(self) -> None:  # noqa: N802
        started = time.monotonic()
        cfg = self.cfg
        if self.path.split("?")[0].rstrip("/") != ROUTE:
            return self._refuse_route()
        given = self.headers.get(SCORER_HEADER, "")
        client = "scorer" if given and hmac.compare_digest(given.encode(), cfg.token.encode()) else "participant"
        if cfg.scorer_only and client != "scorer":
            self._error(403, "this judge proxy serves the scorer only")
            return self._log(client, 403, started)
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = -1
        if length <= 0 or length > cfg.args.max_body:
            self._error(413 if length > 0 else 411, f"the request body must be 1 to {cfg.args.max_body} bytes")
            return self._log(client, 413, started)
        raw = self.rfile.read(length)
        wait = cfg.buckets[client].take()
        if wait > 0:
            self._error(429, f"rate limit: at most {cfg.buckets[client].rate:g} requests a second; retry in {wait:.1f} s",
                        {"Retry-After": f"{max(1, round(wait + 0.5))}"})
            return self._log(client, 429, started)
        if not cfg.base_url or not cfg.model:
            self._error(503, "the judge is not configured (JUDGE_BASE_URL and JUDGE_MODEL are missing)")
            return self._log(client, 503, started)
        try:
            body = json.loads(raw)
        except ValueError:
            self._error(400, "the body is not JSON")
            return self._log(client, 400, started)
        upstream, why = build_upstream(cfg, body)
        if upstream is None:
            self._error(400, why)
            return self._log(client, 400, started)
        if not cfg.inflight.acquire(timeout=cfg.args.timeout):
            self._error(503, "too many judge requests in flight; retry", {"Retry-After": "2"})
            return self._log(client, 503, started)
        try:
            headers = {"Content-Type": "application/json"}
            if cfg.key:
                headers["Authorization"] = f"Bearer {cfg.key}"
            req = urllib.request.Request(cfg.base_url + "/chat/completions", data=json.dumps(upstream).encode(),
                                         headers=headers, method="POST")
            try:
                with cfg.opener.open(req, timeout=cfg.args.timeout) as resp:
                    status, data = resp.status, resp.read()
            except urllib.error.HTTPError as exc:
                status, data = exc.code, exc.read()
                retry = exc.headers.get("Retry-After") if exc.headers else None
                self._send(status, cfg.redact(data) or b"{}", {"Retry-After": retry} if retry else None)
                return self._log(client, status, started, "upstream error")
            except (TimeoutError, urllib.error.URLError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                timed_out = isinstance(reason, TimeoutError) or "timed out" in str(reason)
                status = 504 if timed_out else 502
                msg = cfg.redact(f"the judge did not answer: {type(reason).__name__}: {reason}".encode()).decode()
                self._error(status, msg)
                return self._log(client, status, started, "upstream unreachable")
        finally:
            cfg.inflight.release()
        self._send(status, cfg.redact(data))
        self._log(client, status, started)


def write_token(path: str, token: str) -> None:
    folder = os.path.dirname(path)
    os.makedirs(folder, mode=0o700, exist_ok=True)
    tmp = f"{path}.{os.getpid()}"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(token)
    os.replace(tmp, path)


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8700, help="0: any free port (the first line printed says which)")
    ap.add_argument("--default-base-url", default=None)
    ap.add_argument("--default-model", default=None)
    ap.add_argument("--rate", type=float, default=5.0, help="participant requests a second")
    ap.add_argument("--burst", type=float, default=20.0)
    ap.add_argument("--scorer-rate", type=float, default=20.0)
    ap.add_argument("--scorer-burst", type=float, default=40.0)
    ap.add_argument("--max-inflight", type=int, default=16)
    ap.add_argument("--max-body", type=int, default=64 * 1024)
    ap.add_argument("--max-tokens-cap", type=int, default=256)
    ap.add_argument("--tokens-field", default="max_tokens", help="max_completion_tokens for APIs that want it")
    ap.add_argument("--no-temperature", action="store_true", help="for models that refuse a temperature")
    ap.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for the judge")
    ap.add_argument("--token-file", default=None, help="write the scorer bucket's token here (root-only)")
    return ap


def make_server(a: argparse.Namespace, scorer_only: bool = False) -> tuple[ThreadingHTTPServer, Config]:
    if a.host not in ("127.0.0.1", "localhost", "::1"):
        raise ValueError("the judge proxy listens on loopback only")
    cfg = Config(a, scorer_only=scorer_only)
    handler = type("BoundHandler", (Handler,), {"cfg": cfg})  # one configuration per server
    ThreadingHTTPServer.request_queue_size = 128  # the default backlog (5) refuses connections under parallel clients
    server = ThreadingHTTPServer((a.host, a.port), handler)
    server.daemon_threads = True
    return server, cfg


def start_private(argv: list[str]) -> tuple[str, str, ThreadingHTTPServer]:
    """A scorer-only instance in a daemon thread of this process, on a port the kernel picks:
    (its base URL, its token, the server). ``argv``: options as on the command line."""
    a = parser().parse_args([*argv, "--host", "127.0.0.1", "--port", "0"])
    server, cfg = make_server(a, scorer_only=True)
    threading.Thread(target=server.serve_forever, daemon=True, name="private-judge-proxy").start()
    return f"http://127.0.0.1:{server.server_address[1]}/v1", cfg.token, server


def main() -> None:
    a = parser().parse_args()
    try:
        server, cfg = make_server(a)
    except ValueError as exc:
        sys.exit(str(exc))
    if a.token_file:
        write_token(a.token_file, cfg.token)
    print(f"judge proxy listening on {a.host}:{server.server_address[1]}; upstream "
          f"{'configured' if cfg.base_url and cfg.model else 'NOT configured'}; key {'set' if cfg.key else 'not set'}",
          flush=True)  # never the values: the base URL and model may be secrets too
    server.serve_forever()


if __name__ == "__main__":
    main()
