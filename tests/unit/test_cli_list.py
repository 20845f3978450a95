"""`rebench-tui list` shows all seven RE-Bench environments with their profiles' anchors and where
they come from; no table cuts an id (`list`'s environment ids, `sessions`' session ids)."""

from __future__ import annotations

from click.testing import CliRunner

from rebench_tui.cli import main

SEVEN = ("fix_embedding", "optimize_llm_foundry", "triton_cumsum", "small_scaling_law", "restricted_mlm",
         "nanogpt_chat_rl", "rust_codecontests")


def test_all_seven_environments_are_listed_with_gpu_and_smoke_figures(catalog, tmp_path):
    result = CliRunner().invoke(main, ["list", "-v"], env={"COLUMNS": "220", "REBENCH_CONFIG_DIR": str(tmp_path)})
    assert result.exit_code == 0, result.output
    assert set(SEVEN) <= set(catalog.environments)
    for env_id in SEVEN:
        env = catalog.get(env_id)
        assert env.profile_names == ["gpu", "smoke"], env_id
        for name in env.profile_names:
            p = env.profile(name)
            assert f"{env_id} {name}: start {p.start_score:g}, reference {p.reference_score:g}" in result.output
            assert p.measured.strip(), f"{env_id} {name} does not say how its figures were measured"
            assert p.start_score != p.reference_score


def test_list_v_says_where_every_profiles_anchors_come_from(catalog, tmp_path):
    out = CliRunner().invoke(main, ["list", "-v"], env={"COLUMNS": "400", "REBENCH_CONFIG_DIR": str(tmp_path)}).output
    blocks = {}
    for env in catalog.environments.values():
        for name in env.profile_names:
            p = env.profile(name)
            head = f"{env.id} {name}: start {p.start_score:g}, reference {p.reference_score:g}"
            block = out[out.index(head):].split("\n  measured:")[0]
            blocks[(env.id, name)] = block
            assert f"  manifest: {p.anchors} — " in block, block
            assert "  in effect here: the manifest's (not calibrated on this host)" in block, block
            cal = p.calibration
            if cal.unavailable:
                assert f"  calibrate: not here — {cal.unavailable}" in block
            else:
                assert f"  calibrate: rebench-tui calibrate {env.id} --profile {name}" in block
    # published figures name whose they are and on what hardware
    assert "published by METR" in blocks[("fix_embedding", "gpu")] and "1 H100" in blocks[("fix_embedding", "gpu")]
    assert "measured by this project" in blocks[("triton_cumsum", "gpu")]


def test_no_table_cuts_an_environment_id(catalog, tmp_path):
    out = CliRunner().invoke(main, ["list"], env={"COLUMNS": "80", "REBENCH_CONFIG_DIR": str(tmp_path)}).output
    first_cells = [line.split("│")[1].strip() for line in out.splitlines() if line.startswith("│")]
    for env_id in catalog.environments:
        assert env_id in first_cells, (env_id, first_cells)
    assert not any("…" in c for c in first_cells)
    assert max(len(line) for line in out.splitlines()) <= 80


def test_sessions_table_never_cuts_session_ids(toy_session, tmp_path):
    s = toy_session()
    s.score()
    out = CliRunner().invoke(main, ["sessions", "--sessions-dir", str(s.folder.parent)], env={"COLUMNS": "80"}).output
    assert s.id in out, out


def _cells(out: str) -> list[str]:
    """Every header and body cell of a rich table, each stripped."""
    return [c.strip() for line in out.splitlines() if line[:1] in "┃│" for c in line.strip("┃│").replace("┃", "│").split("│")]


def test_list_at_80_columns_cuts_no_header_or_cell(catalog, tmp_path):
    out = CliRunner().invoke(main, ["list"], env={"COLUMNS": "80", "REBENCH_CONFIG_DIR": str(tmp_path)}).output
    assert max(len(line) for line in out.splitlines()) <= 80, out
    assert "…" not in out, out
    cells = _cells(out)
    assert {"id", "better", "start → reference", "time"} <= set(cells), cells
    for env in catalog.environments.values():
        gpu = env.profile("gpu")
        assert f"gpu {gpu.start_score:.4g} → {gpu.reference_score:.4g}" in cells, (env.id, cells)
        assert env.manifest.score.direction.value in " ".join(cells)


def test_sessions_at_80_columns_cut_no_header_or_cell_and_v_has_the_rest(toy_session, tmp_path):
    s = toy_session()
    s.score()
    s.submit("done")
    run = ["sessions", "--sessions-dir", str(s.folder.parent)]
    out = CliRunner().invoke(main, run, env={"COLUMNS": "80"}).output
    assert max(len(line) for line in out.splitlines() if line[:1] in "┏┃┡│└") <= 80, out  # the title (a path) may wrap
    assert "…" not in out, out
    assert {"id", "status", "working", "final", s.id, "finished", "0:00:00"} <= set(_cells(out)), out
    wide = CliRunner().invoke(main, [*run, "-v"], env={"COLUMNS": "200"}).output
    assert {"env", "profile", "runtime", "scores", "normalized", "toy_score", "smoke"} <= set(_cells(wide)), wide
