"""The command line loads a group's module only when one of its commands runs or shows its help:
`rebench-tui --help` lists every command from the table in rebench_tui/cli/__init__.py, and that
table's one-line help is each command's own first sentence."""

from __future__ import annotations

import ast
import subprocess
import sys

import click
from click.testing import CliRunner

from rebench_tui.cli import COMMANDS, HELP_GROUPS, main
from rebench_tui.cli.group import LazyCommands, first_sentence
from tests.conftest import ROOT

HEAVY = ("rebench_tui.workstation", "rebench_tui.session", "rebench_tui.compare", "rebench_tui.study",
         "rebench_tui.catalog", "rebench_tui.config", "rebench_tui.cli.sessions", "rebench_tui.cli.records",
         "rebench_tui.cli.compare", "rebench_tui.cli.environments", "rebench_tui.cli.study", "docker", "torch",
         "textual", "pydantic")


def _loaded_after(argv: list[str]) -> dict:
    code = ("import sys; from click.testing import CliRunner; from rebench_tui.cli import main; "
            f"r = CliRunner().invoke(main, {argv!r}, terminal_width=100); "
            f"print(r.exit_code, [m for m in {HEAVY!r} if m in sys.modules])")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    code_, loaded = p.stdout.split(" ", 1)
    return {"exit": int(code_), "loaded": ast.literal_eval(loaded)}


def test_help_imports_no_command_module_and_nothing_heavy():
    got = _loaded_after(["--help"])
    assert got == {"exit": 0, "loaded": []}, got


def test_one_commands_help_loads_its_group_only():
    got = _loaded_after(["stop", "--help"])
    assert got["exit"] == 0 and "rebench_tui.cli.sessions" in got["loaded"], got
    assert not {"rebench_tui.cli.records", "rebench_tui.cli.compare", "rebench_tui.cli.environments",
                "rebench_tui.compare", "textual", "torch"} & set(got["loaded"]), got


def test_the_tables_one_line_help_is_each_commands_first_sentence_and_every_command_has_a_section():
    placed = {n for _title, members, _example in HELP_GROUPS for n in members}
    assert placed == set(COMMANDS)
    for name, (_where, short) in COMMANDS.items():
        cmd = main.get_command(click.Context(main), name)
        assert cmd is not None and cmd.name == name, name
        assert short == first_sentence(cmd.help or ""), name


def test_a_mistyped_command_is_named_with_a_suggestion_and_exits_2():
    r = CliRunner().invoke(main, ["staart"])
    assert r.exit_code == 2 and "no such command 'staart'" in r.output.lower() and "start" in r.output, r.output


def test_lazy_commands_import_on_look_up_only_and_take_added_commands():
    table = LazyCommands({"echo": "click.testing:CliRunner", "bad": "rebench_tui.nosuchmodule:x"})
    assert list(table) == ["echo", "bad"] and len(table) == 2 and "bad" in table  # nothing imported (bad would fail)
    assert table["echo"] is CliRunner
    extra = click.Command("extra")
    table["extra"] = extra
    assert list(table) == ["echo", "bad", "extra"] and table.get("extra") is extra and table.get("none") is None
    del table["bad"]
    assert "bad" not in table and len(table) == 2
