"""Preparing assets with a real prepare script into a real cache folder."""

from __future__ import annotations

import json
import shutil

import pytest

from rebench_tui.assets import AssetProgress, AssetStore, prepare_command
from rebench_tui.errors import RebenchError
from rebench_tui.runtime.local import LocalRuntime
from rebench_tui.session import Session


@pytest.fixture
def env(fixture_catalog):
    return fixture_catalog.get("toy_assets")


@pytest.fixture
def store(tmp_path):
    return AssetStore(tmp_path / "cache")


def runs(store, env, profile="smoke"):
    log = store.root / env.id / f".work-{profile}" / "runs.log"
    return log.read_text().splitlines() if log.exists() else []


def test_missing_assets_name_the_exact_command(env, store):
    with pytest.raises(RebenchError) as exc:
        store.require(env, "smoke")
    assert "rebench-tui prepare toy_assets --synthetic" in exc.value.fix
    assert prepare_command(env, "gpu") == "rebench-tui prepare toy_assets"


def test_prepare_records_checksums_and_is_idempotent(env, store):
    bars, lines = [], []
    st = store.prepare(env, "smoke", "synthetic", progress=AssetProgress(lambda d, t, l: bars.append((d, t, l)), lines.append))
    assert st.ready and st.mode == "synthetic"
    manifest = json.loads((st.folder / "MANIFEST.json").read_text())
    assert set(manifest["files"]) == {"workspace/data.txt", "protected/key.txt"}
    assert all(len(f["sha256"]) == 64 for f in manifest["files"].values())
    assert (3.0, 3.0, "step 3") in bars and "done" in lines
    again = store.prepare(env, "smoke", "synthetic", progress=AssetProgress(line=lines.append))
    assert again.ready and len(runs(store, env)) == 1  # nothing ran the second time
    assert any("already prepared" in line for line in lines)
    store.prepare(env, "smoke", "synthetic", force=True)
    assert len(runs(store, env)) == 2


def test_a_failed_prepare_keeps_downloads_and_leaves_nothing_half_ready(env, store, monkeypatch):
    monkeypatch.setenv("TOY_PREPARE_FAIL", "1")
    with pytest.raises(RebenchError) as exc:
        store.prepare(env, "smoke", "synthetic")
    assert "503 Service Unavailable" in str(exc.value) and "resumes" in exc.value.kept
    assert not store.status(env, "smoke").ready
    monkeypatch.delenv("TOY_PREPARE_FAIL")
    st = store.prepare(env, "smoke", "synthetic")
    assert "resumed=True" in (st.folder / "workspace" / "data.txt").read_text()  # the work folder survived


def test_verify_finds_a_changed_file(env, store):
    st = store.prepare(env, "smoke", "synthetic")
    assert store.verify(env, "smoke") == []
    (st.folder / "protected" / "key.txt").write_text("held-out kez\n")  # same size, one byte differs
    assert store.status(env, "smoke").ready  # the quick check only looks at sizes
    assert store.verify(env, "smoke") == ["protected/key.txt: sha256 differs from the manifest (corrupted or changed)"]
    (st.folder / "workspace" / "data.txt").unlink()
    assert "missing" in store.status(env, "smoke").reason


def test_import_a_prepared_folder_checked_by_checksum(env, store, tmp_path):
    st = store.prepare(env, "smoke", "synthetic")
    carried = tmp_path / "carried"
    shutil.copytree(st.folder, carried)  # as if copied to an offline cluster
    other = AssetStore(tmp_path / "cluster-cache")
    imported = other.prepare(env, "smoke", "from", source=carried)
    assert imported.ready and (imported.folder / "protected" / "key.txt").read_text() == "held-out key\n"
    assert json.loads((imported.folder / "MANIFEST.json").read_text())["imported_from"] == str(carried)
    (carried / "workspace" / "data.txt").write_text("tampered!!" + "x" * 30)
    third = AssetStore(tmp_path / "third")
    with pytest.raises(RebenchError) as exc:
        third.prepare(env, "smoke", "from", source=carried)
    assert "workspace/data.txt" in str(exc.value) and not third.status(env, "smoke").ready


def test_import_refuses_paths_outside_the_asset_folder_and_other_environments(env, store, tmp_path):
    src = tmp_path / "evil"
    (src / "workspace").mkdir(parents=True)
    (src / "MANIFEST.json").write_text(json.dumps({"env": "toy_assets", "profile": "smoke",
                                                   "files": {"workspace/../../etc/passwd": {"size": 1, "sha256": "0" * 64}}}))
    with pytest.raises(RebenchError) as exc:
        store.prepare(env, "smoke", "from", source=src)
    assert "outside" in str(exc.value)
    (src / "MANIFEST.json").write_text(json.dumps({"env": "fix_embedding", "profile": "smoke", "files": {}}))
    with pytest.raises(RebenchError) as exc:
        store.prepare(env, "smoke", "from", source=src)
    assert "not 'toy_assets'" in str(exc.value)


def test_from_raw_sources_runs_the_script(env, store, tmp_path):
    src = tmp_path / "downloads"
    src.mkdir()
    (src / "key.txt").write_text("key from the downloads\n")
    st = store.prepare(env, "gpu", "from", source=src)
    assert (st.folder / "protected" / "key.txt").read_text() == "key from the downloads\n"
    assert st.mode == "from"


def test_a_session_sees_both_kinds_of_asset_on_the_local_runtime(env, store, tmp_path, fake_clock):
    with pytest.raises(RebenchError):
        Session.create(env, "smoke", LocalRuntime(), tmp_path / "s", clock=fake_clock, asset_store=store)
    assert not (tmp_path / "s").exists() or not any((tmp_path / "s").iterdir())  # refused before anything was made
    st = store.prepare(env, "smoke", "synthetic")
    s = Session.create(env, "smoke", LocalRuntime(), tmp_path / "s", clock=fake_clock, asset_store=store)
    try:
        rec = s.score()
        assert rec.score == 10 and rec.details["key"] == "held-out key\n" and rec.details["starting_solution"] is True
        assert "participant data" in rec.details["data"]
        assert s.meta.metadata["assets"]["manifest_sha256"] == st.digest
    finally:
        s.close()
