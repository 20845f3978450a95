"""The compare screen through Textual's Pilot at a fixed size, on the fixture runs."""

from __future__ import annotations

import pytest

from rebench_tui.compare import analysis as A
from rebench_tui.compare.imports import load_sources
from rebench_tui.compare.runs import EnvResolver
from rebench_tui.tui.screens.compare import CompareApp, CompareChart, CompareScreen, CompareTable
from tests.conftest import ROOT

RUNS = ROOT / "tests" / "fixtures" / "runs"
SIZE = (120, 40)


@pytest.fixture(scope="module")
def comparison():
    runs = load_sources([RUNS / "inspect", RUNS / "vivaria"], EnvResolver()).runs
    return A.compare(runs, budgets=(2 * 3600, 8 * 3600), n_boot=50, seed=0)


def title(app) -> str:
    return str(app.screen.query_one("#compare-title").render())


async def test_switching_environments_updates_table_and_chart(comparison):
    app = CompareApp(comparison)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, CompareScreen)
        assert screen.env_ids == [A.ALL, "fix_embedding", "small_scaling_law", "triton_cumsum"]
        table = screen.query_one(CompareTable)
        assert "all environments" in title(app) and "[1/4]" in title(app)
        assert table.row_count == 3  # human, claude, o1
        assert [str(c.label) for c in table.ordered_columns][:3] == ["group", "runs", "scorings/h"]

        await pilot.press("n")
        assert screen.env == "fix_embedding" and "[2/4]" in title(app)
        assert table.row_count == 3
        assert table.get_row_at(0)[0] == "human"
        assert "mean raw@8h" in [str(c.label) for c in table.ordered_columns]

        await pilot.press("right")
        assert screen.env == "small_scaling_law"
        assert table.row_count == 2  # no claude run on it
        row = table.get_row_at(1)
        norm_col = [str(c.label) for c in table.ordered_columns].index("norm@8h")
        assert row[0] == "openai/o1-preview" and row[norm_col] == "0.25"  # last valid counts

        await pilot.press("p")
        await pilot.press("left")
        assert screen.env == A.ALL
        await pilot.press("left")  # wraps around
        assert screen.env == "triton_cumsum"

        chart = screen.query_one(CompareChart)
        assert chart.size.width > 0 and chart.size.height >= 10
        await pilot.press("q")
    assert app.return_code == 0


async def test_one_environment_has_no_all_page(comparison):
    one = A.compare(comparison.runs_of("fix_embedding"), budgets=(8 * 3600,), n_boot=10)
    app = CompareApp(one)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert app.screen.env_ids == ["fix_embedding"]
        await pilot.press("n")
        assert app.screen.env == "fix_embedding"
        await pilot.press("escape")


async def test_the_screen_says_which_anchors_each_group_used_and_warns_when_mixed(comparison, toy_session):
    from rebench_tui.compare.imports import read_human_session

    app = CompareApp(comparison)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        await pilot.press("n")  # fix_embedding
        text = str(app.screen.query_one("#compare-anchors").render())
        assert "human: published (METR, NVIDIA H100): 2.2→0.26" in text and "⚠" not in text
        assert "anchors" in [str(c.label) for c in app.screen.query_one(CompareTable).ordered_columns]
    # two toy sessions, one recorded with other anchors: the screen warns
    a, b = toy_session(), toy_session()
    for s in (a, b):
        s.score()
    # the other anchors recorded in b's chain (session.json alone is never the source of them)
    from rebench_tui.trajectory.entries import log

    b.audit.append(log("anchors changed", {"event": "rules_changed", "rules": {"anchors": {**b.meta.anchors,
                                                                                          "reference": 4.0}}}))
    mixed = A.compare([read_human_session(a.folder), read_human_session(b.folder)], n_boot=5)
    app = CompareApp(mixed)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        anchors = app.screen.query_one("#compare-anchors")
        assert "MIXED" in str(anchors.render()) and "different anchors are averaged" in str(anchors.render())
        assert anchors.has_class("mixed")
