"""Key remapping: a TOML file of ``binding id = "keys"`` (e.g. ``score = "f5"``), at the top level
or under a ``[keymap]`` table, checked by pydantic against the app's binding ids."""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import StrictStr, StringConstraints, TypeAdapter, ValidationError

from ..errors import RebenchError

Keys = Annotated[StrictStr, StringConstraints(pattern=r"\S")]  # "f5", "ctrl+s,f5": text, not blank


def load_keymap(path: Path | None, known_ids: set[str]) -> dict[str, str]:
    if path is None or not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise RebenchError(f"the keymap file {path} is not valid TOML: {exc}", fix="fix or delete it") from None
    schema = TypeAdapter(dict[Literal[tuple(sorted(known_ids))], Keys])  # type: ignore[valid-type]
    try:
        return schema.validate_python(data.get("keymap", data))
    except ValidationError as exc:
        raise RebenchError(
            f"the keymap file {path} has " + "; ".join(_problem(e) for e in exc.errors()),
            fix=f"binding ids are: {sorted(known_ids)}; values are keys like \"f5\" or \"ctrl+s,f5\"",
        ) from None


def _problem(error: Any) -> str:
    loc = error["loc"]
    if len(loc) == 2 and loc[1] == "[key]":
        return f"an unknown binding id {loc[0]!r}"
    if loc:
        return f"no keys for {loc[0]!r} (text like \"f5\" is needed)"
    return "no table of binding ids"
