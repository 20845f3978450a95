"""METR's published per-run results (all_runs.jsonl) read as agent runs, on the six real rows kept
in tests/fixtures/metr/metr-all-runs-sample.jsonl (copied unchanged from METR's published file),
and put beside human sessions on one scale.

Published anchors used below: fix_embedding 2.2 -> 0.26, optimize_llm_foundry 5.6 -> 4.54,
rust_codecontests 0 -> 0.13 (environments/published.toml).
"""

from __future__ import annotations

import json
import math
import shutil

import pytest
from click.testing import CliRunner

from rebench_tui.cli import main
from rebench_tui.compare import analysis as A
from rebench_tui.compare import paper_view, report, terminal
from rebench_tui.compare.command import gather
from rebench_tui.compare.imports import load_sources
from rebench_tui.compare.published_runs import is_published_file, read_published
from rebench_tui.compare.runs import CompareError, EnvResolver, SourceKind
from rebench_tui.catalog.anchors import anchors_gpu, gpu_differs
from rebench_tui.catalog.anchors import Anchors
from tests.conftest import ROOT

SAMPLE = ROOT / "tests" / "fixtures" / "metr" / "metr-all-runs-sample.jsonl"
SONNET, OPUS = "Claude 3.5 Sonnet (New)", "Claude 3 Opus"
# score of each sample row, as published (normalized on METR's published anchors)
SCORES = {"mp4-server_205615": 1.22771e-05, "mp4-server_205664": 0.0107515225, "mp4-server_164668": 0.5882948931,
          "vivaria-ai-rd-2_1006068019": 0.4777070063, "vivaria-ai-rd-2_1012772411": 0.6687898085,
          "vivaria-ai-rd-2_1062652615": 0.3821656044}


@pytest.fixture(scope="module")
def resolver():
    return EnvResolver()


@pytest.fixture
def published(tmp_path):
    """The sample as METR names it, in a folder, with two rows of another suite and one run that
    died of an error other than its budget appended."""
    folder = tmp_path / "metr"
    folder.mkdir()
    rows = [json.loads(x) for x in SAMPLE.read_text().splitlines()]
    other = dict(rows[0], run_id="hcast_1", task_id="local_research/main", task_family="local_research")
    crashed = dict(rows[3], run_id="crashed_1", fatal_error_from="serverError")
    text = "".join(json.dumps(r) + "\n" for r in rows + [other, dict(other, run_id="hcast_2"), crashed])
    (folder / "all_runs.jsonl").write_text(text)
    return folder / "all_runs.jsonl"


def test_the_sample_is_recognised_and_read_one_run_per_row(resolver):
    assert is_published_file(SAMPLE)
    got = read_published(SAMPLE, resolver)
    assert got.rows == 6 and got.other_suites == 0 and not got.fatal
    assert [r.run_id for r in got.runs] == list(SCORES)
    by = {r.run_id: r for r in got.runs}
    assert {r.env_id for r in got.runs} == {"fix_embedding", "optimize_llm_foundry", "rust_codecontests"}
    r = by["mp4-server_164668"]
    assert (r.kind, r.label, r.group, r.budget_s, r.human) == (SourceKind.PUBLISHED, SONNET, SONNET, 1800.0, False)
    assert (r.started_ms, r.ended_ms, r.finished) == (1730748519621, 1730752075213, True)
    assert r.env.anchors.kind == "published" and (r.env.start, r.env.reference) == (5.6, 4.54)
    # one scoring at the budget, whose raw value is the published score mapped back: 5.6 - 0.588 * 1.06
    assert [s.working_s for s in r.scorings] == [1800.0]
    assert r.scorings[0].score == pytest.approx(5.6 - 0.5882948931 * 1.06)
    assert r.source.endswith("metr-all-runs-sample.jsonl:3")  # traceable to its row
    for rid, score in SCORES.items():  # normalized on the published anchors, the row's own number comes back
        assert A.normalized_final_at(by[rid]) == pytest.approx(score, abs=1e-12)


