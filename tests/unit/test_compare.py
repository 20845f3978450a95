"""Comparing runs: importers on fixture files and real sessions, analysis against hand-computed values,
report files, and the `compare` command.

Known answers for tests/fixtures/runs are in tests/fixtures/runs/README.md. Normalization facts used
below (environments.md): fix_embedding lower, start 2.2, reference 0.26 (y = 2.2 - 1.94 n);
triton_cumsum lower, 1.56 -> 0.47 (y = 1.56 - 1.09 n); small_scaling_law higher, LAST, 0.24 -> 0.84.
"""

from __future__ import annotations

import base64
import dataclasses
import csv
import itertools
import json
import math
import shutil

import pytest
from click.testing import CliRunner

from rebench_tui.catalog import load_catalog
from rebench_tui.cli import main
from rebench_tui.compare import analysis as A
from rebench_tui.compare import report, terminal
from rebench_tui.compare.imports import (
    load_sources,
    read_human_session,
    read_inspect_log,
    read_path,
    read_vivaria,
    read_vivaria_bundle,
    score_value,
)
from rebench_tui.compare.runs import (
    CompareError,
    EnvResolver,
    Scoring,
    SourceKind,
    UnknownEnvironment,
    make_run,
    published_environments,
)
from rebench_tui.scoring import Aggregation, Direction
from rebench_tui.trajectory.export_inspect import export_inspect
from rebench_tui.trajectory.export_vivaria import export_vivaria
from tests.conftest import KNOWN_IMAGES, ROOT

from tests.modules import load_file

RUNS = ROOT / "tests" / "fixtures" / "runs"
NAN = math.nan
CLAUDE = "anthropic/claude-3-5-sonnet-20241022"


def pairs(run):
    return [(s.working_s, s.score) for s in run.scorings]


def same(a, b, tol=1e-9):
    """Lists of (time, score) pairs equal, NaN equal to NaN."""
    assert len(a) == len(b), (a, b)
    for (t1, s1), (t2, s2) in zip(a, b):
        assert t1 == pytest.approx(t2, abs=tol), (a, b)
        assert (math.isnan(s1) and math.isnan(s2)) or s1 == pytest.approx(s2), (a, b)


@pytest.fixture(scope="module")
def resolver():
    return EnvResolver()


def _make_inspect_module():
    return load_file("make_inspect_logs", RUNS / "make_inspect_logs.py")


def run_of(env, scorings, *, label="agent", human=False, working_s=None, rid="r"):
    return make_run(SourceKind.VIVARIA, rid, env, label, [Scoring(t, s) for t, s in scorings], finished=True,
                    working_s=working_s, human=human)


ENV = {e.env_id: e for e in published_environments()}


# -- environments --------------------------------------------------------------------------------
def test_published_table_has_the_seven_environments():
    assert sorted(ENV) == ["fix_embedding", "nanogpt_chat_rl", "optimize_llm_foundry", "restricted_mlm",
                           "rust_codecontests", "small_scaling_law", "triton_cumsum"]
    assert ENV["small_scaling_law"].aggregation is Aggregation.LAST
    assert ENV["small_scaling_law"].direction is Direction.HIGHER
    assert ENV["rust_codecontests"].family == "ai_rd_rust_codecontests_inference"
    assert (ENV["fix_embedding"].start, ENV["fix_embedding"].reference) == (2.2, 0.26)
    assert ENV["fix_embedding"].normalize(1.23) == pytest.approx(0.5)
    assert ENV["fix_embedding"].normalize(2.5) == 0.0  # worse than start: clipped
    assert math.isnan(ENV["fix_embedding"].normalize(NAN))


@pytest.mark.parametrize("name, env_id", [
    ("ai_rd_fix_embedding/main", "fix_embedding"), ("ai_rd_fix_embedding", "fix_embedding"),
    ("fix_embedding", "fix_embedding"), ("AI_RD_Fix_Embedding/Main", "fix_embedding"),
    ("ai_rd_optimize_llm_foundry/main", "optimize_llm_foundry"), ("ai_rd_triton_cumsum", "triton_cumsum"),
    ("ai_rd_small_scaling_law/main", "small_scaling_law"), ("restricted_mlm", "restricted_mlm"),
    ("ai_rd_nanogpt_chat_rl/main", "nanogpt_chat_rl"), ("ai_rd_rust_codecontests_inference/main", "rust_codecontests"),
    ("rust_codecontests", "rust_codecontests"),
])
def test_task_names_map_to_environments(resolver, name, env_id):
    assert resolver.env_id(name) == env_id


