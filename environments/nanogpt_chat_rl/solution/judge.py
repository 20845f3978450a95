"""Asking the judge which of two answers is better, through the judge proxy.

The judge is an LLM behind an OpenAI-compatible ``POST /v1/chat/completions`` endpoint. You reach
it only through the proxy at ``$JUDGE_PROXY_URL`` (e.g. ``http://127.0.0.1:8700/v1``), which adds
the API key, fixes the model, asks at temperature 0 and limits the request rate (HTTP 429 with
Retry-After when you go faster). No key is needed on your side.

The scorer uses exactly this file (its own pristine copy): the same messages (:func:`judge_messages`),
the same verdict parsing (:func:`parse_verdict`) and the same retries. A verdict that names neither
answer is asked again (``UNREADABLE_RETRIES`` more times); if it still names neither, it counts as a
loss for your answer: an answer that confuses the judge must not earn half a win.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request

DEFAULT_URL = "http://127.0.0.1:8700/v1"
SYSTEM = ("You compare two replies a chat assistant could give to the same user message. Judge which reply is "
          "more helpful, relevant, correct and clearly written for that message. Ignore which one comes first. "
          "Answer with one letter: A or B.")
MARK = "###"
UNREADABLE_RETRIES = 2  # an unreadable verdict is asked again this many times, then counts as a loss
HEADINGS = ("### User message", "### Reply A", "### Reply B", "### Which reply is better? Answer A or B.")
# A prompt in the Alpaca template (solution/chat.py writes them): its instruction and optional input.
ALPACA = re.compile(r"Below is an instruction that describes a task[^\n]*\n\n### Instruction:\n(.*?)"
                    r"(?:\n\n### Input:\n(.*?))?\n\n### Response:\Z", re.DOTALL)


class JudgeUnavailable(RuntimeError):
    """The judge did not answer after every retry (timeouts, HTTP errors, proxy not running)."""


def _plain(text: str) -> str:
    return text.replace(MARK, "#").strip()  # no reply can forge a heading


def shown_message(message: str) -> str:
    """What the judge reads as the user's message: for a prompt in the Alpaca template (the gpu
    profile's prompts) its instruction, and its input after a blank line and "Input:"; any other
    message as it is."""
    found = ALPACA.match(message.strip())
    if not found:
        return message
    instruction, extra = found.group(1).strip(), (found.group(2) or "").strip()
    return f"{instruction}\n\nInput:\n{extra}" if extra else instruction


def judge_messages(message: str, reply_a: str, reply_b: str) -> list[dict]:
    body = (f"{HEADINGS[0]}\n{_plain(shown_message(message))}\n\n{HEADINGS[1]}\n{_plain(reply_a) or '(empty)'}\n\n"
            f"{HEADINGS[2]}\n{_plain(reply_b) or '(empty)'}\n\n{HEADINGS[3]}")
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": body}]


def parse_verdict(text: str) -> str | None:
    """'A', 'B' or None: the first standalone A or B in the judge's reply."""
    words = "".join(c if c.isalnum() else " " for c in (text or "")).split()
    for word in words:
        if word in ("A", "B"):
            return word
    if len(words) == 1 and words[0] in ("a", "b"):  # a bare lowercase letter; "a" inside a sentence is an article
        return words[0].upper()
    return None


class JudgeClient:
    def __init__(self, url: str | None = None, *, timeout: float = 60.0, attempts: int = 4, backoff: float = 1.0,
                 max_tokens: int = 4, headers: dict[str, str] | None = None) -> None:
        self.url = (url or os.environ.get("JUDGE_PROXY_URL") or DEFAULT_URL).rstrip("/") + "/chat/completions"
        self.timeout = timeout
        self.attempts = attempts
        self.backoff = backoff
        self.max_tokens = max_tokens
        self.headers = {"Content-Type": "application/json", **(headers or {})}
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback: never via http_proxy

    def chat(self, messages: list[dict], max_tokens: int | None = None) -> str:
        """The judge's reply text; retries timeouts, 429 and 5xx, then raises JudgeUnavailable."""
        data = json.dumps({"messages": messages, "max_tokens": max_tokens or self.max_tokens, "temperature": 0}).encode()
        last = "no attempt"
        for attempt in range(self.attempts):
            wait = self.backoff * 2 ** attempt
            try:
                req = urllib.request.Request(self.url, data=data, headers=self.headers, method="POST")
                with self.opener.open(req, timeout=self.timeout) as resp:
                    reply = json.loads(resp.read())
                return reply["choices"][0]["message"].get("content") or ""
            except urllib.error.HTTPError as exc:
                detail = exc.read()[:300].decode(errors="replace")
                last = f"HTTP {exc.code} from {self.url}: {detail}"
                if exc.code not in (408, 409, 425, 429) and exc.code < 500:
                    raise JudgeUnavailable(last) from None
                retry_after = exc.headers.get("Retry-After") if exc.headers else None
                if retry_after:
                    try:
                        wait = max(wait, float(retry_after))
                    except ValueError:
                        pass
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as exc:
                reason = getattr(exc, "reason", exc)
                last = f"no answer from {self.url}: {type(reason).__name__}: {reason}"
            except (ValueError, KeyError, IndexError, TypeError) as exc:
                last = f"an unreadable reply from {self.url}: {type(exc).__name__}: {exc}"
            if attempt + 1 < self.attempts:
                time.sleep(wait)
        raise JudgeUnavailable(f"{last} (after {self.attempts} attempts)")

    def compare(self, message: str, reply_a: str, reply_b: str) -> tuple[str | None, str]:
        """(verdict 'A' | 'B' | None, the judge's raw reply) for reply_a shown first."""
        raw = self.chat(judge_messages(message, reply_a, reply_b))
        return parse_verdict(raw), raw

    def verdict(self, message: str, ours: str, theirs: str, ours_first: bool) -> tuple[float | None, int]:
        """(1.0 if the judge prefers ``ours``, 0.0 if ``theirs``, None if no reply named either after
        ``UNREADABLE_RETRIES`` more asks; the number of replies that could not be read)."""
        a, b = (ours, theirs) if ours_first else (theirs, ours)
        unreadable = 0
        for _ask in range(1 + UNREADABLE_RETRIES):
            verdict, _raw = self.compare(message, a, b)
            if verdict is not None:
                return (1.0 if (verdict == "A") == ours_first else 0.0), unreadable
            unreadable += 1
        return None, unreadable

    def prefer(self, message: str, ours: str, theirs: str, ours_first: bool) -> float:
        """1 if the judge prefers ``ours``, 0 if ``theirs`` or if the verdict stays unreadable (a loss)."""
        value, _unreadable = self.verdict(message, ours, theirs, ours_first)
        return 0.0 if value is None else value


def prefer_many(client: JudgeClient, items: list[tuple[str, str, str, bool]], workers: int = 8) -> list[float]:
    """:meth:`JudgeClient.prefer` for many (message, ours, theirs, ours_first) at once, in parallel
    (the proxy's rate limit still applies; the client waits and retries on HTTP 429)."""
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max(1, workers)) as pool:
        return list(pool.map(lambda it: client.prefer(*it), items))
