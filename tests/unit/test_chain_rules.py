"""The rules that decide a score come from the hash-chained audit log, never from session.json:
an edit of session.json's recount count, timing, clock or anchors is found by `verify`, and the
finish, the clock and `compare` count by the chain's rules regardless."""

from __future__ import annotations

import json

import pytest

from rebench_tui.catalog import load_catalog
from rebench_tui.compare.imports import read_human_session
from rebench_tui.errors import RebenchError
from rebench_tui.runtime.local import LocalRuntime
from rebench_tui.session import Session
from rebench_tui.store import Store
from rebench_tui.trajectory.audit import chain_line, genesis_hash
from rebench_tui.trajectory.rules import RulesError, chain_rules, working_went_back
from rebench_tui.trajectory.verify import verify
from tests.conftest import KNOWN_IMAGES
from tests.unit.test_counting_rule import farm_env


def edit_meta(folder, **changes):
    path = folder / "session.json"
    meta = json.loads(path.read_text())
    for key, value in changes.items():
        owner = meta
        *parents, last = key.split("__")
        for p in parents:
            owner = owner[p]
        owner[last] = value
    path.write_text(json.dumps(meta))


def failing(report):
    return {f.check: f for f in report.findings if not f.ok}


def reopen(folder, envs, fake_clock):
    env = load_catalog(envs, KNOWN_IMAGES).get("toy_score")
    return Session.open(folder, env, LocalRuntime(), clock=fake_clock, store=Store(folder.parent))


def test_session_json_switching_the_recount_off_is_found_and_the_finish_still_recounts(toy_session, env_copy,
                                                                                       fake_clock):
    envs = farm_env(env_copy)
    s = toy_session(envs)
    notes = s.workspace / "solution" / "notes.txt"
    (s.workspace / "solution" / "answer.txt").write_text("noisy")
    for i in range(6):  # six attempts of one draw each: the luckiest draws 0.5
        notes.write_text("# comment\n" * (i + 1))
        s.score()
    s.close()
    edit_meta(s.folder, recount_runs=0, timing=False)  # the luckiest draw would count
    bad = failing(verify(s.folder))
    assert "rules" in bad and "recount_runs" in bad["rules"].detail and "timing" in bad["rules"].detail

    again = reopen(s.folder, envs, fake_clock)
    assert again.meta.recount_runs == 3 and again.meta.timing is True
    again.submit()
    assert [r.score for r in again.core.history if r.recount] == [1.0, 5.0, 2.0]
    assert again.meta.final_score == 2.0  # the recount's median, not the lucky 0.5
    again.close()
    assert verify(s.folder).ok, [str(f) for f in verify(s.folder).findings if not f.ok]


def test_handing_back_spent_working_time_is_found_and_the_clock_keeps_the_chains(toy_session, fake_clock, tmp_path):
    s = toy_session()
    fake_clock.advance(40)
    s.note("forty seconds in")
    s.pause()
    s.close()
    edit_meta(s.folder, clock__banked_s=0.471)
    bad = failing(verify(s.folder))
    assert "working time" in bad and "handed back" in bad["working time"].detail

    from tests.conftest import FIXTURE_ENVS
    again = reopen(s.folder, FIXTURE_ENVS, fake_clock)
    assert again.wclock.used() >= 40
    again.close()
    assert "working time" not in failing(verify(s.folder))


def test_edited_anchors_are_found_and_compare_normalizes_by_the_chains(toy_session, fake_clock):
    s = toy_session()
    (s.workspace / "solution" / "answer.txt").write_text("5")
    s.score()
    s.submit()
    s.close()
    before = read_human_session(s.folder)
    anchors = json.loads((s.folder / "session.json").read_text())["anchors"]
    edit_meta(s.folder, anchors={**anchors, "start": anchors["start"] + 100}, start_score=anchors["start"] + 100,
              direction="higher" if before.env.direction.value == "lower" else "lower")
    bad = failing(verify(s.folder))
    assert "rules" in bad and "anchors" in bad["rules"].detail and "direction" in bad["rules"].detail
    after = read_human_session(s.folder)
    assert after.env.anchors.start == before.env.anchors.start == anchors["start"]
    assert after.env.direction == before.env.direction


def _rows(facts_list, working=None):
    prev, out = genesis_hash(7), []
    for i, facts in enumerate(facts_list):
        row = {"runId": 7, "index": i + 1, "agentBranchNumber": 0, "calledAt": 1000 + i, "modifiedAt": 1000 + i,
               "usageTotalSeconds": i, "workingMs": (working or list(range(0, 1000 * len(facts_list), 1000)))[i],
               "content": {"type": "log", "content": ["x", facts]}}
        line, prev = chain_line(row, prev)
        out.append(json.loads(line))
    return out


START = {"event": "session_started", "env": "toy_score", "profile": "smoke", "time_limit_s": 3600,
         "score": {"direction": "lower", "aggregation": "min", "timing": True, "recount": 3},
         "anchors": {"start": 10.0, "reference": 1.0}}


def test_rules_read_from_the_start_row_and_a_change_row():
    rules = chain_rules(_rows([START, {"event": "rules_changed", "rules": {"anchors": {"start": 9, "reference": 2}}}]))
    assert (rules.direction, rules.aggregation, rules.timing, rules.recount_runs, rules.time_limit_s) == (
        "lower", "min", True, 3, 3600.0)
    assert (rules.start_score, rules.reference_score, rules.changed_at) == (9.0, 2.0, [2])


@pytest.mark.parametrize("bad,field", [({"time_limit_s": "eight hours"}, "time_limit_s"),
                                       ({"score": {"direction": "sideways", "aggregation": "min"}}, "direction"),
                                       ({"score": {"direction": "lower", "aggregation": "min", "recount": "3"}},
                                        "recount")])
def test_a_start_row_of_the_wrong_type_is_a_one_line_error(bad, field):
    with pytest.raises(RulesError) as exc:
        chain_rules(_rows([{**START, **bad}]))
    assert isinstance(exc.value, RebenchError) and field in exc.value.what and "\n" not in exc.value.what


def test_working_time_going_back_is_named_by_line():
    assert working_went_back(_rows([START, {"event": "a"}, {"event": "b"}], working=[0, 5000, 4000])) == (3, 4000, 5000)
