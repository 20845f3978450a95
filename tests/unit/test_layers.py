"""The layer order of docs/architecture.md holds (import-linter's contracts in pyproject.toml), and
the core never imports textual: checked statically (every import statement) and at run time.

Layers above the TUI (the CLI) may import it, lazily, where a command opens the screen.
"""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import rebench_tui
from rebench_tui.catalog import load_catalog
from rebench_tui.hashing import scorer_digest
from rebench_tui.runtime.lib.rebench_scorer.identity import digest

PKG = Path(rebench_tui.__file__).parent
ABOVE_TUI = {"cli"}  # the CLI package
CORE = [p for p in PKG.rglob("*.py") if "tui" not in p.relative_to(PKG).parts and p.relative_to(PKG).parts[0] not in ABOVE_TUI]


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


def test_import_linter_contracts_are_kept():
    """`lint-imports` (the layers contract and the textual contract in pyproject.toml) exits 0."""
    exe = Path(sys.executable).with_name("lint-imports")
    cmd = [str(exe)] if exe.exists() else [shutil.which("lint-imports") or "lint-imports"]
    r = subprocess.run([*cmd, "--no-cache"], capture_output=True, text=True, cwd=PKG.parent, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(PKG.parent)})
    assert r.returncode == 0, r.stdout + r.stderr
    assert "0 broken" in r.stdout, r.stdout


def test_contract_layers_match_the_architecture_page():
    """The layers in pyproject.toml are the ones docs/architecture.md lists, in the same order."""
    import tomllib

    page = (PKG.parent / "docs" / "architecture.md").read_text(encoding="utf-8")
    block = page.split("For an import-linter `layers` contract")[1].split("```")[1]
    written = [line.strip() for line in block.strip().splitlines()]
    config = tomllib.loads((PKG.parent / "pyproject.toml").read_text(encoding="utf-8"))
    layers = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")["layers"]
    assert layers == written


@pytest.mark.parametrize("env", sorted(load_catalog(PKG.parent / "environments").environments.values(),
                                       key=lambda e: e.id), ids=lambda e: e.id)
def test_catalog_scorer_digest_is_the_scorers_own(env):
    """The catalog's copy of the scorer digest (foundations layer) agrees with the helper the scorer
    runs in the container, so the catalog needs no import from the runtime layer."""
    assert env.scorer_sha256 == scorer_digest(env.protected_dir) == digest(str(env.protected_dir))


def test_scorer_digest_sees_a_changed_scorer(tmp_path):
    (tmp_path / "score.py").write_text("print(1)\n")
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "data.bin").write_bytes(b"x")
    before = scorer_digest(tmp_path)
    assert before == digest(str(tmp_path))
    (tmp_path / "assets" / "data.bin").write_bytes(b"y")
    assert scorer_digest(tmp_path) == before, "held-out assets are data, not code"
    (tmp_path / "score.py").write_text("print(2)\n")
    assert scorer_digest(tmp_path) != before and scorer_digest(tmp_path) == digest(str(tmp_path))


def test_the_contracts_catch_an_arrow_back_up_and_a_textual_import(tmp_path):
    """The same contracts on a copy of the package with two deliberate breaks: both are reported."""
    shutil.copytree(PKG, tmp_path / "rebench_tui", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(PKG.parent / "pyproject.toml", tmp_path)
    with open(tmp_path / "rebench_tui" / "trajectory" / "records.py", "a", encoding="utf-8") as fh:
        fh.write("\nfrom ..session import lock  # deliberate: records importing the session layer\n")
    with open(tmp_path / "rebench_tui" / "store.py", "a", encoding="utf-8") as fh:
        fh.write("\nimport textual  # deliberate: the core importing textual\n")
    exe = Path(sys.executable).with_name("lint-imports")
    cmd = [str(exe)] if exe.exists() else [shutil.which("lint-imports") or "lint-imports"]
    r = subprocess.run([*cmd, "--no-cache"], capture_output=True, text=True, cwd=tmp_path, timeout=120,
                       env={**os.environ, "PYTHONPATH": str(tmp_path)})
    assert r.returncode != 0, r.stdout + r.stderr
    assert "rebench_tui.trajectory.records -> rebench_tui.session.lock" in r.stdout, r.stdout
    assert "rebench_tui.store -> textual" in r.stdout, r.stdout
    assert "2 broken" in r.stdout, r.stdout
