"""Settings read every REBENCH_* variable; the secrets file is read by python-dotenv's parser and
the keymap checked by pydantic, each naming what is wrong."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import rebench_tui
from rebench_tui.config import Settings
from rebench_tui.errors import RebenchError
from rebench_tui.secrets import read_secrets_file
from rebench_tui.tui.keymap import load_keymap

PKG = Path(rebench_tui.__file__).parent
# Run where the package is not: inside containers (the scorer helpers) or with `python -I -S`.
STANDALONE = {PKG / "runtime" / "supervise.py", PKG / "runtime" / "capture" / "task.py"}  # run in containers
STANDALONE_DIRS = {PKG / "runtime" / "lib"}


def test_settings_read_the_files_and_agent_runs_from_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("REBENCH_CONFIG_DIR", str(tmp_path / "config"))
    for var in ("REBENCH_SECRETS_FILE", "REBENCH_HOSTS_FILE", "REBENCH_AGENT_RUNS"):
        monkeypatch.delenv(var, raising=False)
    s = Settings()
    assert s.secrets_path == tmp_path / "config" / "secrets.env"
    assert s.hosts_path == tmp_path / "config" / "hosts.toml"
    assert s.keymap_file == tmp_path / "config" / "keymap.toml" and s.agent_runs is None
    monkeypatch.setenv("REBENCH_SECRETS_FILE", str(tmp_path / "s.env"))
    monkeypatch.setenv("REBENCH_HOSTS_FILE", str(tmp_path / "h.toml"))
    monkeypatch.setenv("REBENCH_AGENT_RUNS", str(tmp_path / "runs"))
    s = Settings()
    assert (s.secrets_path, s.hosts_path, s.agent_runs) == (tmp_path / "s.env", tmp_path / "h.toml", str(tmp_path / "runs"))
    monkeypatch.setenv("REBENCH_SECRETS_FILE", "")  # empty is unset, as before
    assert Settings().secrets_path == tmp_path / "config" / "secrets.env"


def _reads_rebench_variable(node: ast.AST) -> bool:
    """os.environ.get("REBENCH_…"), os.getenv("REBENCH_…"), os.environ["REBENCH_…"]."""
    if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant):
        name = ast.unparse(node.func)
        return name.endswith(("environ.get", "getenv", "environ.pop")) and str(node.args[0].value).startswith("REBENCH_")
    if isinstance(node, ast.Subscript) and ast.unparse(node.value).endswith("environ"):
        return isinstance(node.slice, ast.Constant) and str(node.slice.value).startswith("REBENCH_")
    return False


def test_no_module_reads_a_rebench_variable_outside_settings():
    offenders = []
    for path in PKG.rglob("*.py"):
        if path in STANDALONE or any(d in path.parents for d in STANDALONE_DIRS):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if _reads_rebench_variable(node):
                offenders.append(f"{path.relative_to(PKG)}:{node.lineno}")
    assert offenders == []
    # and the check does find one
    assert _reads_rebench_variable(ast.parse('os.environ.get("REBENCH_X")').body[0].value)


def secrets_file(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "secrets.env"
    f.write_text(text)
    f.chmod(0o600)
    return f


def test_secrets_file_follows_dotenv_syntax(tmp_path):
    f = secrets_file(tmp_path, "# judge\nJUDGE_KEY=sk-abc\nexport JUDGE_URL='http://127.0.0.1:9/v1'\n\n"
                               'CODE_MODEL_KEY="with # hash and $HOME"\nPLAIN=value # a comment\n')
    assert read_secrets_file(f) == {"JUDGE_KEY": "sk-abc", "JUDGE_URL": "http://127.0.0.1:9/v1",
                                    "CODE_MODEL_KEY": "with # hash and $HOME", "PLAIN": "value"}


@pytest.mark.parametrize("bad", ["JUDGE_KEY sk-abc", "JUDGE_KEY"])
def test_a_bad_secrets_line_is_named(tmp_path, bad):
    f = secrets_file(tmp_path, f"OK=1\n{bad}\n")
    with pytest.raises(RebenchError, match=r"secrets.env:2: expected NAME=value"):
        read_secrets_file(f)


def test_a_secrets_file_others_can_read_is_refused(tmp_path):
    f = secrets_file(tmp_path, "A=1\n")
    f.chmod(0o640)
    with pytest.raises(RebenchError) as exc:
        read_secrets_file(f)
    assert exc.value.fix == f"chmod 600 {f}"


IDS = {"score", "pause", "quit"}


def keymap(tmp_path: Path, text: str) -> Path:
    f = tmp_path / "keymap.toml"
    f.write_text(text)
    return f


def test_keymap_top_level_or_under_a_table(tmp_path):
    assert load_keymap(keymap(tmp_path, 'score = "f5"\npause = "ctrl+p,f6"\n'), IDS) == {"score": "f5", "pause": "ctrl+p,f6"}
    assert load_keymap(keymap(tmp_path, '[keymap]\nquit = "f10"\n'), IDS) == {"quit": "f10"}
    assert load_keymap(tmp_path / "absent.toml", IDS) == {} and load_keymap(None, IDS) == {}


def test_keymap_names_every_problem_at_once(tmp_path):
    with pytest.raises(RebenchError) as exc:
        load_keymap(keymap(tmp_path, 'scor = "f5"\npause = 5\nquit = "  "\n'), IDS)
    what = exc.value.what
    assert "unknown binding id 'scor'" in what and "no keys for 'pause'" in what and "no keys for 'quit'" in what
    assert "['pause', 'quit', 'score']" in exc.value.fix
    with pytest.raises(RebenchError, match="not valid TOML"):
        load_keymap(keymap(tmp_path, "score = \n"), IDS)
