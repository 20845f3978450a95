"""Key remapping: a TOML file of ``binding id = "keys"`` (e.g. ``score = "f5"``)."""

from __future__ import annotations

import tomllib
from pathlib import Path

from ..errors import RebenchError


def load_keymap(path: Path | None, known_ids: set[str]) -> dict[str, str]:
    if path is None or not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise RebenchError(f"the keymap file {path} is not valid TOML: {exc}", fix="fix or delete it") from None
    table = data.get("keymap", data)
    unknown = sorted(set(table) - known_ids)
    bad = sorted(k for k, v in table.items() if not isinstance(v, str) or not v.strip())
    if unknown or bad:
        raise RebenchError(
            f"the keymap file {path} has " + "; ".join(filter(None, [
                f"unknown binding ids {unknown}" if unknown else "",
                f"non-text keys for {bad}" if bad else "",
            ])),
            fix=f"binding ids are: {sorted(known_ids)}; values are keys like \"f5\" or \"ctrl+s,f5\"",
        )
    return dict(table)
