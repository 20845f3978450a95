"""optimize_llm_foundry: prepare.py and score.py end to end on the smoke profile, plus the gpu path's files.

The module fixture runs `prepare.py --profile smoke --mode synthetic` once (about 35 s on an idle
2-core machine: the reference run of the unmodified minifoundry finetune is most of it). The
end-to-end tests lay out a home and a protected folder as the container has them and run
score.py as a subprocess (which runs `bash finetune.sh`, about 40 s for the starting solution and
10-15 s for the faster reference) on: the starting solution, reference/faster, a faster solution
with another learning rate (changed behaviour), a script that exits 1, one that writes nothing,
and one whose trained_model is a link out of the home folder.

Scores are ln(seconds), so they depend on the machine; the tests check what does not: norm_diff
(0 for the unmodified script, which is deterministic; tiny for the faster one; large for a changed
learning rate), score == ln(execution_time), and the order start > faster (about 3x apart).
"""

from __future__ import annotations

import ast
import json
import math
import os
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import torch

from tests.modules import load_file

ENV = Path(__file__).resolve().parents[2] / "environments" / "optimize_llm_foundry"
MANIFEST = tomllib.loads((ENV / "environment.toml").read_text())
SMOKE = MANIFEST["profiles"]["smoke"]
MAX_NORM = 0.03
# ln(seconds) moves with the machine's speed and load; a factor of e either way still catches a
# start script that stopped doing its work or a timing that is off by orders of magnitude.
TIME_SCORE_TOLERANCE = 1.0


scorer = load_file("olf_score", ENV / "protected" / "score.py")


