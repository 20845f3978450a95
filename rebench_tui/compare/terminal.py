"""The comparison in a terminal: a plotext chart and rich tables.

``draw_curves`` takes any plotext figure (the ``plotext`` module itself, or the ``plt`` of
textual-plotext's widget), so the command line and the screen draw the same chart.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from rich.table import Table

from .analysis import ALL, PAPER, ROBUST, Comparison, final_by
from .runs import Run

GROUP_COLORS = ("cyan", "orange", "magenta", "green", "red", "blue", "yellow")


def fmt_budget(b: float | None) -> str:
    if b is None:
        return "all"
    if b >= 3600:
        h = b / 3600
        return f"{h:g}h" if h == int(h) else f"{h:.1f}h"
    return f"{b / 60:g}m"


def fmt(x: float, digits: int = 3) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:.{digits}g}"


def fmt2(x: float) -> str:
    return "–" if x is None or not math.isfinite(x) else f"{x:.2f}"


def env_title(c: Comparison, env: str | None) -> str:
    if env in (None, ALL):
        return f"all environments ({len(c.envs)})"
    run = next((r for r in c.runs if r.env_id == env), None)
    return env if run is None or not run.env.title else f"{env} ({run.env.title})"


def rule_title(c: Comparison) -> str:
    """Every headline's rule: which one counted every run of the comparison."""
    return f"counted by {c.rule_words}"


def conditions(r: Run) -> str:
    """Who and under which conditions, where the run says (human sessions)."""
    if not r.human:
        return ""
    internet = {True: "internet", False: "no internet", None: "internet ?"}[r.internet]
    tools = {"AI_TOOLS_AVAILABLE": "AI tools", "NO_AI_TOOLS": "no AI tools"}.get(r.ai_tools or "", "AI tools ?")
    return f"{r.participant or '?'}: {internet}, {tools}"


RULES_COLUMNS = ["run", "group", "env", "participant, conditions", "paper rule", "norm", "robust rule", "norm", "robust by"]


def rules_rows(c: Comparison) -> list[list[str]]:
    """Every run (those the comparison's rule could not count too), by both rules side by side."""
    rows = []
    for r in list(c.runs) + list(c.left_out):
        paper = final_by(r, PAPER)
        robust = final_by(r, ROBUST)
        if robust is None:
            robust_cells = ["cannot: no fingerprints", "–", "–"]
        else:
            how = "recount at the finish" if any(s.recount for s in r.scorings) else "attempt medians"
            robust_cells = [fmt(robust, 4), fmt2(r.env.normalize(robust)), how]
        rows.append([r.run_id, r.group, r.env_id, conditions(r), fmt(paper if paper is not None else math.nan, 4),
                     fmt2(r.env.normalize(paper)) if paper is not None else "–", *robust_cells])
    return rows


def rules_table(c: Comparison) -> Table:
    t = Table(title=f"every run by both rules (the tables above are {rule_title(c)}; --rule chooses)", title_justify="left")
    for i, col in enumerate(RULES_COLUMNS):
        t.add_column(col, justify="left" if i < 4 or col == "robust by" else "right", no_wrap=i == 0)
    for row in rules_rows(c):
        t.add_row(*row)
    return t


def group_color(c: Comparison, group: str) -> str:
    return GROUP_COLORS[c.groups.index(group) % len(GROUP_COLORS)] if group in c.groups else "white"


def draw_curves(plt: Any, c: Comparison, env: str | None = None) -> None:
    """Mean normalized best-so-far score vs working hours, one line per group."""
    plt.title(f"best-so-far normalized score: {env_title(c, env)}")
    plt.xlabel("working hours")
    plt.ylabel("normalized")
    drawn = False
    for g in c.groups:
        xs, ys = c.group_curve(g, env, points=120)
        if not xs:
            continue
        n = len(c.runs_of(env, g))
        warn = "⚠ " if c.warning_of(env or ALL, g) else ""
        plt.plot(xs, ys, label=f"{g} (n={n}; {warn}anchors {c.anchors_tag(env, g)})", color=group_color(c, g), marker="braille")
        drawn = True
    if drawn:
        top = max([1.0] + [y for g in c.groups for y in c.group_curve(g, env, points=60)[1] if math.isfinite(y)])
        plt.ylim(0, top * 1.05)
        plt.hline(1.0, "gray")


def render_chart(c: Comparison, env: str | None = None, width: int = 100, height: int = 22) -> str:
    import plotext as plt

    plt.clear_figure()
    plt.plot_size(width, height)
    plt.theme("clear")
    draw_curves(plt, c, env)
    text = plt.build()
    plt.clear_figure()
    return text


def k_columns(ks: Sequence[int], limit: int = 6) -> list[int]:
    """A few k to show: 1, 2, 4, 8, ... and the largest."""
    if len(ks) <= limit:
        return list(ks)
    shown = []
    k = 1
    while k < ks[-1] and len(shown) < limit - 1:
        shown.append(k)
        k *= 2
    return shown + [ks[-1]]


