"""fix_embedding: prepare --synthetic, then score in a real container; and the --from loading path."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest
import torch

from rebench_tui.assets import AssetStore
from rebench_tui.session import Session
from tests.conftest import ROOT

ENV_DIR = ROOT / "environments" / "fix_embedding"
# Every prepare draws a fresh corpus, models, permutation and evaluation seed (prepare.py), so the
# smoke start and reference scores move from one prepare to the next: the tolerances come from the
# spread measured by reference/spread.sh (see the manifest's `measured` note).
START_TOLERANCE = 0.03
REFERENCE_TOLERANCE = 0.06


@pytest.fixture(scope="module")
def smoke_assets():
    from rebench_tui.catalog import load_catalog
    from rebench_tui.config import Settings
    from tests.conftest import KNOWN_IMAGES

    env = load_catalog(ROOT / "environments", KNOWN_IMAGES).get("fix_embedding")
    store = AssetStore(Settings().cache_dir)
    stale = not (store.folder("fix_embedding", "smoke") / "protected" / "secret.json").is_file()  # made before secrets were drawn
    store.prepare(env, "smoke", "synthetic", force=stale)  # a no-op where scripts/engine prepared them already
    return store


@pytest.mark.docker
def test_smoke_scores_start_fix_reference_and_bad_files(catalog, docker_runtime, settings, smoke_assets):
    env = catalog.get("fix_embedding")
    prof = env.profile("smoke")
    s = Session.create(env, "smoke", docker_runtime, settings.sessions, asset_store=smoke_assets)
    try:
        start = s.score()
        assert abs(start.score - prof.start_score) < START_TOLERANCE, start
        assert "corrupted" in start.message["note"]
        # a participant's fix: retrain only the tied embedding, as agent, inside the container
        r = s.sandbox.exec(["python3", "train.py", "--train-only", "wte", "--steps", "300", "--lr", "3e-2", "--batch", "16",
                            "--out", "/home/agent/fixed_model.pth"], workdir="/home/agent/solution", timeout=600)
        assert r.exit_code == 0, r.stderr[-2000:]
        fixed = s.score()
        assert fixed.valid and fixed.score < start.score - 1.0, fixed
        # the reference fix (from the participant's files only) recovers the permutation prepare drew
        # and reaches the smoke profile's recorded reference score
        folder = smoke_assets.folder("fix_embedding", "smoke")
        subprocess.run([sys.executable, str(ENV_DIR / "reference" / "unpermute.py"), str(folder / "workspace" / "large_model.pth"),
                        str(s.workspace / "fixed_model.pth")], check=True, capture_output=True, timeout=900)
        perm = torch.tensor(json.loads((folder / "protected" / "secret.json").read_text())["permutation"])
        corrupted = torch.load(folder / "workspace" / "large_model.pth", weights_only=True)["state_dict"]["wte.weight"]
        original = torch.empty_like(corrupted)
        original[perm] = corrupted
        fixed_wte = torch.load(s.workspace / "fixed_model.pth", weights_only=True)["state_dict"]["wte.weight"]
        assert torch.equal(fixed_wte, original)
        ref = s.score()
        assert abs(ref.score - prof.reference_score) < REFERENCE_TOLERANCE, ref
        assert ref.score < fixed.score <= start.score - 1.0
        (s.workspace / "fixed_model.pth").write_bytes(b"not a checkpoint")
        bad = s.score()
        assert math.isnan(bad.score) and "could not load" in bad.message["error"]
        sys.path.insert(0, str(ENV_DIR / "solution"))
        from model import GPT, GPTConfig, save_checkpoint

        save_checkpoint(GPT(GPTConfig(vocab_size=256, block_size=64, n_layer=1, n_head=2, n_embd=32)), str(s.workspace / "fixed_model.pth"))
        wrong = s.score()
        assert math.isnan(wrong.score) and wrong.message["error"] == "the checkpoint does not fit the fixed architecture"
        assert any("expected (64,)" in w for w in wrong.message["wrong_shapes"])
        denied = s.sandbox.exec(["cat", "/protected/assets/val.bin"])
        assert denied.exit_code != 0 and "Permission denied" in denied.stderr
    finally:
        s.close()
        s.sandbox.stop(remove=True)


def _hf_layout(model, folder):
    """Write a model in Hugging Face's GPT-2 layout (Conv1D weights stored transposed)."""
    folder.mkdir(parents=True)
    c = model.cfg
    (folder / "config.json").write_text(json.dumps({"vocab_size": c.vocab_size, "n_positions": c.block_size, "n_layer": c.n_layer,
                                                    "n_head": c.n_head, "n_embd": c.n_embd, "model_type": "gpt2"}))
    names = {"ln1": "ln_1", "ln2": "ln_2", "attn.qkv": "attn.c_attn", "attn.proj": "attn.c_proj", "fc": "mlp.c_fc", "out": "mlp.c_proj"}
    sd = {}
    for key, value in model.state_dict().items():
        if key.startswith("blocks."):
            _, i, rest = key.split(".", 2)
            name, param = rest.rsplit(".", 1)
            if name not in ("ln1", "ln2") and param == "weight":
                value = value.t()
            key = f"h.{i}.{names[name]}.{param}"
        sd["transformer." + key] = value.clone()
    sd["transformer.h.0.attn.bias"] = torch.ones(1)  # a buffer real checkpoints carry
    sd["lm_head.weight"] = model.wte.weight.clone()
    torch.save(sd, folder / "pytorch_model.bin")