def test_unknown_task_names_are_a_clear_error(resolver):
    with pytest.raises(UnknownEnvironment) as exc:
        resolver.env_id("ai_rd_made_up/main")
    assert "ai_rd_made_up/main" in exc.value.what and "fix_embedding" in exc.value.fix


def test_agent_runs_of_metr_tasks_keep_the_published_anchors(catalog, fixture_catalog):
    """The catalog's gpu profile of triton_cumsum carries this project's own figures (H100, its own
    reference kernel: 1.6009 -> -0.6649); a METR agent run was scored in METR's setting, so it keeps
    METR's (1.56 -> 0.47)."""
    r = EnvResolver(catalog)
    tc = r.info("ai_rd_triton_cumsum/main")
    assert (tc.start, tc.reference, tc.anchors.kind) == (1.56, 0.47, "published")
    assert catalog.get("triton_cumsum").profile("gpu").start_score == 1.6009  # not what it normalizes by
    assert tc.normalize(0.5) == pytest.approx((1.56 - 0.5) / (1.56 - 0.47))
    assert tc.title == catalog.get("triton_cumsum").manifest.title  # the rule and title still come from the catalog
    assert "H100" in tc.anchors.summary and "METR" in tc.anchors.summary
    # an environment METR never published (the toy) is normalized by its catalog profile's anchors
    toy = EnvResolver(fixture_catalog).info("rebench_toy_score/main")  # only a smoke profile: that one
    assert (toy.env_id, toy.start, toy.reference, toy.origin, toy.anchors.kind) == ("toy_score", 10.0, 2.0, "catalog:smoke",
                                                                                   "measured")
    # without a catalog, the published table alone serves the seven environments
    assert EnvResolver(fixture_catalog).info("optimize_llm_foundry").origin == "published"


def test_a_log_that_carries_its_own_anchors_is_normalized_by_them(resolver, tmp_path):
    data = json.loads((RUNS / "vivaria" / "triton_cumsum_o1.json").read_text())
    data["metadata"] = {"start_score": 1.3304, "reference_score": -0.8408}
    path = tmp_path / "own.json"
    path.write_text(json.dumps(data))
    (run,) = read_vivaria(path, resolver)
    assert (run.env.start, run.env.reference, run.env.anchors.kind) == (1.3304, -0.8408, "log")
    assert A.normalized_final_at(run) == pytest.approx((1.3304 - 1.015) / (1.3304 + 0.8408))


def test_score_values():
    assert score_value(1) == 1.0 and score_value("0.5") == 0.5 and score_value({"score": 2}) == 2.0
    assert math.isinf(score_value("Infinity"))
    for bad in (None, "NaN", "oops", True, {"a": 1, "b": 2}, [1]):
        assert math.isnan(score_value(bad)), bad


# -- Inspect logs ---------------------------------------------------------------------------------
def test_inspect_eval_fixture(resolver):
    r1, r2 = read_inspect_log(RUNS / "inspect" / "fix_embedding_claude.eval", resolver)
    assert (r1.env_id, r1.label, r1.kind, r1.human, r1.finished, r1.working_s) == (
        "fix_embedding", CLAUDE, SourceKind.INSPECT, False, True, 28800.0)
    # metadata working_time is preferred over working_start (which here includes pauses)
    same(pairs(r1), [(600, 2.2), (1800, NAN), (3600, 1.23), (7200, 1.5), (10800, 0.745)])
    # no metadata: the event's working_start
    same(pairs(r2), [(1200, NAN), (5400, 2.5), (9000, 1.715)])
    assert r1.run_id != r2.run_id


def test_inspect_json_fixture_unfinished_with_int_sample_id(resolver):
    (run,) = read_path(RUNS / "inspect" / "triton_cumsum_claude.json", resolver)
    assert run.env_id == "triton_cumsum"  # from metadata task_family: the sample id is 7, the task "triton"
    assert run.finished is False  # status "started"
    same(pairs(run), [(300, 1.56), (900, NAN), (1500, 1.015), (2400, -0.62)])


def test_inspect_fixture_files_are_what_the_generator_writes(tmp_path, resolver):
    mod = _make_inspect_module()
    fresh = mod.write_logs(tmp_path)
    for path in fresh:
        committed = RUNS / "inspect" / path.name
        a, b = read_path(path, resolver), read_path(committed, resolver)
        assert len(a) == len(b)
        for x, y in zip(a, b):
            same(pairs(x), pairs(y))
            assert (x.env_id, x.label, x.finished, x.working_s) == (y.env_id, y.label, y.finished, y.working_s)