def test_grouping_by_model_and_budget(resolver):
    runs = read_published(SAMPLE, resolver).runs
    c = A.compare(runs, budgets=[1800, None], n_boot=0)
    assert c.groups == [OPUS, SONNET]
    assert c.stats[("rust_codecontests", SONNET)].n_runs == 3
    mean_rust = (0.4777070063 + 0.6687898085 + 0.3821656044) / 3
    assert c.stats[("rust_codecontests", SONNET)].mean_normalized[1800.0] == pytest.approx(mean_rust)
    # over environments: the mean of the per-environment means
    assert c.stats[(A.ALL, SONNET)].mean_normalized[1800.0] == pytest.approx((mean_rust + 0.5882948931) / 2)
    rows = paper_view.paper_rows(c)
    assert [(p.budget_s, p.model, p.n_runs, p.envs, p.k) for p in rows] == [
        (1800.0, OPUS, 2, ("fix_embedding",), 2),
        (1800.0, SONNET, 4, ("optimize_llm_foundry", "rust_codecontests"), 1)]
    opus = rows[0]
    lo, hi = sorted([1.22771e-05, 0.0107515225])
    assert opus.agent_at_1 == pytest.approx((lo + hi) / 2)
    assert opus.agent_at_k == pytest.approx(lo * 0.25 + hi * 0.75)  # E[max of 2 draws] by hand
    assert math.isnan(opus.human_at_1) and opus.n_humans == 0


def test_other_suites_ignored_and_fatal_errors_counted_apart(published, resolver):
    got = read_published(published, resolver)
    assert (got.rows, got.other_suites, len(got.runs), dict(got.fatal)) == (9, 2, 6, {"serverError": 1})
    assert "crashed_1" not in {r.run_id for r in got.runs}
    notes = " ".join(got.notes)
    assert "ignored 2 row(s) of other task suites" in notes and "serverError ×1" in notes
    # a folder holding it reads the same, and says so
    loaded = load_sources([published.parent], resolver)
    assert len(loaded.runs) == 6 and any("ignored 2 row(s)" in n for n in loaded.notes)


@pytest.mark.parametrize("change, field", [
    ({"score": "high"}, "score"), ({"time_limit": None}, "time_limit"), ({"alias": ""}, "alias"),
    ({"time_limit": -5}, "time_limit"),
])
def test_a_malformed_row_is_refused_in_one_line_naming_line_and_field(tmp_path, resolver, change, field):
    rows = [json.loads(x) for x in SAMPLE.read_text().splitlines()]
    rows[4].update(change)
    path = tmp_path / "all_runs.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(CompareError) as exc:
        read_published(path, resolver)
    text = exc.value.what
    assert "\n" not in text and f"line 5: field '{field}'" in text


def test_a_row_without_its_family_or_not_json_is_refused(tmp_path, resolver):
    path = tmp_path / "all_runs.jsonl"
    path.write_text(SAMPLE.read_text() + '{"run_id": "x", "alias": "m", "time_limit": 1, "score": 0}\n')
    with pytest.raises(CompareError, match=r"line 7: field 'task_family'"):
        read_published(path, resolver)
    path.write_text(SAMPLE.read_text() + "{not json\n")
    with pytest.raises(CompareError, match=r"line 7: not JSON"):
        read_published(path, resolver)


