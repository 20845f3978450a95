"""The comparison on screen: a chart of best-so-far curves and a table, one environment at a time.

It renders a :class:`~rebench_tui.compare.analysis.Comparison` computed beforehand (by
``rebench-tui compare --tui``); it computes nothing itself. Keys: right/``n`` and left/``p``
switch the environment (all environments first, when there are several), ``q``/escape closes.
"""

from __future__ import annotations

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Static
from textual_plotext import PlotextPlot

from ...compare.analysis import ALL, Comparison
from ...compare.terminal import draw_curves, env_title, fmt_budget, rule_title, summary_rows
from ..widgets.table import MeasuredTable


class CompareChart(PlotextPlot):
    DEFAULT_CSS = "CompareChart { height: 1fr; min-height: 10; }"


class CompareTable(MeasuredTable):
    DEFAULT_CSS = "CompareTable { height: auto; max-height: 12; }"


class CompareScreen(Screen[None]):
    DEFAULT_CSS = """
    CompareScreen #compare-title { height: 1; padding: 0 1; background: $boost; text-style: bold; }
    CompareScreen #compare-help { height: 1; padding: 0 1; color: $text-muted; }
    CompareScreen #compare-anchors { height: auto; max-height: 6; padding: 0 1; }
    CompareScreen #compare-anchors.mixed { color: $warning; }
    """
    BINDINGS = [
        Binding("right,n", "next_env", "Next env", id="compare.next_env", priority=True),
        Binding("left,p", "prev_env", "Previous env", id="compare.prev_env", priority=True),
        Binding("q,escape", "close", "Close", id="compare.close"),
    ]

    def __init__(self, comparison: Comparison, **kw) -> None:
        super().__init__(**kw)
        self.comparison = comparison
        c = comparison
        self.env_ids: list[str] = ([ALL] if len(c.envs) > 1 else []) + list(c.envs)
        self.position = 0

    @property
    def env(self) -> str:
        return self.env_ids[self.position] if self.env_ids else ALL

    def compose(self) -> ComposeResult:
        yield Static(id="compare-title")
        yield CompareChart(id="compare-chart")
        yield CompareTable(id="compare-table", cursor_type="row", zebra_stripes=True)
        yield Static(id="compare-anchors")
        c = self.comparison
        yield Static(f"{len(c.runs)} runs, {rule_title(c)} · final scores at {fmt_budget(c.budget)} · score@k band: "
                     f"{int(c.level * 100)}% bootstrap ({c.n_boot} resamples, seed {c.seed})", id="compare-help")
        yield Footer()

    def on_mount(self) -> None:
        self.show_env()

    def show_env(self) -> None:
        c = self.comparison
        env = self.env
        where = f"[{self.position + 1}/{len(self.env_ids)}]" if self.env_ids else ""
        self.query_one("#compare-title", Static).update(f"{env_title(c, env)} {where}")
        table = self.query_one(CompareTable)
        cols, rows = summary_rows(c, env)
        table.clear(columns=True)
        table.add_columns(*cols)
        for row in rows:
            table.add_row(*row, key=row[0])
        lines = [f"anchors · {g}: {c.anchors_tag(env, g)}" for g in c.groups if c.anchors_of(env, g)]
        warnings = [w for w in c.warnings if env == ALL or f" on {env}:" in w]
        anchors = self.query_one("#compare-anchors", Static)
        anchors.update("\n".join(lines + [f"⚠ {w}" for w in warnings]))
        anchors.set_class(bool(warnings), "mixed")
        chart = self.query_one(CompareChart)
        plt = chart.plt
        plt.clear_data()
        plt.clear_figure()
        draw_curves(plt, c, env)
        chart.refresh()

    def action_next_env(self) -> None:
        if self.env_ids:
            self.position = (self.position + 1) % len(self.env_ids)
            self.show_env()

    def action_prev_env(self) -> None:
        if self.env_ids:
            self.position = (self.position - 1) % len(self.env_ids)
            self.show_env()

    def action_close(self) -> None:
        self.dismiss()  # whoever opened it decides what closing means (the session app stays open)


class CompareApp(App):
    """A small app that shows only the compare screen (``rebench-tui compare --tui``)."""

    TITLE = "rebench-tui compare"

    def __init__(self, comparison: Comparison) -> None:
        super().__init__()
        self.comparison = comparison

    def on_mount(self) -> None:
        self.push_screen(CompareScreen(self.comparison), lambda _result: self.exit())