@pytest.mark.slow  # converts two checkpoints with torch: 4-6 s here
def test_from_local_downloads_converts_hugging_face_checkpoints(catalog, tmp_path):
    """The gpu profile's loading code, on files generated here in the hub's layout."""
    sys.path.insert(0, str(ENV_DIR / "solution"))
    import numpy as np
    from model import GPT, GPTConfig, load_checkpoint

    env = catalog.get("fix_embedding")
    torch.manual_seed(0)
    large = GPT(GPTConfig(vocab_size=300, block_size=32, n_layer=2, n_head=2, n_embd=16))
    small = GPT(GPTConfig(vocab_size=300, block_size=32, n_layer=1, n_head=1, n_embd=8))
    src = tmp_path / "downloads"
    _hf_layout(large, src / "gpt2-xl")
    _hf_layout(small, src / "gpt2")
    np.arange(5000, dtype=np.uint16).tofile(src / "train.bin")
    np.arange(700, dtype=np.uint16).tofile(src / "val.bin")
    store = AssetStore(tmp_path / "cache")
    st = store.prepare(env, "gpu", "from", source=src)
    assert st.ready and st.mode == "from"
    corrupted = load_checkpoint(str(st.folder / "workspace" / "large_model.pth"))
    # the permutation prepare drew is kept under protected/ only: undone with it, the conversion
    # round-trips exactly
    secret = json.loads((st.folder / "protected" / "secret.json").read_text())
    perm = torch.tensor(secret["permutation"])
    assert sorted(perm.tolist()) == list(range(300)) and isinstance(secret["eval_seed"], int)
    assert not any("secret" in p.name for p in (st.folder / "workspace").iterdir())
    back = corrupted.state_dict()
    back["wte.weight"] = torch.empty_like(back["wte.weight"]).index_copy_(0, perm, back["wte.weight"])
    for key, value in large.state_dict().items():
        assert torch.equal(back[key], value), key
    assert not torch.equal(corrupted.wte.weight, large.wte.weight)
    again = store.prepare(env, "gpu", "from", source=src, force=True)  # a fresh draw each time
    assert json.loads((again.folder / "protected" / "secret.json").read_text())["permutation"] != secret["permutation"]
    assert json.loads((st.folder / "protected" / "config.json").read_text())["n_embd"] == 16
    assert (st.folder / "protected" / "val.bin").read_bytes() == (src / "val.bin").read_bytes()