def test_inspect_human_log_reads_the_store_scorings(tmp_path, resolver):
    from inspect_ai.log import EvalConfig, EvalDataset, EvalLog, EvalSample, EvalSpec, write_eval_log
    from inspect_ai.scorer import Score

    store = {"HumanAgentState:scorings": [{"time": 120.0, "scores": [Score(value=1.5).model_dump()]},
                                          {"time": 900.5, "scores": [Score(value="NaN").model_dump()]}]}
    log = EvalLog(eval=EvalSpec(created="2026-01-01T00:00:00+00:00", task="ai_rd_triton_cumsum", dataset=EvalDataset(),
                                model="none/none", config=EvalConfig()),
                  samples=[EvalSample(id="ai_rd_triton_cumsum/main", epoch=1, input="", target="", store=store)],
                  status="success")
    path = tmp_path / "human.eval"
    write_eval_log(log, str(path))
    (run,) = read_inspect_log(path, resolver)
    assert run.human and run.group == "human" and run.finished
    same(pairs(run), [(120.0, 1.5), (900.5, NAN)])


def test_inspect_missing_file_is_a_compare_error(tmp_path, resolver):
    (tmp_path / "broken.eval").write_bytes(b"not a zip")
    with pytest.raises(CompareError):
        read_inspect_log(tmp_path / "broken.eval", resolver)


# -- Vivaria JSON ---------------------------------------------------------------------------------
def test_vivaria_trace_entries_with_pauses(resolver):
    (run,) = read_vivaria(RUNS / "vivaria" / "fix_embedding_o1.json", resolver)
    # calledAt - startedAt - pauses: 20 min; 50 min - 10 min pause; 70 min - 10 min
    same(pairs(run), [(1200, 1.715), (2400, NAN), (3600, 0.745)])
    assert (run.label, run.run_id, run.finished, run.working_s) == ("openai/o1-preview", "101", True, 3700.0)


def test_vivaria_score_log_rows(resolver):
    (run,) = read_vivaria(RUNS / "vivaria" / "triton_cumsum_o1.json", resolver)
    same(pairs(run), [(600, 1.56), (1200, 1.015), (1800, NAN), (2400, 1.2)])
    assert run.finished and run.env_id == "triton_cumsum"


def test_vivaria_list_of_runs_marks_interactive_runs_human(resolver):
    runs = read_vivaria(RUNS / "vivaria" / "humans.json", resolver)
    assert [r.run_id for r in runs] == ["901", "902", "903", "904"]
    assert all(r.human and r.group == "human" and r.working_s == 28800 for r in runs)
    same(pairs(runs[0]), [(3600, 2.2), (10800, 1.23), (21600, 0.26), (28000, 0.4)])


def test_bare_trace_entries_need_a_task(resolver):
    path = RUNS / "bare" / "fix_embedding_trace.jsonl"
    with pytest.raises(CompareError) as exc:
        read_vivaria(path, resolver)
    assert "--task" in exc.value.fix
    (run,) = read_vivaria(path, resolver, task="fix_embedding", label="my-agent")
    # usageTotalSeconds; workingMs (ms precision) wins where present; Infinity is an invalid scoring
    same(pairs(run), [(100, 2.0), (500, math.inf), (900.5, 1.23)])
    assert run.label == "my-agent" and run.run_id == "202" and not run.finished
    assert A.best_so_far(run).values == (2.0, 2.0, 1.23)


def test_vivaria_bundle_folder(tmp_path, resolver):
    b = tmp_path / "bundle"
    b.mkdir()
    (b / "run.json").write_text(json.dumps({"id": 55, "taskId": "ai_rd_fix_embedding/main", "startedAt": 0,
                                            "completedAt": None, "isInteractive": True, "usage": {"total_seconds": 4000}}))
    (b / "trace_entries.jsonl").write_text("\n".join(json.dumps(r) for r in [
        {"runId": 55, "index": 1, "calledAt": 0, "content": {"type": "log", "content": []}},
        {"runId": 55, "index": 2, "calledAt": 3_000_000, "content": {"type": "intermediateScore", "score": 1.23,
                                                                     "message": {}, "details": {}}}]))
    (b / "run_pauses.jsonl").write_text(json.dumps({"start": 1_000_000, "end": 1_500_000, "reason": "pauseHook"}))
    run = read_vivaria_bundle(b, resolver)
    same(pairs(run), [(2500, 1.23)])  # trace: calledAt minus the 500 s pause
    assert run.human and not run.finished and run.working_s == 4000 and run.run_id == "55"
    (b / "score_log.jsonl").write_text(json.dumps({"elapsedTime": 2_500_250, "score": 1.23}))
    same(pairs(read_vivaria_bundle(b, resolver)), [(2500.25, 1.23)])  # the score log wins: ms precision
    assert [r.run_id for r in load_sources([tmp_path], resolver).runs] == ["55"]


