"""uv.lock is in step with pyproject.toml: scripts/setup installs from it, and a stale lock would make
uv refuse (the pip fallback then installs unpinned versions). After editing dependencies: `uv lock`."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement(text: str) -> tuple[str, str]:
    m = re.fullmatch(r"\s*([A-Za-z0-9._-]+)\s*(.*?)\s*", text)
    assert m, text
    return _norm(m.group(1)), m.group(2).replace(" ", "")


def test_the_lock_holds_exactly_the_project_s_requirements():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    wanted = {(*_requirement(r), None) for r in project["dependencies"]}
    for extra, reqs in project["optional-dependencies"].items():
        wanted |= {(*_requirement(r), extra) for r in reqs}
    lock = tomllib.loads((ROOT / "uv.lock").read_text(encoding="utf-8"))
    me = next(p for p in lock["package"] if p["name"] == "rebench-tui")
    locked = set()
    for r in me["metadata"]["requires-dist"]:
        extra = re.fullmatch(r"extra == '([^']+)'", r.get("marker", "")) if r.get("marker") else None
        locked.add((_norm(r["name"]), r.get("specifier", "").replace(" ", ""), extra.group(1) if extra else None))
    norm_spec = {(n, ",".join(sorted(s.split(","))) if s else "", e) for n, s, e in wanted}
    norm_locked = {(n, ",".join(sorted(s.split(","))) if s else "", e) for n, s, e in locked}
    assert norm_locked == norm_spec, ("run `uv lock` and commit uv.lock", norm_locked ^ norm_spec)
    assert sorted(me["metadata"]["provides-extras"]) == sorted(project["optional-dependencies"])
