"""fix_embedding without Docker: prepare's secrets are drawn fresh, the reference does not read
them, and the scorer (run as a subprocess, as on the local runtime) refuses hostile files before
and after its loader process has read them. Tiny hand-made assets: a few seconds a scoring."""

from __future__ import annotations

import io
import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from tests.modules import load_file

ROOT = Path(__file__).resolve().parents[2]
ENV = ROOT / "environments" / "fix_embedding"
SCORER_LIB = ROOT / "rebench_tui" / "runtime" / "lib"
sys.path.insert(0, str(ENV / "solution"))
from model import GPT, GPTConfig, save_checkpoint  # noqa: E402

prepare = load_file("fe_prepare", ENV / "prepare.py")
CFG = prepare.LARGE_SMOKE


def test_prepare_draws_a_fresh_permutation_and_seed_each_time():
    torch.manual_seed(0)
    base = GPT(GPTConfig(vocab_size=300, block_size=8, n_layer=1, n_head=1, n_embd=8))
    perms, seeds = [], []
    for _ in range(3):
        model = GPT(base.cfg)
        model.load_state_dict(base.state_dict())
        secret = prepare.draw_secret()
        prepare.permute_embedding(model, secret)
        perm = torch.tensor(secret["permutation"])
        assert sorted(perm.tolist()) == list(range(300))
        assert torch.equal(model.wte.weight, base.wte.weight[perm])  # row i holds the original row perm[i]
        perms.append(perm.tolist())
        seeds.append(secret["eval_seed"])
    assert len({tuple(p) for p in perms}) == 3 and len(set(seeds)) == 3
    assert not any(name.endswith("_SEED") for name in vars(prepare)), "a seed constant in prepare.py"


def test_the_reference_recovers_the_permutation_without_the_secret():
    """unpermute.py reads only what the participant has (no prepare.py, nothing under protected/):
    the end-to-end check that it recovers the permutation is in the integration test and in
    reference/spread.sh."""
    import ast

    tree = ast.parse((ENV / "reference" / "unpermute.py").read_text())
    body = tree.body[1:] if isinstance(tree.body[0], ast.Expr) else tree.body  # without the module docstring
    for node in ast.walk(ast.Module(body=body, type_ignores=[])):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
            assert "prepare" not in names, names
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            assert "secret" not in node.value and "protected" not in node.value, node.value


# -- the scorer ---------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def assets(tmp_path_factory):
    base = tmp_path_factory.mktemp("fe_assets")
    (base / "workspace").mkdir()
    (base / "protected").mkdir()
    torch.manual_seed(0)
    save_checkpoint(GPT(CFG), str(base / "workspace" / "large_model.pth"))
    rng = np.random.default_rng(0)
    rng.integers(0, CFG.vocab_size, 20_000).astype(np.uint16).tofile(base / "workspace" / "train.bin")
    rng.integers(0, CFG.vocab_size, 5_000).astype(np.uint16).tofile(base / "protected" / "val.bin")
    (base / "protected" / "config.json").write_text(json.dumps(CFG.__dict__))
    (base / "protected" / "secret.json").write_text(json.dumps({"eval_seed": 12345}))
    return base


@pytest.fixture
def layout(assets, tmp_path):
    home, prot = tmp_path / "home", tmp_path / "protected"
    home.mkdir()
    shutil.copytree(ENV / "solution", home / "solution")
    (home / "assets").symlink_to(assets / "workspace", target_is_directory=True)
    shutil.copytree(ENV / "protected", prot)
    shutil.copytree(ENV / "solution", prot / "starting_solution")
    shutil.copytree(assets / "protected", prot / "assets")
    return home, prot


def _score(home: Path, prot: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("REBENCH_")}
    env.update(REBENCH_HOME=str(home), REBENCH_PROTECTED=str(prot), REBENCH_PROFILE="smoke", REBENCH_SCORER_LIB=str(SCORER_LIB))
    proc = subprocess.run([sys.executable, str(prot / "score.py")], capture_output=True, text=True, env=env, timeout=300)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and len(lines) == 1, (proc.stdout[-3000:], proc.stderr[-3000:])
    out = json.loads(lines[0])
    out["score"] = math.nan if out["score"] == "NaN" else out["score"]
    return out


def _saved(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


class _RunsCode:
    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_start_score_is_deterministic_for_a_secret_and_moves_with_it(layout):
    home, prot = layout
    first, again = _score(home, prot), _score(home, prot)
    assert math.isfinite(first["score"]) and first["score"] == again["score"], (first, again)
    assert "corrupted" in first["message"]["note"]
    assert first["details"]["scorer_sha256"] and first["details"]["eval"] == {"batches": 32, "rows": 8, "tokens": 64}
    (prot / "assets" / "secret.json").write_text(json.dumps({"eval_seed": 999}))
    other = _score(home, prot)
    assert other["message"]["loss_validation"] != first["message"]["loss_validation"]  # other batches
    (prot / "assets" / "secret.json").unlink()
    missing = _score(home, prot)
    assert math.isnan(missing["score"]) and "organisers" in missing["message"]["error"]
    assert "secret.json" in missing["details"]["setup_error"]


def test_hostile_files_are_refused(layout, tmp_path):
    home, prot = layout
    fixed = home / "fixed_model.pth"
    state = torch.load(home / "assets" / "large_model.pth", weights_only=True)
    start = _score(home, prot)

    marker = tmp_path / "pwned"
    fixed.write_bytes(_saved({**state, "x": _RunsCode(marker)}))
    r = _score(home, prot)
    assert math.isnan(r["score"]) and "could not load" in r["message"]["error"] and not marker.exists(), r

    bad = {**state["state_dict"], "wte.weight": state["state_dict"]["wte.weight"].clone()}
    bad["wte.weight"][0, 0] = math.nan
    fixed.write_bytes(_saved(bad))
    r = _score(home, prot)
    assert math.isnan(r["score"]) and "wte.weight holds non-finite" in r["message"]["error"], r

    fixed.unlink()
    fixed.symlink_to(prot / "assets" / "val.bin")
    r = _score(home, prot)
    assert math.isnan(r["score"]) and "symbolic link" in r["message"]["error"], r

    fixed.unlink()
    with open(fixed, "wb") as fh:
        fh.truncate(1 << 30)
    r = _score(home, prot)
    assert math.isnan(r["score"]) and "bytes, more than" in r["message"]["error"], r

    fixed.write_bytes(_saved({k: v.double() for k, v in state["state_dict"].items()}))  # float64: fine
    r = _score(home, prot)
    assert r["score"] == pytest.approx(start["score"], abs=1e-6), r

    fixed.write_bytes(_saved({k: v.to(torch.int32) for k, v in state["state_dict"].items()}))
    r = _score(home, prot)
    assert math.isnan(r["score"]) and "int32" in r["message"]["error"], r
