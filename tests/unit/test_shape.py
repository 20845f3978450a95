"""The package's shape, as docs/architecture.md states it: a thin session facade over services,
small service modules, and no function too long to read on one screen."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "rebench_tui"
SESSION_MODULES = sorted(str(p.relative_to(PACKAGE / "session").with_suffix("")) for p in (PACKAGE / "session").rglob("*.py"))


def lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def test_the_session_is_a_facade_under_200_lines():
    assert lines(PACKAGE / "session" / "session.py") < 200


@pytest.mark.parametrize("name", SESSION_MODULES)
def test_each_module_of_the_session_package_is_at_most_300_lines(name):
    assert lines(PACKAGE / "session" / f"{name}.py") <= 300


def test_no_module_of_the_package_is_over_400_lines():
    """A module a newcomer reads in one sitting (docs/architecture.md)."""
    big = [f"{p.relative_to(PACKAGE.parent)} ({lines(p)} lines)" for p in sorted(PACKAGE.rglob("*.py")) if lines(p) > 400]
    assert not big, "split these:\n" + "\n".join(big)


def test_no_function_in_the_package_is_over_50_lines():
    long = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                n = node.end_lineno - node.lineno + 1
                if n > 50:
                    long.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno} {node.name} ({n} lines)")
    assert not long, "split these:\n" + "\n".join(long)


def test_session_events_are_typed_frozen_and_carry_their_data():
    """Typed events carry their data: no string kinds, no Any."""
    import dataclasses
    import typing

    from rebench_tui.session import events

    kinds = typing.get_args(events.SessionEvent)
    assert len(kinds) >= 10
    for cls in kinds:
        assert dataclasses.is_dataclass(cls) and cls.__dataclass_params__.frozen, cls
        for f in dataclasses.fields(cls):
            assert f.name != "kind" and "Any" != str(f.type), (cls, f)
