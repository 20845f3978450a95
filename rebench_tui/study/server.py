"""The collector's HTTP service: JSON over HTTP (HTTPS where the researcher gives a certificate),
one bearer token per participant.

    POST /v1/sessions/<id>/rows   {"session": {"run_id", "env_id"}, "from": n, "rows": [line | stub, ...]}
    GET  /v1/sessions/<id>/head   {"count", "head"}                      (its owner, or a researcher)
    GET  /v1/sessions/<id>/rows?from=n  {"rows": [...]}, a page of rows  (its owner, or a researcher)
    GET  /v1/whoami               {"participant", "role"}                 (any token)
    GET  /v1/study                {"sessions": [...]}, with summaries    (a researcher)

The study's view is computed in a process of its own (``views``), so the participants' writes
never wait behind it for the interpreter. Every refusal is answered with a status and ``{"error": "..."}`` and kept in the ``refusals`` table.
A request body must say its length and be at most ``max_body`` bytes; a larger one is refused
before it is read.
"""

from __future__ import annotations

import json
import re
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from ..errors import RebenchError
from .ledger import Ledger, Refused
from .views import ViewProcess

MAX_BODY = 8 << 20
ROWS_PER_ANSWER = 2000  # a long session's rows come in pages (the client asks on from the last one)
SESSION_ID = re.compile(r"^[A-Za-z0-9_.-]{1,200}$")
ROUTE = re.compile(r"^/v1/sessions/([^/]+)/(rows|head)$")


class CollectorServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, ledger: Ledger, address: tuple[str, int], *, max_body: int = MAX_BODY,
                 tls: ssl.SSLContext | None = None, rows_per_answer: int = ROWS_PER_ANSWER) -> None:
        super().__init__(address, _Handler)
        self.ledger = ledger
        self.max_body = max_body
        self.rows_per_answer = rows_per_answer
        self.views = ViewProcess(ledger.path)  # the study's view runs there, off the writers' threads
        if tls is not None:  # the handshake happens on the request's own thread (finish_request)
            self.socket = tls.wrap_socket(self.socket, server_side=True, do_handshake_on_connect=False)

    def finish_request(self, request, client_address) -> None:
        if isinstance(request, ssl.SSLSocket):
            request.settimeout(_Handler.timeout)
            try:
                request.do_handshake()
            except (OSError, ssl.SSLError):
                return  # not TLS, a client that does not trust the certificate, or too slow
        super().finish_request(request, client_address)

    @property
    def url(self) -> str:
        host, port = self.server_address[:2]
        scheme = "https" if isinstance(self.socket, ssl.SSLSocket) else "http"
        return f"{scheme}://{host}:{port}"

    def start(self) -> threading.Thread:
        """Serve on a thread of its own (tests, and `collector serve`); stop with ``stop()``."""
        t = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True,
                             name="collector")
        t.start()
        return t

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        self.views.close()


def tls_context(cert: Path, key: Path) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(str(cert), str(key))
    return ctx


class _Handler(BaseHTTPRequestHandler):
    server: CollectorServer
    timeout = 30  # a client that stops sending mid-request is dropped
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet: the ledger keeps the refusals
        return

    def do_GET(self) -> None:
        self._answer(self._get)

    def do_POST(self) -> None:
        self._answer(self._post)

    def _answer(self, fn) -> None:
        who: str | None = None
        sid: str | None = None
        try:
            who, role = self.server.ledger.identify(_bearer(self.headers.get("Authorization")))
            url = urlsplit(self.path)
            m = ROUTE.match(url.path)
            sid = m.group(1) if m else None
            if sid is not None and not SESSION_ID.match(sid):
                raise Refused(400, "not a session id")
            status, body = fn(who, role, url, m)
        except Refused as exc:
            self.server.ledger.refuse(who, sid, exc)
            status, body = exc.status, {"error": exc.what}
            self.close_connection = True
        data = json.dumps(body, allow_nan=False).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _get(self, who: str, role: str, url, m) -> tuple[int, Any]:
        ledger = self.server.ledger
        if url.path == "/v1/whoami":
            return 200, {"participant": who, "role": role}
        if url.path == "/v1/study":
            if role != "researcher":
                raise Refused(403, f"{who} is a participant: only a researcher's token lists the study")
            try:
                return 200, {"sessions": self.server.views.summary()}
            except RebenchError as exc:
                raise Refused(500, exc.what) from None
        if m is None:
            raise Refused(404, f"no such resource {url.path}")
        ledger.may_read(who, role, m.group(1))
        if m.group(2) == "head":
            return 200, ledger.head(m.group(1))
        start = _int(parse_qs(url.query).get("from", ["0"])[0])
        return 200, {"rows": ledger.rows(m.group(1), start, self.server.rows_per_answer)}

    def _post(self, who: str, role: str, url, m) -> tuple[int, Any]:
        if role != "participant":
            raise Refused(403, f"{who} is a {role}: only a participant's token writes sessions")
        body = self._body()
        if m is None or m.group(2) != "rows":
            raise Refused(404, f"no such resource {url.path}")
        if not isinstance(body, dict) or not isinstance(body.get("rows"), list):
            raise Refused(400, "the body must be an object with a list of rows")
        info = body.get("session") if isinstance(body.get("session"), dict) else {}
        return 200, self.server.ledger.append(who, m.group(1), _int(body.get("from", 0)), body["rows"], info)

    def _body(self) -> Any:
        length = self.headers.get("Content-Length")
        if length is None or not length.isdigit():
            raise Refused(411, "a request body must say its length (Content-Length)")
        if int(length) > self.server.max_body:
            raise Refused(413, f"the request body is {length} bytes; at most {self.server.max_body} are taken")
        try:
            return json.loads(self.rfile.read(int(length)))
        except ValueError:
            raise Refused(400, "the request body is not JSON") from None


def _bearer(header: str | None) -> str | None:
    if header and header.startswith("Bearer "):
        return header[len("Bearer "):].strip() or None
    return None


def _int(value: Any) -> int:
    try:
        n = int(value)
    except (TypeError, ValueError):
        raise Refused(400, f"{value!r} is not a row number") from None
    if n < 0:
        raise Refused(400, "row numbers start at 0")
    return n