def test_unknown_task_named_is_an_error_found_by_scanning_is_a_warning(resolver):
    with pytest.raises(UnknownEnvironment):
        read_path(RUNS / "bad" / "unknown_task.json", resolver)
    loaded = load_sources([RUNS], resolver)
    assert len(loaded.runs) == 13  # 10 in inspect/ and vivaria/, 3 in metr_agents/
    assert len(loaded.warnings) == 2
    assert any("unknown_task.json" in w and "ai_rd_made_up" in w for w in loaded.warnings)
    assert any("fix_embedding_trace.jsonl" in w and "taskId" in w for w in loaded.warnings)
    with pytest.raises(CompareError):
        load_sources(["no/such/file.json"], resolver)


# -- human sessions ---------------------------------------------------------------------------------
def _answer(s, text):
    (s.workspace / "solution" / "answer.txt").write_text(text)


@pytest.fixture
def scored_session(toy_session, fake_clock):
    """A toy session (lower is better, start 10, reference 2): scores 6 @600 s, NaN @900 s (after a
    1000 s pause), 4 @1000 s, then a submission that scores 4 again @1000 s."""
    s = toy_session()
    fake_clock.advance(600)
    _answer(s, "6")
    s.score()
    s.pause()
    fake_clock.advance(1000)
    s.resume()
    fake_clock.advance(300)
    _answer(s, "nan")
    s.score()
    fake_clock.advance(100)
    _answer(s, "4")
    s.score()
    s.submit("done")
    return s


def test_human_session_folder(scored_session):
    run = read_human_session(scored_session.folder)
    same(pairs(run), [(600, 6.0), (900, NAN), (1000, 4.0), (1000, 4.0)], tol=5e-3)  # a scoring's row comes 1 ms after its start row when the clock stands still
    assert run.human and run.group == "human" and run.finished and run.kind is SourceKind.HUMAN_SESSION
    assert (run.env_id, run.env.start, run.env.reference, run.env.origin) == ("toy_score", 10.0, 2.0, "session:smoke")
    assert run.env.aggregation is Aggregation.MIN and run.run_id == scored_session.id
    assert A.normalized_final_at(run) == pytest.approx(0.75)
    assert A.normalized_curve(run).values == pytest.approx((0.5, 0.5, 0.75, 0.75))
    assert any("smoke" in n for n in run.notes)