def summary_rows(c: Comparison, env: str | None = None) -> tuple[list[str], list[list[str]]]:
    """Column names and rows of the per-group table for one environment (or all)."""
    key = env or ALL
    budgets = c.budgets
    kshow = k_columns(c.ks, 3)
    cols = ["group", "runs", "scorings/h"]
    cols += [f"mean raw@{fmt_budget(c.budget)}"] if key != ALL else []
    cols += [f"norm@{fmt_budget(b)}" for b in budgets]
    cols += [f"best@{fmt_budget(c.budget)}"]
    cols += [f"score@{k}" for k in kshow]
    cols += ["anchors"]
    rows = []
    for g in c.groups:
        st = c.stats.get((key, g))
        if st is None:
            continue
        runs = f"{st.n_runs} ({st.n_finished} done)"
        if key == ALL:
            runs += f", {len({r.env_id for r in c.runs_of(None, g)})} envs"
        row = [g, runs, fmt(st.rate_per_hour)]
        if key != ALL:
            row.append(fmt(st.mean_final[c.budget], 4))
        row += [fmt2(st.mean_normalized[b]) for b in budgets]
        row += [fmt2(st.best_normalized[c.budget])]
        sk = c.score_at_k[(g, c.budget)]
        for k in kshow:
            if key == ALL:
                row.append(fmt2(sk.at(k)))
            else:
                row.append(fmt2(sk.per_env[key][sk.ks.index(k)]) if key in sk.per_env else "–")
        row.append(("⚠ " if c.warning_of(key, g) else "") + c.anchors_tag(key, g))
        rows.append(row)
    return cols, rows


def summary_table(c: Comparison, env: str | None = None) -> Table:
    cols, rows = summary_rows(c, env)
    t = Table(title=f"{env_title(c, env)} — {rule_title(c)}", title_justify="left")
    for i, col in enumerate(cols):
        t.add_column(col, justify="left" if i == 0 or col == "anchors" else "right")
    for row in rows:
        t.add_row(*row)
    return t


def score_at_k_table(c: Comparison) -> Table:
    kshow = k_columns(c.ks, 8)
    t = Table(title=f"score@k (mean over environments; {int(c.level * 100)}% bootstrap band, {c.n_boot} resamples, "
                    f"seed {c.seed}) — {rule_title(c)}",
              title_justify="left")
    t.add_column("group")
    t.add_column("budget")
    for k in kshow:
        t.add_column(f"k={k}", justify="right")
    t.add_column("anchors")
    for g in c.groups:
        for b in c.budgets:
            sk = c.score_at_k[(g, b)]
            cells = []
            for k in kshow:
                j = sk.ks.index(k)
                cells.append(f"{fmt2(sk.expected[j])}\n[{fmt2(sk.low[j])}, {fmt2(sk.high[j])}]")
            t.add_row(g, fmt_budget(b), *cells, ("⚠ " if c.warning_of(ALL, g) else "") + c.anchors_tag(ALL, g))
    return t


def anchors_rows(c: Comparison) -> tuple[list[str], list[list[str]]]:
    """Which anchors normalized each group's runs on each environment, and where they come from."""
    cols = ["env", "group", "runs", "start → reference", "anchors", "from"]
    rows = []
    for u in c.anchor_uses:
        rows.append([u.env_id, u.group, str(u.n_runs), f"{u.anchors.start:g} → {u.anchors.reference:g}",
                     ("⚠ " if (u.env_id, u.group) in c.mixed else "") + u.anchors.kind, u.anchors.summary])
    return cols, rows


def anchors_table(c: Comparison) -> Table:
    cols, rows = anchors_rows(c)
    t = Table(title="anchors: what each group's runs were normalized between (each run by its own setting's, "
                    "unless --anchors says otherwise)", title_justify="left")
    for col in cols:
        t.add_column(col, overflow="fold")
    for row in rows:
        t.add_row(*row)
    return t


def paper_table(c: Comparison) -> Table | None:
    """The paper's view (:mod:`.paper_view`), None when no run carries a time budget."""
    from . import paper_view

    rows = paper_view.paper_rows(c)
    if not rows:
        return None
    t = Table(title=paper_view.title(c), title_justify="left")
    for i, col in enumerate(paper_view.COLUMNS):
        t.add_column(col, justify="left" if i in (0, 1, 3, 6) else "right")
    for row in paper_view.table_rows(rows):
        t.add_row(*row)
    return t


def beside_lines(c: Comparison) -> list[str]:
    """The lines printed beside the tables: the scale every run is on, and the settings' differences."""
    return list(c.beside)


def print_report(console: Any, c: Comparison, *, width: int | None = None, chart: bool = True) -> None:
    """The whole terminal view: chart over all environments, then one table per environment."""
    if chart:
        from rich.text import Text

        w = min(width or console.width or 100, 120)
        console.print(Text.from_ansi(render_chart(c, None, width=w, height=20)))
    for env in c.envs:
        console.print(summary_table(c, env))
    if len(c.envs) > 1:
        console.print(summary_table(c, ALL))
    from rich.markup import escape

    for line in beside_lines(c):
        console.print(f"[bold]beside the table:[/bold] {escape(line)}", highlight=False)
    paper = paper_table(c)
    if paper is not None:
        console.print(paper)
    console.print(score_at_k_table(c))
    console.print(rules_table(c))
    console.print(anchors_table(c))
    for w in c.warnings:
        console.print(f"[bold yellow]warning:[/bold yellow] {escape(w)}", highlight=False)
