"""restricted_mlm's scorer against hostile solutions, in a real container (smoke profile).

Each model.py in environments/restricted_mlm/reference/hostile/ tries one way to a score it did
not earn (the starting model sits next to it as solution/_start.py). The scorer runs the
participant's code only in a process of its own that never receives held-out data, checks the
graph that process hands in and runs it itself; so each case must end as NaN with a reason, or
with a score no better than the honest starting model's. Most compute the honest logits after
their trick and must score exactly the honest score: the scores are deterministic for one set of
prepared assets (the validation seed is drawn at prepare time).
"""

from __future__ import annotations

import math

import pytest

from rebench_tui.scoring import Direction
from tests.conftest import ROOT
from tests.hostile import (arena_fixture, assert_no_fake_best, check_aftermath, participant_processes, protected_listing,
                           scored_once)

pytestmark = [pytest.mark.docker]

ENV = ROOT / "environments" / "restricted_mlm"
HOSTILE = ENV / "reference" / "hostile"
arena = arena_fixture("restricted_mlm")
# The start score depends a little on the validation seed drawn at prepare time (standard
# deviation 0.0065 over 40 seeds, see environment.toml), and on the CPU's float rounding.
START_TOLERANCE = 0.03


@pytest.fixture(scope="module")
def honest(arena):
    arena.reset()
    record = arena.score()
    assert math.isfinite(record.score), record
    print(f"\nhonest starting solution: {record.score:.6f} {record.message}")
    return record.score


@scored_once
def run_hostile(arena, name: str):
    arena.reset()
    arena.write({"solution/model.py": (HOSTILE / f"{name}.py").read_text(),
                 "solution/_start.py": (ENV / "solution" / "model.py").read_text()})
    before = protected_listing(arena)
    record = arena.score()
    print(f"\n{name}: {record.score} {record.message}")
    check_aftermath(arena, before)
    assert record.details.get("scorer_matches_catalog") is True, record.details
    assert record.details.get("participant_uid") == 1000, record.details
    return record


def test_starting_solution_scores_its_start_score(arena, honest):
    assert abs(honest - arena.env.profile("smoke").start_score) <= START_TOLERANCE, honest
    record = arena.score()  # deterministic: the same assets give the same score
    assert record.score == honest, record
    assert record.details["masked_tokens"] == 8 * 8 * 19 and record.details["participant_exit"] is not None


@pytest.mark.parametrize("name, key, text", [
    ("fake_result_exit", "error", "ended (exit status 0) without handing in its graph"),
    ("patch_enforcer", "disallowed_operation", "aten.exp"),
    ("forbidden_softmax", "disallowed_operation", "softmax"),
    ("forbidden_division", "disallowed_operation", "aten.div"),
    ("stateful_graph", "error", "writes into its arguments"),
    ("cast_in_scatter", "disallowed_operation", "conversion from float32 to int64"),
])
def test_hostile_solution_ends_as_nan_with_a_reason(arena, honest, name, key, text):
    record = run_hostile(arena, name)
    assert math.isnan(record.score), (name, record.score, record.message)
    assert text in record.message.get(key, ""), (name, record.message)


@pytest.mark.parametrize("name", ["result_fds", "frame_walk", "rename_ops", "read_protected", "daemon", "forged_status",
                                  "memoize"])
def test_hostile_solution_scores_no_better_than_honest(arena, honest, name):
    record = run_hostile(arena, name)
    assert_no_fake_best(record, honest, Direction.LOWER)
    # each hands in the honest model (plus nothing that changes its logits) after its trick
    assert record.score == honest, (name, record.score, record.message)
    out = record.details.get("participant_stdout_tail", "")
    if name == "frame_walk":
        assert "suspects: []" in out, out  # the participant's process never held any held-out data
    if name == "read_protected":
        assert "read " not in out and "wrote " not in out, out
        assert "/protected/assets/val.bin: Permission denied" in out, out
        assert "/protected/score.py: Permission denied" in out, out
    if name == "daemon":
        assert "kill scorer: Operation not permitted" in out, out
        assert participant_processes(arena) == []
    if name == "forged_status":
        assert "\x1erebench-exec" in out  # kept as the participant's output, nothing more


def test_fake_result_lines_are_kept_as_the_participants_output(arena, honest):
    record = run_hostile(arena, "fake_result_exit")
    assert '"score": -5.0' in record.details.get("participant_stdout_tail", "")
    assert record.details["participant_exit"] == 0
