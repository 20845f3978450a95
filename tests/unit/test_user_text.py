"""What a user reads (the README, docs/, benchmarks/, the environments' pages, the command line's
help and messages) names no tool of the place it was written in, no path of one machine and no
internal tracker."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from click.testing import CliRunner

from rebench_tui.cli import main
from tests.conftest import ROOT

FORBIDDEN = [
    (re.compile(r"/work/|\.\./shared"), "a path of one machine"),
    (re.compile(r"device tool|\brun\(command=|\bfiles_at\b|\blent\b", re.I), "a tool the reader does not have"),
    (re.compile(r"\bissues? #?\d+", re.I), "an internal tracker's issue"),
    (re.compile(r"\bthe library\b", re.I), "a tool the reader does not have"),
]


def _pages() -> list[Path]:
    """The pages, and the scripts a maintainer reads to run things: the benchmarks' and scripts/."""
    return [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), ROOT / "benchmarks" / "README.md",
            *(ROOT / "environments").rglob("*.md"), *(ROOT / "benchmarks").rglob("*.py"),
            *(ROOT / "benchmarks").glob("*.sh"), *(p for p in (ROOT / "scripts").iterdir() if p.is_file())]


def _problems(where: str, text: str) -> list[str]:
    return [f"{where}:{text[:m.start()].count(chr(10)) + 1}: {why}: {m.group(0)!r}"
            for pattern, why in FORBIDDEN for m in pattern.finditer(text)]


def test_pages_a_user_reads_name_nothing_of_this_workplace():
    found = [p for page in _pages() for p in _problems(str(page.relative_to(ROOT)), page.read_text(encoding="utf-8"))]
    assert found == [], "\n".join(found)


def test_the_command_lines_help_and_messages_name_nothing_of_this_workplace():
    found = []
    for path in (ROOT / "rebench_tui").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found += _problems(f"{path.relative_to(ROOT)}:{node.lineno}", node.value)
    names = [c for c in main.commands] + ["images build"]
    for name in names:
        found += _problems(f"rebench-tui {name} --help", CliRunner().invoke(main, [*name.split(), "--help"]).output)
    assert found == [], "\n".join(found)
