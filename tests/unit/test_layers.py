"""The core never imports textual: checked statically (every import statement) and at run time.

Layers above the TUI (the CLI) may import it, lazily, where a command opens the screen.
"""

import ast
import subprocess
import sys
from pathlib import Path

import rebench_tui

PKG = Path(rebench_tui.__file__).parent
ABOVE_TUI = {"cli.py"}
CORE = [p for p in PKG.rglob("*.py") if "tui" not in p.relative_to(PKG).parts and p.name not in ABOVE_TUI]


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level > 0 and node.module:
            if node.module.split(".")[0] == "tui":
                names.add("rebench_tui.tui")
    return names


def test_core_modules_exist():
    assert len(CORE) >= 15, CORE


def test_no_core_module_imports_textual_or_the_tui():
    offenders = {str(p.relative_to(PKG)): sorted(_imports(p) & {"textual", "textual_plotext", "rebench_tui.tui"}) for p in CORE}
    offenders = {k: v for k, v in offenders.items() if v}
    assert not offenders, offenders


def test_importing_the_whole_core_loads_no_textual():
    mods = sorted({".".join(("rebench_tui",) + p.relative_to(PKG).with_suffix("").parts).removesuffix(".__init__")
                   for p in CORE if p.name != "supervise.py"})
    code = "import sys\n" + "".join(f"import {m}\n" for m in mods) + "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'textual_plotext')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", out


def test_cli_list_does_not_load_textual():
    code = ("import sys; from click.testing import CliRunner; from rebench_tui.cli import main; "
            "r = CliRunner().invoke(main, ['list']); print(r.exit_code, 'textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=PKG.parent).stdout.split()
    assert out == ["0", "False"], out
