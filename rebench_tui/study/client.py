"""Talking to a collector: one small JSON-over-HTTP(S) client, and where a participant's token
comes from (the environment or a file, never the command line)."""

from __future__ import annotations

import http.client
import json
import ssl
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from ..config import Settings
from ..errors import RebenchError


class CollectorUnreachable(RebenchError):
    """The collector did not answer (stopped, the network down, a TLS problem)."""


FIXES = {401: "check the token in REBENCH_STUDY_TOKEN or the study-token file (the researcher can make a new one)",
         403: "use a token that may do this: your own sessions with your own token, the study's view with a "
              "researcher's token"}


class CollectorRefused(RebenchError):
    def __init__(self, status: int, what: str) -> None:
        super().__init__(what, kept="nothing was changed at the collector", fix=FIXES.get(status))
        self.status = status


def load_token(settings: Settings) -> str:
    """REBENCH_STUDY_TOKEN, else the file REBENCH_STUDY_TOKEN_FILE (default: study-token in the
    config folder)."""
    if settings.study_token:
        return settings.study_token.strip()
    path = settings.study_token_file or settings.config_dir / "study-token"
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError:
        token = ""
    if not token:
        raise RebenchError(f"no study token: REBENCH_STUDY_TOKEN is unset and {path} has none",
                           kept="nothing was started",
                           fix=f"put the token your researcher gave you in {path} (or REBENCH_STUDY_TOKEN)")
    return token


class Collector:
    def __init__(self, url: str, token: str, *, ca: Path | None = None, timeout: float = 10.0) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise RebenchError(f"{url!r} is not a collector URL", fix="give it as http(s)://host:port")
        self.url = url.rstrip("/")
        self._parts = parts
        self._token = token
        self._timeout = timeout
        self._tls = None
        if parts.scheme == "https":
            self._tls = ssl.create_default_context(cafile=str(ca) if ca else None)

    def _connection(self) -> http.client.HTTPConnection:
        p = self._parts
        if self._tls is not None:
            return http.client.HTTPSConnection(p.hostname, p.port or 443, timeout=self._timeout, context=self._tls)
        return http.client.HTTPConnection(p.hostname, p.port or 80, timeout=self._timeout)

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body, allow_nan=False, ensure_ascii=False).encode("utf-8")
        headers = {"Authorization": f"Bearer {self._token}", "Content-Type": "application/json"}
        conn = self._connection()
        try:
            conn.request(method, path, body=data, headers=headers)
            resp = conn.getresponse()
            raw = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise CollectorUnreachable(f"the collector at {self.url} did not answer: {exc}",
                                       kept="every row, in the session folder",
                                       fix="check that the collector runs and the network is up") from None
        finally:
            conn.close()
        try:
            answer = json.loads(raw) if raw else {}
        except ValueError:
            answer = {"error": raw[:200].decode("utf-8", "replace")}
        if resp.status != 200:
            raise CollectorRefused(resp.status, f"the collector at {self.url} refused {method} {path} "
                                                f"({resp.status}): {answer.get('error', '')}")
        return answer

    def whoami(self) -> dict[str, str]:
        return self.request("GET", "/v1/whoami")

    def head(self, session_id: str) -> dict[str, Any]:
        try:
            return self.request("GET", f"/v1/sessions/{session_id}/head")
        except CollectorRefused as exc:
            if exc.status == 404:
                return {"count": 0, "head": None}
            raise

    def rows(self, session_id: str, start: int = 0) -> list[dict[str, Any]]:
        """Every witnessed row from ``start`` on, page after page."""
        out: list[dict[str, Any]] = []
        while True:
            page = self.request("GET", f"/v1/sessions/{session_id}/rows?from={start + len(out)}")["rows"]
            out += page
            if not page:
                return out

    def send(self, session_id: str, start: int, items: list[Any], info: dict[str, Any]) -> dict[str, Any]:
        return self.request("POST", f"/v1/sessions/{session_id}/rows", {"session": info, "from": start, "rows": items})

    def study(self) -> list[dict[str, Any]]:
        return self.request("GET", "/v1/study")["sessions"]