# -- one scale, with human sessions -----------------------------------------------------------------
@pytest.fixture
def human_on_rust(env_copy, fake_clock, tmp_path):
    """A real session folder, recorded as a rust_codecontests session on a gpu profile normalized by
    anchors of its own (0 -> 0.4, measured here): the toy environment's scorer under
    rust_codecontests' id, family and direction (scored 0.1 at 10 minutes, 0.2 at 40). Its start row
    states those rules: what a session on this project's anchors looks like."""
    from rebench_tui.catalog import load_catalog
    from rebench_tui.runtime.local import LocalRuntime
    from rebench_tui.session import Session
    from tests.conftest import FIXTURE_ENVS, KNOWN_IMAGES

    def as_rust(d):
        m = d / "environment.toml"
        text = m.read_text()
        text = text.replace('id = "toy_score"', 'id = "rust_codecontests"')
        text = text.replace('family = "rebench_toy_score"', 'family = "ai_rd_rust_codecontests_inference"')
        text = text.replace('direction = "lower"', 'direction = "higher"').replace('aggregation = "min"', 'aggregation = "max"')
        text = text.replace("[profiles.smoke]", "[profiles.gpu]").replace("[profiles.smoke.calibration]", "[profiles.gpu.calibration]")
        text = text.replace("start_score = 10.0", "start_score = 0.0").replace("reference_score = 2.0", "reference_score = 0.4")
        text = text.replace('measured = "by construction: solution/answer.txt starts at 10"',
                            'measured = "2026-12-01, one NVIDIA H200 141GB, this project\'s scorer"')
        m.write_text(text)
        d.rename(d.parent / "rust_codecontests")

    root = env_copy(FIXTURE_ENVS / "toy_score", as_rust)
    env = load_catalog(root, KNOWN_IMAGES).get("rust_codecontests")
    s = Session.create(env, "gpu", LocalRuntime(), tmp_path / "made", clock=fake_clock)
    fake_clock.advance(600)
    (s.workspace / "solution" / "answer.txt").write_text("0.1")
    s.score()
    fake_clock.advance(1800)
    (s.workspace / "solution" / "answer.txt").write_text("0.2")
    s.score()
    s.submit("done")
    s.close(pause_clock=None)
    folder = tmp_path / "humans" / s.folder.name
    shutil.copytree(s.folder, folder, ignore=shutil.ignore_patterns("workspace", "lock"))
    return folder


def test_humans_are_renormalized_onto_the_published_anchors_and_the_table_says_so(human_on_rust, published, resolver,
                                                                                   tmp_path):
    got = gather([str(published)], resolver, sessions_dir=tmp_path / "none", humans_dirs=[human_on_rust.parent])
    (human,) = [r for r in got.runs if r.human]
    assert human.env.anchors.kind == "published" and (human.env.start, human.env.reference) == (0.0, 0.13)
    # raw 0.2 on its own anchors would be 0.5; on METR's it is 0.2 / 0.13
    assert A.normalized_final_at(human) == pytest.approx(0.2 / 0.13)
    beside = "\n".join(got.beside)
    assert "on METR's published anchors" in beside and "rust_codecontests 0 → 0.13" in beside
    assert "from its own anchors measured by the project 0 → 0.4" in beside
    assert "measured on H200" in beside and "harness:" in beside and "ignored 2 row(s)" in beside
    c = A.compare(got.runs, budgets=[1800, 8 * 3600], n_boot=0)
    c.beside = got.beside
    # the paper's view: the humans on the same environment after the same 30 minutes (0.1 at 600 s)
    sonnet = next(p for p in paper_view.paper_rows(c) if p.model == SONNET)
    assert sonnet.n_humans == 1 and sonnet.human_envs == ("rust_codecontests",)
    assert sonnet.human_at_1 == pytest.approx(0.1 / 0.13)
    # beside the table in the terminal, and in the HTML
    from rich.console import Console

    con = Console(record=True, width=200)
    terminal.print_report(con, c, chart=False)
    text = con.export_text()
    assert "beside the table: scale: every run of a METR environment on METR's published anchors" in text
    assert "the paper's view: score@k by time budget" in text and "counted by the paper's rule" in text
    html = report.render_html(c, png=b"")
    assert "Scale and setting" in html and "By time budget" in html


