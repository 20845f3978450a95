"""`rebench-tui list` shows all seven RE-Bench environments with their profiles and measured figures."""

from __future__ import annotations

from click.testing import CliRunner

from rebench_tui.cli import main

SEVEN = ("fix_embedding", "optimize_llm_foundry", "triton_cumsum", "small_scaling_law", "restricted_mlm",
         "nanogpt_chat_rl", "rust_codecontests")


def test_all_seven_environments_are_listed_with_gpu_and_smoke_figures(catalog):
    result = CliRunner().invoke(main, ["list", "-v"], env={"COLUMNS": "220"})
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