def _python_path_env() -> dict:
    """`python3` in finetune.sh must be this interpreter (torch lives in its venv)."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '/usr/bin:/bin')}",
            "PYTHONDONTWRITEBYTECODE": "1"}


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    out = tmp_path_factory.mktemp("olf_assets")
    proc = subprocess.run([sys.executable, str(ENV / "prepare.py"), "--profile", "smoke", "--mode", "synthetic",
                           "--out", str(out), "--work", str(out / "work")],
                          capture_output=True, text=True, timeout=600, cwd=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out, proc.stdout


def _layout(base: Path, assets: Path, overlay: Path | None = None, files: dict[str, str] | None = None) -> tuple[Path, Path]:
    """HOME with solution/ (the starting files, then overlay/ and files on top) and assets/;
    PROTECTED with the scorer, assets/ and starting_solution/, like a container."""
    home, protected = base / "home", base / "protected"
    home.mkdir(parents=True)
    shutil.copytree(ENV / "solution", home / "solution", ignore=shutil.ignore_patterns("__pycache__"))
    if overlay is not None:
        shutil.copytree(overlay, home / "solution", dirs_exist_ok=True)
    for name, text in (files or {}).items():
        (home / "solution" / name).write_text(text)
    shutil.copytree(assets / "workspace", home / "assets")
    shutil.copytree(ENV / "protected", protected)
    shutil.copytree(assets / "protected", protected / "assets")
    shutil.copytree(ENV / "solution", protected / "starting_solution")
    return home, protected


def _score(home: Path, protected: Path) -> dict:
    env = {**_python_path_env(), "REBENCH_HOME": str(home), "REBENCH_PROTECTED": str(protected), "REBENCH_PROFILE": "smoke"}
    env.pop("REBENCH_ISOLATED", None)
    proc = subprocess.run([sys.executable, str(protected / "score.py")], capture_output=True, text=True, env=env,
                          timeout=400, cwd=home)
    lines = proc.stdout.strip().splitlines()
    assert proc.returncode == 0 and lines, proc.stderr[-3000:]
    return json.loads(lines[-1])


def _is_nan(score) -> bool:
    return score == "NaN" or (isinstance(score, float) and math.isnan(score))


# -- prepare ----------------------------------------------------------------------------------------
def test_prepare_writes_the_assets(prepared):
    out, stdout = prepared
    assert any(line.startswith("PROGRESS ") for line in stdout.splitlines())
    ws, prot = out / "workspace", out / "protected"
    rows = [json.loads(line) for line in (ws / "train_data.jsonl").read_text().splitlines()]
    assert len(rows) == 400 and all(set(r) == {"prompt", "response"} for r in rows)
    for name in ("config.json", "model.safetensors", "tokenizer.json"):
        assert (ws / "base_model" / name).is_file()
        assert (prot / "reference_model" / name).is_file()
    facts = json.loads((prot / "facts.json").read_text())
    assert facts["profile"] == "smoke" and facts["parameters"] > 500_000 and facts["reference_run"]["seconds"] > 0
    base, _ = scorer.load_weights(ws / "base_model")
    ref, _ = scorer.load_weights(prot / "reference_model")
    assert sorted(base) == sorted(ref) and "lm_head.weight" in ref and "model.layers.3.mlp.down_proj.weight" in ref
    moved = scorer.compare(ref, base)
    assert moved["norm_diff"] > 10 * MAX_NORM  # training moved the weights far beyond the threshold
    assert not list(out.rglob("__pycache__"))


def test_prepare_smoke_refuses_other_modes(tmp_path):
    proc = subprocess.run([sys.executable, str(ENV / "prepare.py"), "--profile", "smoke", "--mode", "fetch",
                           "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w")],
                          capture_output=True, text=True, timeout=60, cwd=ENV)
    assert proc.returncode != 0 and "synthetic" in proc.stderr


def test_prepare_gpu_from_imports_a_reference_run(prepared, tmp_path):
    """--mode from with a model folder, prompt/response rows and a reference run made elsewhere:
    everything is copied, nothing needs LLM Foundry."""
    out, _ = prepared
    source = tmp_path / "source"
    shutil.copytree(out / "workspace" / "base_model", source / "base_model")
    shutil.copytree(out / "protected" / "reference_model", source / "reference_model")
    records = [{"instruction": "Add two numbers.", "input": "1 and 2", "output": "1 + 2"},
               {"instruction": "Say hi.", "input": "", "output": "print('hi')"}]
    (source / "code_alpaca_20k.json").write_text(json.dumps(records))
    dest = tmp_path / "out"
    proc = subprocess.run([sys.executable, str(ENV / "prepare.py"), "--profile", "gpu", "--mode", "from", "--source",
                           str(source), "--out", str(dest), "--work", str(tmp_path / "work")],
                          capture_output=True, text=True, timeout=120, cwd=ENV)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in (dest / "workspace" / "train_data.jsonl").read_text().splitlines()]
    assert rows == [{"prompt": "Add two numbers.\n\n1 and 2\n", "response": "1 + 2"},
                    {"prompt": "Say hi.\n", "response": "print('hi')"}]
    assert (dest / "protected" / "reference_model" / "model.safetensors").read_bytes() == \
        (source / "reference_model" / "model.safetensors").read_bytes()
    facts = json.loads((dest / "protected" / "facts.json").read_text())
    assert facts["rows"] == 2 and "imported_from" in facts["reference_run"]


def test_prepare_gpu_from_without_source_fails_clearly(tmp_path):
    proc = subprocess.run([sys.executable, str(ENV / "prepare.py"), "--profile", "gpu", "--mode", "from",
                           "--out", str(tmp_path / "o"), "--work", str(tmp_path / "w")],
                          capture_output=True, text=True, timeout=60, cwd=ENV)
    assert proc.returncode != 0 and "--source" in proc.stderr


# -- pieces --------------------------------------------------------------------------------------------
def test_compare_sums_per_tensor_norms_in_float64():
    ref = {"a": torch.zeros(3, 4), "b": torch.ones(5, dtype=torch.bfloat16), "empty": torch.zeros(0)}
    trained = {"a": torch.zeros(3, 4), "b": torch.ones(5, dtype=torch.bfloat16), "empty": torch.zeros(0), "extra": torch.ones(1)}
    trained["a"][0, 0], trained["a"][2, 3] = 3.0, 4.0   # norm 5
    trained["b"][1] = 3.0                              # norm 2
    d = scorer.compare(trained, ref)
    assert d["norm_diff"] == pytest.approx(7.0) and d["max_scalar_diff"] == pytest.approx(4.0)
    assert d["worst_tensor"] == "a" and d["unexpected"] == ["extra"] and not d["missing"]
    d = scorer.compare({"a": torch.zeros(4, 3), "b": ref["b"]}, ref)
    assert d["missing"] == ["empty"] and d["wrong_shapes"] == ["a: (4, 3) (expected (3, 4))"]


def test_safetensors_round_trip_is_read_by_the_scorer(tmp_path):
    sys.path.insert(0, str(ENV / "solution"))
    try:
        from minifoundry.safetensors_io import load_file, save_file
    finally:
        sys.path.remove(str(ENV / "solution"))
    state = {"x": torch.randn(3, 5), "y": torch.arange(6, dtype=torch.int64).reshape(2, 3),
             "z": torch.randn(4).to(torch.bfloat16), "e": torch.zeros(0, 2)}
    save_file(state, tmp_path / "model.safetensors")
    for got in (load_file(tmp_path / "model.safetensors"), scorer.load_weights(tmp_path)[0]):
        assert sorted(got) == sorted(state)
        for k in state:
            assert got[k].dtype == state[k].dtype and torch.equal(got[k], state[k])
    (tmp_path / "model.safetensors").write_bytes(b"\x00" * 4)
    with pytest.raises(ValueError):
        scorer.load_weights(tmp_path)


def test_fast_tokenizer_gives_the_starting_tokenizers_ids(prepared):
    sys.path[:0] = [str(ENV / "solution"), str(ENV / "reference" / "faster")]
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True  # no __pycache__ in the environment's folders
    try:
        import minifoundry
        from minifoundry.tokenizer import Tokenizer

        minifoundry.__path__.append(str(ENV / "reference" / "faster" / "minifoundry"))
        from minifoundry.fast_finetune import FastTokenizer
    finally:
        del sys.path[:2]
        sys.dont_write_bytecode = saved
    slow = Tokenizer.from_dir(prepared[0] / "workspace" / "base_model")
    fast = FastTokenizer(slow.merges)
    rows = [json.loads(line) for line in (prepared[0] / "workspace" / "train_data.jsonl").read_text().splitlines()]
    texts = [t for r in rows[:60] for t in (r["prompt"], r["response"])] + ["aaaa bbbb  \n\t x9y ÿ€", ""]
    for t in texts:
        assert fast.encode(t) == slow.encode(t), t
        assert slow.decode(slow.encode(t)) == t


def test_gpu_stages_use_only_the_llm_foundry_package():
    """finetune.sh's gpu branch runs scripts/ that exist in solution/ and that import names the
    llm-foundry 0.22 package exports (llmfoundry.command_utils); finetune.yaml parses and names the
    keys finetune.sh overrides."""
    import yaml

    script = (ENV / "solution" / "finetune.sh").read_text()
    gpu_branch = script[script.index("else\n"):]
    used = sorted({w for w in gpu_branch.split() if w.startswith("scripts/")})
    assert used == ["scripts/convert_composer_to_hf.py", "scripts/convert_finetuning_dataset.py", "scripts/train.py"]
    exported = {"convert_finetuning_dataset_from_args", "train_from_yaml"}
    for path in used:
        tree = ast.parse((ENV / "solution" / path).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("llmfoundry"):
                assert node.module == "llmfoundry.command_utils" and {a.name for a in node.names} <= exported, path
    cfg = yaml.safe_load((ENV / "solution" / "finetune.yaml").read_text())
    assert cfg["model"]["name"] == "hf_causal_lm" and cfg["train_loader"]["name"] == "finetuning"
    for key in ("data_local", "model_name_or_path"):
        assert key in cfg["variables"] and f"variables.{key}=" in gpu_branch
    assert cfg["train_loader"]["dataset"]["split"] == "train" and cfg["eval_loader"]["dataset"]["split"] == "valid"
    assert cfg["global_train_batch_size"] % cfg["device_train_microbatch_size"] == 0


# -- scoring end to end ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def start_result(prepared, tmp_path_factory):
    home, protected = _layout(tmp_path_factory.mktemp("olf_start"), prepared[0])
    (home / "solution" / "ftout").mkdir()  # an earlier run's output: the scorer must delete it
    (home / "solution" / "ftout" / "stale.pt").write_text("old")
    return _score(home, protected)


def test_starting_solution_reproduces_the_reference_exactly(start_result):
    r = start_result
    assert isinstance(r["score"], float), r
    m = r["message"]
    assert m["norm_diff"] == 0.0 and m["max_scalar_diff"] == 0.0  # deterministic: the same run as at setup
    assert m["maximum_allowed_norm_diff"] == MAX_NORM
    assert r["score"] == pytest.approx(math.log(m["execution_time"]), abs=1e-3)
    assert "ftout" in r["details"]["removed"]
    assert abs(r["score"] - SMOKE["start_score"]) <= TIME_SCORE_TOLERANCE, r


def test_faster_reference_is_valid_and_faster(prepared, start_result, tmp_path):
    home, protected = _layout(tmp_path, prepared[0], overlay=ENV / "reference" / "faster")
    r = _score(home, protected)
    assert isinstance(r["score"], float), r
    assert 0 < r["message"]["norm_diff"] < 0.1 * MAX_NORM, r  # float reordering only
    assert r["score"] < start_result["score"] - 0.3, (r, start_result)
    assert abs(r["score"] - SMOKE["reference_score"]) <= TIME_SCORE_TOLERANCE, r


def test_changed_learning_rate_is_invalid(prepared, tmp_path):
    toml = (ENV / "solution" / "finetune_smoke.toml").read_text()
    assert "lr = 1.0e-3" in toml
    home, protected = _layout(tmp_path, prepared[0], overlay=ENV / "reference" / "faster",
                              files={"finetune_smoke.toml": toml.replace("lr = 1.0e-3", "lr = 1.25e-3")})
    r = _score(home, protected)
    assert _is_nan(r["score"]), r
    assert r["message"]["norm_diff"] > MAX_NORM and "exceeds the maximum allowed" in r["message"]["error"]
    assert r["message"]["execution_time"] > 0


BROKEN = "#!/bin/bash\necho preparing the data\necho 'something went wrong' >&2\nexit 1\n"
NOTHING = "#!/bin/bash\necho done\n"
ESCAPE = "#!/bin/bash\nset -e\nmkdir -p /tmp/olf_escape_target\nln -sfn /tmp/olf_escape_target trained_model\n"


@pytest.mark.parametrize("script, error", [
    (BROKEN, "exited with status 1"),
    (NOTHING, "wrote no solution/trained_model"),
    (ESCAPE, "not a link elsewhere"),
])
def test_failed_submissions_are_nan_with_a_reason(prepared, tmp_path, script, error):
    home, protected = _layout(tmp_path, prepared[0], files={"finetune.sh": script})
    r = _score(home, protected)
    assert _is_nan(r["score"]) and error in r["message"]["error"], r
    if script is BROKEN:
        assert "something went wrong" in r["message"]["output_tail"]


def test_missing_reference_is_reported(prepared, tmp_path):
    home, protected = _layout(tmp_path, prepared[0])
    shutil.rmtree(protected / "assets" / "reference_model")
    r = _score(home, protected)
    assert _is_nan(r["score"]) and "prepare" in r["message"]["error"]