def test_human_session_without_working_fields_uses_called_at_minus_pauses(scored_session, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(scored_session.folder, copy, ignore=shutil.ignore_patterns("workspace", "lock"))
    rows = [json.loads(line) for line in (copy / "audit.jsonl").read_text().splitlines()]
    for r in rows:
        r.pop("workingMs", None)
        r["usageTotalSeconds"] = None
    (copy / "audit.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    same(pairs(read_human_session(copy)), pairs(read_human_session(scored_session.folder)), tol=5e-3)


def test_human_session_unfinished_and_found_by_id(toy_session, fake_clock, resolver):
    s = toy_session()
    fake_clock.advance(60)
    s.score()
    loaded = load_sources([s.id[:-2]], resolver, sessions_dir=s.folder.parent)
    (run,) = loaded.runs
    assert not run.finished and pairs(run) == [(60.0, 10.0)]
    assert A.normalized_final_at(run) == 0.0


def test_our_own_exports_compare_like_the_session(scored_session, tmp_path, resolver):
    direct = read_human_session(scored_session.folder)
    bundle = read_vivaria_bundle(export_vivaria(scored_session.folder, tmp_path / "bundle"), resolver)
    same(pairs(bundle), pairs(direct), tol=5e-3)
    assert bundle.human and bundle.env.start == 10.0 and bundle.env_id == "toy_score"  # facts from run.json metadata
    log_path = export_inspect(scored_session.folder, tmp_path / "s.eval", "eval")
    # toy_score is not a RE-Bench environment: the reader is told which it is
    (insp,) = read_inspect_log(log_path, EnvResolver(load_catalog(ROOT / "tests" / "fixtures" / "environments", KNOWN_IMAGES)))
    assert insp.human
    same(pairs(insp), pairs(direct), tol=5e-3)
    # every source keeps the attempt fingerprints: the re-score (the submission's scoring of the
    # unchanged 4) joins its attempt in all three
    fps = direct.fingerprints
    assert all(fps) and fps[2] == fps[3] and len(set(fps)) == 3
    assert bundle.fingerprints == fps and insp.fingerprints == fps


# -- analysis ---------------------------------------------------------------------------------------
def test_best_so_far_min_rule_and_step_lookup():
    run = run_of(ENV["fix_embedding"], [(600, 2.2), (1800, NAN), (3600, 1.23), (7200, 1.5), (10800, 0.745)],
                 working_s=28800)
    raw = A.best_so_far(run)
    assert raw.values == (2.2, 2.2, 1.23, 1.23, 0.745)
    norm = A.normalized_curve(run)
    assert norm.values == pytest.approx((0.0, 0.0, 0.5, 0.5, 0.75))
    assert math.isnan(norm.at(599)) and norm.at(600) == 0.0 and norm.at(3599) == 0.0
    assert norm.at(3600) == pytest.approx(0.5) and norm.at(10_000) == pytest.approx(0.5) and norm.at(1e9) == pytest.approx(0.75)
    assert A.final_at(run, 7200) == 1.23 and A.final_at(run, 8 * 3600) == 0.745 and A.final_at(run) == 0.745
    assert A.normalized_final_at(run, 2 * 3600) == pytest.approx(0.5)
    assert math.isnan(A.final_at(run, 599)) and A.final_value(run, 599) == 0.0


def test_best_so_far_counts_re_scores_with_their_median():
    """Scorings of the same files (one fingerprint) are one attempt: its median counts, so a lucky
    re-score does not lower the curve to itself, and a later unlucky one can raise it again."""
    env = ENV["triton_cumsum"]
    run = make_run(SourceKind.HUMAN_SESSION, "h", env, "human",
                   [Scoring(600, -1.462, "a"), Scoring(700, -1.663, "a"), Scoring(800, -1.628, "a"),
                    Scoring(900, -1.5, "b"), Scoring(1000, NAN, "b")], finished=True, human=True)
    robust = dataclasses.replace(run, counted_by=A.ROBUST)
    raw = A.best_so_far(robust)
    assert raw.values == pytest.approx((-1.462, -1.5625, -1.628, -1.628, -1.628))
    assert A.final_at(robust) == -1.628 and A.final_at(robust, 750) == pytest.approx(-1.5625)
    # by the paper's rule (a comparison's default): the best single scoring
    assert A.best_so_far(run).values == (-1.462, -1.663, -1.663, -1.663, -1.663)
    assert A.final_by(run, A.PAPER) == -1.663 and A.final_by(run, A.ROBUST) == -1.628
    # the same scorings without fingerprints (an agent run): the robust rule cannot count them
    plain = run_of(env, [(600, -1.462), (700, -1.663), (800, -1.628), (900, -1.5), (1000, NAN)])
    assert A.final_at(plain) == -1.663 and A.final_by(plain, A.ROBUST) is None


def test_nan_until_the_first_valid_score_and_clipping():
    run = run_of(ENV["fix_embedding"], [(1200, NAN), (5400, 2.5), (9000, 1.715)])
    norm = A.normalized_curve(run)
    assert math.isnan(norm.values[0])
    assert norm.values[1:] == pytest.approx((0.0, 0.25))  # 2.5 is worse than the start: 0, not negative
    empty = run_of(ENV["fix_embedding"], [(100, NAN)])
    assert math.isnan(A.final_at(empty)) and A.final_value(empty) == 0.0
    nothing = run_of(ENV["fix_embedding"], [])
    assert math.isnan(A.final_at(nothing)) and A.best_so_far(nothing).times == ()


def test_last_rule_environment_keeps_the_last_valid_score():
    run = run_of(ENV["small_scaling_law"], [(600, 0.54), (1800, 0.84), (3600, NAN), (5400, 0.39)])
    assert A.best_so_far(run).values == (0.54, 0.84, 0.84, 0.39)
    assert A.normalized_curve(run).values == pytest.approx((0.5, 1.0, 1.0, 0.25))
    assert A.final_at(run) == 0.39  # not the best (0.84): the last valid counts
    assert A.final_at(run, 3600) == 0.84 and math.isnan(A.final_at(run, 300))


def test_scoring_rate_per_working_hour():
    a = run_of(ENV["fix_embedding"], [(600, 2.2), (1800, NAN), (3600, 1.23), (7200, 1.5), (10800, 0.745)], working_s=28800)
    b = run_of(ENV["fix_embedding"], [(1200, NAN), (5400, 2.5), (9000, 1.715)], working_s=14400)
    assert A.scoring_rate(a) == pytest.approx(5 / 8)
    assert A.scoring_rate(a, 7200) == pytest.approx(4 / 2)  # 600, 1800, 3600, 7200 within 2 h
    assert A.scoring_rate([a, b]) == pytest.approx(8 / 12)  # pooled: 8 scorings in 12 working hours
    no_total = run_of(ENV["fix_embedding"], [(1800, 2.0), (3600, 1.0)])  # duration: its last scoring
    assert A.scoring_rate(no_total) == pytest.approx(2.0)
    assert math.isnan(A.scoring_rate([]))


def test_expected_max_closed_form_by_hand_and_by_enumeration():
    vals = [0.2, 0.5, 0.9]
    by_hand = 0.9 * (1 - (2 / 3) ** 2) + 0.5 * ((2 / 3) ** 2 - (1 / 3) ** 2) + 0.2 * (1 / 3) ** 2
    assert by_hand == pytest.approx(6.2 / 9)
    assert A.expected_max(vals, 2) == pytest.approx(by_hand)
    assert A.expected_max([0.9, 0.2, 0.5], 2) == pytest.approx(by_hand)  # order does not matter
    assert A.expected_max(vals, 1) == pytest.approx(1.6 / 3)  # k = 1: the mean
    for values in (vals, [0.5, 0.5, 1.0], [0.0, 2.0, 0.3, 0.3]):
        for k in range(1, 5):
            draws = list(itertools.product(values, repeat=k))
            assert A.expected_max(values, k) == pytest.approx(sum(max(d) for d in draws) / len(draws))
    assert math.isnan(A.expected_max([], 3))
    with pytest.raises(ValueError):
        A.expected_max([NAN, 1.0], 1)
    with pytest.raises(ValueError):
        A.expected_max(vals, 0)


def test_score_at_k_averages_environments_and_has_a_seeded_band():
    fe, tc = ENV["fix_embedding"], ENV["triton_cumsum"]
    # normalized finals 0.2, 0.5, 0.9 on fix_embedding (y = 2.2 - 1.94 n), one run of 1.0 on triton
    runs = [run_of(fe, [(60, 2.2 - 1.94 * n)], rid=str(n)) for n in (0.2, 0.5, 0.9)]
    runs.append(run_of(tc, [(60, 0.47)], rid="t"))
    runs.append(run_of(fe, [(60, NAN)], rid="invalid", label="other"))  # another group: not mixed in
    sk = A.score_at_k([r for r in runs if r.label == "agent"], [1, 2, 3], n_boot=300, seed=7)
    assert sk.expected[1] == pytest.approx((6.2 / 9 + 1.0) / 2)
    assert sk.expected[0] == pytest.approx((1.6 / 3 + 1.0) / 2)
    assert sk.per_env["triton_cumsum"] == pytest.approx((1.0, 1.0, 1.0))
    assert sk.n_runs == {"fix_embedding": 3, "triton_cumsum": 1}
    for lo, e, hi in zip(sk.low, sk.expected, sk.high):
        assert (0.2 + 1.0) / 2 - 1e-9 <= lo <= e <= hi <= (0.9 + 1.0) / 2 + 1e-9
    again = A.score_at_k([r for r in runs if r.label == "agent"], [1, 2, 3], n_boot=300, seed=7)
    assert (again.low, again.high) == (sk.low, sk.high)  # seeded: reproducible
    other = A.score_at_k([runs[-1]], [1, 2])
    assert other.expected == (0.0, 0.0)  # a run with no valid score counts as the start (0)
    assert other.low == other.high == (0.0, 0.0)  # one value: no spread


def test_quantile_interpolates():
    assert A.quantile([1, 2, 3, 4], 0.5) == 2.5
    assert A.quantile([1, 2, 3, 4], 0.0) == 1 and A.quantile([1, 2, 3, 4], 1.0) == 4
    assert A.quantile([5], 0.3) == 5 and math.isnan(A.quantile([], 0.5))


@pytest.fixture(scope="module")
def fixture_runs(resolver):
    return load_sources([RUNS / "inspect", RUNS / "vivaria"], resolver).runs


@pytest.fixture(scope="module")
def comparison(fixture_runs):
    return A.compare(fixture_runs, budgets=(2 * 3600, 8 * 3600), n_boot=200, seed=1)


def test_compare_on_the_fixtures(comparison):
    c = comparison
    assert c.groups == ["human", CLAUDE, "openai/o1-preview"]  # humans first
    assert c.envs == ["fix_embedding", "small_scaling_law", "triton_cumsum"]
    assert c.ks == (1, 2) and c.budget == 8 * 3600
    h = c.stats[("fix_embedding", "human")]
    # humans 901 (0 at 2 h, 1.0 at 8 h) and 902 (0.25 at 2 h, 0.5 at 8 h)
    assert h.mean_normalized[7200] == pytest.approx(0.125) and h.mean_normalized[28800] == pytest.approx(0.75)
    assert h.mean_final[28800] == pytest.approx((0.26 + 1.23) / 2) and h.best_normalized[28800] == pytest.approx(1.0)
    assert h.rate_per_hour == pytest.approx(6 / 16)
    # claude on fix_embedding: 0.75 and 0.25 at 8 h
    assert c.stats[("fix_embedding", CLAUDE)].mean_normalized[28800] == pytest.approx(0.5)
    # over environments, humans at 8 h: fix 0.75, triton 2.0 (-0.62), scaling law 0.75 (last: 0.69)
    assert c.stats[(A.ALL, "human")].mean_normalized[28800] == pytest.approx((0.75 + 2.0 + 0.75) / 3)
    sk = c.score_at_k[("human", 28800)]
    assert sk.at(1) == pytest.approx((0.75 + 2.0 + 0.75) / 3)
    assert sk.at(2) == pytest.approx((A.expected_max([1.0, 0.5], 2) + 2.0 + 0.75) / 3)
    # o1's scaling-law run ends on its last valid score (0.25), not its best (1.0)
    assert c.stats[("small_scaling_law", "openai/o1-preview")].mean_normalized[28800] == pytest.approx(0.25)


def test_group_curves_by_hand(comparison):
    xs, ys = comparison.group_curve(CLAUDE, "fix_embedding", points=9)
    assert xs == pytest.approx([i for i in range(9)])  # 0..8 h: the longest claude run is 8 h
    # run 1: 0 from 600 s, 0.5 from 1 h, 0.75 from 3 h; run 2: NaN -> counted 0, 0 from 1.5 h, 0.25 from 2.5 h
    assert ys == pytest.approx([0.0, 0.25, 0.25, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5])
    xs, ys = comparison.group_curve("human", None, points=9)
    assert ys[-1] == pytest.approx((0.75 + 2.0 + 0.75) / 3)


# -- reports ----------------------------------------------------------------------------------------
def test_csv_files(comparison, tmp_path):
    paths = report.write_csv(comparison, tmp_path)
    assert [p.name for p in paths] == ["curves.csv", "score_at_k.csv", "summary.csv", "runs.csv", "anchors.csv"]
    with open(tmp_path / "curves.csv", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert tuple(rows[0]) == report.CURVES_COLUMNS
    assert len(rows) == sum(len(r.scorings) for r in comparison.runs)
    o1_sl = [r for r in rows if r["run_id"] == "103"]
    assert [float(r["normalized_best"]) for r in o1_sl] == pytest.approx([0.5, 1.0, 1.0, 0.25])
    assert o1_sl[2]["score"] == "NaN" and o1_sl[0]["working_h"] == str(600 / 3600)
    with open(tmp_path / "score_at_k.csv", newline="") as fh:
        sk = list(csv.DictReader(fh))
    assert tuple(sk[0]) == report.SCORE_AT_K_COLUMNS
    row = next(r for r in sk if r["group"] == "human" and r["env_id"] == "ALL" and r["k"] == "1" and r["budget_s"] == "28800.0")
    assert float(row["expected"]) == pytest.approx((0.75 + 2.0 + 0.75) / 3)
    assert float(row["low"]) <= float(row["expected"]) <= float(row["high"])
    with open(tmp_path / "summary.csv", newline="") as fh:
        assert tuple(next(csv.reader(fh))) == report.SUMMARY_COLUMNS
    with open(tmp_path / "runs.csv", newline="") as fh:
        assert len(list(csv.DictReader(fh))) == len(comparison.runs)


def test_png_opens_and_has_the_expected_size(comparison, tmp_path):
    import matplotlib.image as mpimg

    path = report.write_png(comparison, tmp_path / "c.png")
    img = mpimg.imread(path)
    w, h = report.png_size(comparison)
    assert (w, h) == (1500, 760)  # 5 panels (3 environments, all, score@k) in a 3 x 2 grid
    assert img.shape[:2] == (h, w)
    assert path.stat().st_size > 30_000
    assert img[..., :3].std() > 0.05  # drawn, not blank


def test_html_is_self_contained(comparison, tmp_path):
    path = report.write_html(comparison, tmp_path / "c.html", warnings=["skipped x.json: <odd>"])
    text = path.read_text()
    start = text.index("data:image/png;base64,") + len("data:image/png;base64,")
    png = base64.b64decode(text[start:text.index("'", start)])
    assert png.startswith(b"\x89PNG")
    for needle in ("fix_embedding", "score@k", "openai/o1-preview", "&lt;odd&gt;", "<table>"):
        assert needle in text
    assert "http://" not in text and "https://" not in text and "<script" not in text


def test_terminal_chart_and_tables(comparison):
    chart = terminal.render_chart(comparison, "fix_embedding", width=80, height=18)
    assert "fix_embedding" in chart and "working hours" in chart
    cols, rows = terminal.summary_rows(comparison, "small_scaling_law")
    assert cols[:3] == ["group", "runs", "scorings/h"] and "norm@2h" in cols and "score@2" in cols
    assert [r[0] for r in rows] == ["human", "openai/o1-preview"]
    assert rows[1][cols.index("norm@8h")] == "0.25"
    assert terminal.k_columns(tuple(range(1, 33)), 6) == [1, 2, 4, 8, 16, 32]
    assert terminal.fmt_budget(7200) == "2h" and terminal.fmt_budget(5400) == "1.5h" and terminal.fmt_budget(None) == "all"


# -- the command --------------------------------------------------------------------------------------
def _invoke(args):
    result = CliRunner().invoke(main, ["compare", *args], catch_exceptions=False)
    return result


def test_cli_compare_writes_every_report(tmp_path):
    out = tmp_path / "report"
    r = _invoke([str(RUNS / "inspect"), str(RUNS / "vivaria"), "--no-humans", "--budget", "2h", "--budget", "8h",
                 "--bootstrap", "50", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in out.iterdir()) == ["anchors.csv", "compare.html", "compare.png", "curves.csv", "runs.csv",
                                                     "score_at_k.csv", "summary.csv"]
    assert "fix_embedding" in r.output and "score@k" in r.output and "norm@2h" in r.output


def test_cli_compare_env_filter_and_csv_only(tmp_path):
    r = _invoke([str(RUNS / "vivaria"), "--env", "ai_rd_small_scaling_law/main", "--bootstrap", "20", "--csv",
                 "-o", str(tmp_path), "--no-humans"])
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["anchors.csv", "curves.csv", "runs.csv", "score_at_k.csv", "summary.csv"]
    with open(tmp_path / "runs.csv", newline="") as fh:
        assert {row["env_id"] for row in csv.DictReader(fh)} == {"small_scaling_law"}


def test_cli_compare_errors_are_readable(tmp_path):
    r = _invoke([str(RUNS / "bare" / "fix_embedding_trace.jsonl"), "--no-humans"])
    assert r.exit_code == 1 and "--task" in r.output
    r = _invoke([str(RUNS / "bare" / "fix_embedding_trace.jsonl"), "--no-humans", "--task", "ai_rd_fix_embedding/main",
                 "--bootstrap", "10"])
    assert r.exit_code == 0, r.output
    r = _invoke([str(RUNS / "vivaria"), "--no-humans", "--env", "nanogpt_chat_rl"])
    assert r.exit_code == 1 and "no runs to compare" in r.output
    r = _invoke([str(RUNS / "vivaria"), "--no-humans", "--budget", "soon"])
    assert r.exit_code == 2 and "budget" in r.output


def test_cli_compare_adds_the_sessions_folder_humans(scored_session, tmp_path):
    sessions = scored_session.folder.parent
    r = _invoke(["--sessions-dir", str(sessions), "--bootstrap", "10"])
    assert r.exit_code == 0, r.output
    assert "toy_score" in r.output and "added 1 human session" in r.output
    r = _invoke([str(RUNS / "vivaria"), "--sessions-dir", str(sessions), "--no-humans", "--bootstrap", "10"])
    assert r.exit_code == 0 and "toy_score" not in r.output


def test_cli_compare_without_tui_does_not_load_textual():
    import subprocess
    import sys

    code = ("import sys; from click.testing import CliRunner; from rebench_tui.cli import main; "
            f"r = CliRunner().invoke(main, ['compare', {str(RUNS / 'vivaria')!r}, '--no-humans', '--bootstrap', '5']); "
            "print(r.exit_code, 'textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout.split()
    assert out[-2:] == ["0", "False"], out
