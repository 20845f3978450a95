"""A small client for the OpenAI-compatible chat endpoint of the code model (urllib only).

The model is reached through REBENCH_MODEL_URL (default http://127.0.0.1:8701/v1), a loopback
proxy that adds the API key itself: your code never needs (or sees) a key. The same URL is
passed to your scaffold when it is scored.

    from model_client import chat, chat_choices
    reply = chat([{"role": "user", "content": "Write hello world in Rust."}], temperature=0.2)
    replies = chat_choices(messages, n=4, temperature=0.8)   # several samples in one request

Any other field of the chat-completions API can be passed as a keyword (stop, top_p, seed...).
Failed requests (connection errors, HTTP 429 and 5xx) are retried with a growing pause; other
errors raise ModelError with the endpoint's message.
"""

from __future__ import annotations

import json
import os
import time
import urllib.error
import urllib.parse
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8701/v1"
RETRY_STATUS = {408, 409, 429, 500, 502, 503, 504}


class ModelError(RuntimeError):
    pass


def base_url() -> str:
    return os.environ.get("REBENCH_MODEL_URL", DEFAULT_URL).rstrip("/")


def _opener(url: str) -> urllib.request.OpenerDirector:
    host = urllib.parse.urlparse(url).hostname or ""
    if host in ("127.0.0.1", "localhost", "::1"):
        return urllib.request.build_opener(urllib.request.ProxyHandler({}))  # never send loopback through a proxy
    return urllib.request.build_opener()


def completion(messages: list[dict], *, model: str = "code-model", temperature: float = 0.0, max_tokens: int = 2048,
               n: int = 1, timeout: float = 120.0, retries: int = 4, **extra) -> dict:
    """The raw response object of POST {base}/chat/completions."""
    url = base_url() + "/chat/completions"
    body = {"model": model, "messages": messages, "temperature": temperature, "max_tokens": max_tokens, "n": n, **extra}
    data = json.dumps(body).encode()
    opener = _opener(url)
    delay = 1.0
    for attempt in range(retries + 1):
        req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"}, method="POST")
        try:
            with opener.open(req, timeout=timeout) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            text = exc.read().decode("utf-8", "replace")
            if exc.code not in RETRY_STATUS or attempt == retries:
                raise ModelError(f"HTTP {exc.code} from {url}: {text[:500]}") from None
        except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
            if attempt == retries:
                raise ModelError(f"could not reach {url}: {getattr(exc, 'reason', exc)}") from None
        time.sleep(delay)
        delay = min(delay * 2, 20.0)
    raise AssertionError("unreachable")


def chat_choices(messages: list[dict], **kwargs) -> list[str]:
    """The text of every choice of one request (use n=... for several samples)."""
    response = completion(messages, **kwargs)
    try:
        return [c["message"]["content"] or "" for c in response["choices"]]
    except (KeyError, TypeError) as exc:
        raise ModelError(f"unexpected response shape: {json.dumps(response)[:500]}") from exc


def chat(messages: list[dict], **kwargs) -> str:
    """The text of the first choice."""
    return chat_choices(messages, **kwargs)[0]