def test_anchors_choice_still_applies(human_on_rust, published, tmp_path):
    r = EnvResolver(override="published")
    got = gather([str(published)], r, sessions_dir=tmp_path / "none", humans_dirs=[human_on_rust.parent])
    assert any("--anchors published" in b for b in got.beside)
    (human,) = [x for x in got.runs if x.human]
    assert human.env.reference == 0.13


def test_anchors_gpu_names_the_gpu():
    assert anchors_gpu(Anchors(0, 1, "measured", "", {"measured": "2026-12-05, one NVIDIA H100 80GB HBM3"})) == "H100"
    assert anchors_gpu(Anchors(0, 1, "calibrated", "", {"gpus": [{"name": "NVIDIA H200"}]})) == "H200"
    assert anchors_gpu(Anchors(0, 1, "published", "", {"hardware_family": "NVIDIA H100"})) == "H100"
    assert anchors_gpu(Anchors(0, 1, "measured", "", {})) is None


def test_compare_command_on_a_folder_with_the_published_file(published, human_on_rust, tmp_path):
    res = CliRunner().invoke(main, ["compare", str(published.parent), "--humans", str(human_on_rust.parent),
                                    "--bootstrap", "0", "--budget", "30m", "--budget", "8h",
                                    "-o", str(tmp_path / "rep")])
    assert res.exit_code == 0, res.output
    assert "METR's published anchors" in res.output and "the paper's view" in res.output
    assert (tmp_path / "rep" / "compare.png").stat().st_size > 0
    assert "By time budget" in (tmp_path / "rep" / "compare.html").read_text()
    import csv

    with open(tmp_path / "rep" / "by_budget.csv", newline="") as fh:
        rows = {r["model"]: r for r in csv.DictReader(fh)}
    assert rows[OPUS]["run_ids"] == "mp4-server_205615;mp4-server_205664" and rows[OPUS]["rule"] == "paper"
    assert float(rows[SONNET]["humans_score_at_1"]) == pytest.approx(0.1 / 0.13)


# -- the GPU under the anchors ------------------------------------------------------------------------
def test_gpu_differs_offers_calibrate_only_where_the_models_differ():
    h100 = Anchors(1.6, -0.66, "measured", "", {"measured": "2026-12-05, one NVIDIA H100 80GB HBM3 (driver 580)"})
    line = gpu_differs(h100, ["NVIDIA H200", "NVIDIA H200"], "triton_cumsum", "gpu")
    assert line is not None and "\n" not in line
    assert "measured on an H100" in line and "H200" in line and "rebench-tui calibrate triton_cumsum --profile gpu" in line
    assert gpu_differs(h100, ["NVIDIA H100 80GB HBM3"], "triton_cumsum", "gpu") is None
    assert gpu_differs(h100, [], "triton_cumsum", "gpu") is None  # nothing listed: nothing to say
    assert gpu_differs(Anchors(0, 1, "measured", "", {}), ["NVIDIA H200"], "x", "gpu") is None  # anchors name no GPU


def test_doctor_says_when_the_hosts_gpus_are_not_the_anchors_gpu(tmp_path):
    from rebench_tui.catalog import load_catalog
    from rebench_tui.config import Settings
    from rebench_tui.doctor import Doctor
    from tests.conftest import KNOWN_IMAGES

    env = load_catalog(ROOT / "environments", KNOWN_IMAGES).get("triton_cumsum")
    settings = Settings(config_dir=tmp_path / "config", sessions_dir=tmp_path / "sessions")
    doc = Doctor(settings, env, "gpu")
    doc._anchors_gpu(["NVIDIA H200"])
    doc._anchors_gpu(["NVIDIA H100 80GB HBM3"])
    (h200, h100) = [f for f in doc.findings if f.check == "anchors' GPU"]
    assert h200.status == "warn" and "H100" in h200.detail and "H200" in h200.detail
    assert h200.fix == "rebench-tui calibrate triton_cumsum --profile gpu"
    assert h100.status == "ok"
