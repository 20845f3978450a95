"""A comparison never averages a CPU smoke session with GPU-setting runs in one group unless asked:
human sessions of another profile are a group of their own where the environment also has runs of
another setting; a smoke-only comparison is unchanged."""

from __future__ import annotations

from dataclasses import replace

from rebench_tui.compare.analysis import compare
from rebench_tui.compare.command import separate_settings
from tests.unit.test_compare import ENV, run_of

TC = ENV["triton_cumsum"]


def _human(profile: str, rid: str, score: float):
    return run_of(replace(TC, origin=f"session:{profile}"), [(600, score)], label="human", human=True, rid=rid)


def test_a_smoke_session_is_a_group_of_its_own_beside_gpu_runs():
    runs = [_human("gpu", "h-gpu", 1.0), _human("smoke", "h-smoke", 0.3), run_of(TC, [(600, 1.2)], label="claude", rid="a1")]
    kept, apart = separate_settings(runs)
    assert [r.run_id for r in apart] == ["h-smoke"]
    assert [r.group for r in kept] == ["human", "human (smoke)", "claude"]
    c = compare(kept, budgets=[8 * 3600], n_boot=10)
    assert set(c.groups) == {"human", "human (smoke)", "claude"}
    assert [r.run_id for r in c.runs_of("triton_cumsum", "human")] == ["h-gpu"]  # the gpu group's mean has no smoke run


def test_without_another_setting_nothing_changes():
    runs = [_human("smoke", "s1", 0.3), _human("smoke", "s2", 0.4)]
    kept, apart = separate_settings(runs)
    assert apart == [] and [r.group for r in kept] == ["human", "human"]
