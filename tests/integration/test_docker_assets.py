"""Assets in a real container: participant assets read-only in ~/assets, held-out ones unreadable."""

import pytest

from rebench_tui.assets import AssetStore
from rebench_tui.session import Session

pytestmark = pytest.mark.docker


def test_assets_are_mounted_and_protected(fixture_catalog, docker_runtime, settings, tmp_path):
    env = fixture_catalog.get("toy_assets")
    store = AssetStore(tmp_path / "cache")
    store.prepare(env, "smoke", "synthetic")
    s = Session.create(env, "smoke", docker_runtime, settings.sessions, asset_store=store)
    try:
        sb = s.sandbox
        assert "participant data" in sb.exec(["cat", "assets/data.txt"]).stdout
        w = sb.exec(["sh", "-c", "echo x > assets/data.txt"])
        assert w.exit_code != 0 and "Read-only file system" in w.stderr
        r = sb.exec(["cat", "/protected/assets/key.txt"])
        assert r.exit_code != 0 and "Permission denied" in r.stderr
        st = sb.exec(["stat", "-c", "%U:%G %a", "/protected/assets", "/protected/assets/key.txt",
                      "/protected/starting_solution/answer.txt"], user="root").stdout.split("\n")
        assert st[:3] == ["root:protected 750", "root:protected 640", "root:protected 640"]
        rec = s.score()
        assert rec.score == 10 and rec.details["key"] == "held-out key\n" and rec.details["starting_solution"]
        # the mount point is not the participant's work: no file events for it
        s.start_watching()
        (s.workspace / "solution" / "answer.txt").write_text("4")
        s.watcher.flush()
        assert s.score().score == 4
    finally:
        s.close()
        s.sandbox.stop(remove=True)
    from rebench_tui.trajectory.audit import read_entries

    paths = [r["content"]["content"][1]["path"] for r in read_entries(s.folder / "audit.jsonl")
             if r["content"].get("attributes", {}).get("title") == "file"]
    assert paths == ["solution/answer.txt"]
