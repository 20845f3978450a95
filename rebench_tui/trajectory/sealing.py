"""Hidden scores sealed to a researcher's key: what the session folder holds instead of a value.

An environment that hides its scores from the participant (``visibility = "hidden"``) still has
to record them. Written in clear, anyone who can read the session folder reads them, and by
scoring again and again can climb to the best score by search. Sealed, they are readable only
with the researcher's private key, which never is on the participant's machine.

How: a session of a hidden environment started with a public key set (``REBENCH_SEAL_TO``: the key
itself, or a file holding it) states that key in its start row (``seal_to``, one of the chain's
rules, so a resumed session keeps sealing whatever the settings say then). Every scoring row
then holds ``score: null``, ``message: {"sealed": true}`` and ``details`` with ``sealed: true``,
``blob`` (the scorer's score, message and details as JSON, sealed with libsodium's sealed box
and written in base64) and, in clear, only what groups the scorings into attempts (the attempt's
fingerprint, the recount marker) and the token that pairs it with its start row. The score log,
the finish (its row and ``session.json``) and the session index hold no value either; the hash
chain covers the ciphertext, so ``verify`` needs no key.

The researcher's side: ``REBENCH_RESEARCHER_KEY`` (the private key's file) lets every reader
that takes rows through :func:`open_rows` (exports, ``compare``) see the values again; without
it they stay sealed and say so.

What it does not protect against: the app holds the values in memory while the session runs
(the screen hides them), so someone with root on the host during the session could read them there.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
from pathlib import Path
from typing import Any

from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox

from ..config import Settings
from ..errors import RebenchError
from ..scoring import ATTEMPT_KEY, RECOUNT_KEY

SEALED = "sealed"  # message and details: true where the values are sealed
BLOB = "blob"  # details: the sealed values, base64
CLEAR = (ATTEMPT_KEY, RECOUNT_KEY)  # details kept in clear: they group scorings, they are not scores
TOKENS = ("room", "interrupted", "recovered")  # details whose scoring token stays in clear, alone
CLEAR_WARNING = "hidden scores are in clear in the session folder: no researcher key set"
KEY_BYTES = 32


class SealError(RebenchError):
    """A key that does not read, or a blob the key does not open."""


# -- keys ---------------------------------------------------------------------------------------
def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode("ascii")


def _key_bytes(text: str) -> bytes | None:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    return raw if len(raw) == KEY_BYTES else None


def write_keypair(out: Path) -> tuple[Path, str]:
    """A new researcher's key pair: the private key into ``out`` (mode 0600, refused where the file
    exists), the public key into ``out.pub``; returns (the public key's file, the public key)."""
    out = Path(out)
    key = PrivateKey.generate()
    public = _b64(bytes(key.public_key))
    try:
        fd = os.open(out, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise SealError(f"{out} exists: a researcher's key is never overwritten", kept=f"{out}, unchanged",
                        fix="name another file, or remove this one if it holds no key that sealed a session") from None
    with os.fdopen(fd, "w", encoding="ascii") as fh:
        fh.write(_b64(bytes(key)) + "\n")
    pub = out.with_name(out.name + ".pub")
    pub.write_text(public + "\n", encoding="ascii")
    return pub, public


def public_key_text(spec: str) -> str:
    """The public key a setting names (the key in base64, or a file holding it), checked."""
    if _key_bytes(spec) is not None:
        return spec.strip()
    path = Path(spec).expanduser()
    text = path.read_text(encoding="ascii").strip() if path.is_file() else ""
    if _key_bytes(text) is None:
        raise SealError(f"REBENCH_SEAL_TO is neither a public key nor a file holding one: {spec[:80]!r}",
                        kept="nothing was started",
                        fix="set it to the .pub file `rebench-tui keygen` wrote (or the key it printed)")
    return text


def configured_public_key() -> str | None:
    """The public key new sessions of hidden environments seal to (``REBENCH_SEAL_TO``), or None."""
    spec = Settings().seal_to
    return None if not spec else public_key_text(spec)


def load_private_key(path: Path) -> PrivateKey:
    path = Path(path).expanduser()
    try:
        raw = _key_bytes(path.read_text(encoding="ascii"))
    except (OSError, UnicodeDecodeError) as exc:
        raise SealError(f"the researcher's key {path} cannot be read: {exc}",
                        fix="REBENCH_RESEARCHER_KEY names the private key file `rebench-tui keygen` wrote") from None
    if raw is None:
        raise SealError(f"{path} holds no private key", fix="name the file `rebench-tui keygen` wrote (not its .pub)")
    return PrivateKey(raw)


def researcher_key() -> PrivateKey | None:
    """The researcher's private key (``REBENCH_RESEARCHER_KEY``, a file), or None where none is set."""
    path = Settings().researcher_key
    return None if path is None else load_private_key(path)


# -- sealing --------------------------------------------------------------------------------------
def seal(public: str, value: Any) -> str:
    """``value`` as JSON, sealed to ``public`` (base64): only the private key opens it."""
    raw = _key_bytes(public)
    if raw is None:
        raise SealError(f"not a public key: {public[:80]!r}")
    data = json.dumps(value, ensure_ascii=False, allow_nan=False, default=str).encode("utf-8")
    return _b64(SealedBox(PublicKey(raw)).encrypt(data))


def unseal(key: PrivateKey, blob: str) -> Any:
    try:
        return json.loads(SealedBox(key).decrypt(base64.b64decode(blob)).decode("utf-8"))
    except (CryptoError, binascii.Error, ValueError) as exc:
        raise SealError(f"a sealed value does not open with this key ({exc})",
                        fix="use the private key whose public key the session's start row names") from None


def is_sealed(details: Any) -> bool:
    return isinstance(details, dict) and details.get(SEALED) is True and isinstance(details.get(BLOB), str)


def seal_scoring(public: str, score: Any, message: dict[str, Any], details: dict[str, Any]) -> dict[str, Any]:
    """A scoring row's content with its values sealed (``score`` is already as the log writes it)."""
    blob = seal(public, {"score": score, "message": message, "details": details})
    clear = {k: details[k] for k in CLEAR if k in details}
    for k in TOKENS:  # which scoring it answers (verify pairs it with its start row), nothing of what it cost
        if isinstance(details.get(k), dict) and "token" in details[k]:
            clear[k] = {"token": details[k]["token"]}
    return {"type": "intermediateScore", "score": None, "message": {SEALED: True},
            "details": {**clear, SEALED: True, BLOB: blob}}


def seal_finish(public: str, facts: dict[str, Any]) -> dict[str, Any]:
    """The finish's counting score (``final_score``, ``final_attempt``, ``final_scorings``) sealed:
    those fields emptied, and ``final_sealed`` holding them."""
    names = ("final_score", "final_attempt", "final_scorings")
    blob = seal(public, {k: facts.get(k) for k in names})
    return {**facts, "final_score": None, "final_attempt": None, "final_scorings": [], "final_sealed": blob}


def open_content(content: dict[str, Any], key: PrivateKey) -> dict[str, Any]:
    """A sealed scoring's content as it was before sealing."""
    inner = unseal(key, content["details"][BLOB])
    return {"type": "intermediateScore", "score": inner.get("score"), "message": inner.get("message") or {},
            "details": inner.get("details") or {}}


def open_rows(rows: list[dict[str, Any]], key: PrivateKey | None = None) -> tuple[list[dict[str, Any]], int]:
    """The rows with every sealed scoring opened by ``key`` (default: :func:`researcher_key`);
    returns (rows, how many stay sealed: all of them where no key is set). Rows are not changed
    in place; the opened ones are copies."""
    sealed = [i for i, r in enumerate(rows) if _sealed_row(r)]
    if not sealed:
        return rows, 0
    key = key if key is not None else researcher_key()
    if key is None:
        return rows, len(sealed)
    out = list(rows)
    for i in sealed:
        out[i] = {**rows[i], "content": open_content(rows[i]["content"], key)}
    return out, 0


def open_record(meta: Any, rows: list[dict[str, Any]], key: PrivateKey | None = None) -> tuple[list[dict[str, Any]], int]:
    """:func:`open_rows`, and the finish's sealed counting score put back into ``meta`` (a
    ``SessionMeta`` read for reading back, never saved) where the key opens it."""
    if not getattr(meta, "final_sealed", None) and not any(_sealed_row(r) for r in rows):
        return rows, 0
    key = key if key is not None else researcher_key()
    rows, left = open_rows(rows, key) if key is not None else (rows, sum(_sealed_row(r) for r in rows))
    if key is not None and meta.final_sealed:
        final = unseal(key, meta.final_sealed)
        score = final.get("final_score")
        meta.final_score = None if score is None else float(score)
        meta.final_attempt, meta.final_scorings = final.get("final_attempt"), list(final.get("final_scorings") or [])
    return rows, left


def _sealed_row(row: Any) -> bool:
    c = row.get("content") if isinstance(row, dict) else None
    return isinstance(c, dict) and c.get("type") == "intermediateScore" and is_sealed(c.get("details"))


def sealed_note(n: int) -> str:
    return (f"{SEALED}: {n} scoring(s) hold values that open only with the researcher's key "
            "(set REBENCH_RESEARCHER_KEY to its file)")
