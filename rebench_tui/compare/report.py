"""Files from a comparison: CSV tables, a PNG figure (matplotlib, Agg) and a self-contained HTML page.

The PNG has one panel per environment (each run's best-so-far normalized score as a thin step
line, each group's mean as a thick one), a panel over all environments when there are several,
and a score@k panel with its bootstrap band. Panels are ``PANEL_IN`` inches at ``DPI``, so the
image size follows from the panel count (:func:`png_size`).
"""

from __future__ import annotations

import base64
import csv
import html
import io
import math
from pathlib import Path
from typing import Any, Iterable, Sequence

from .analysis import (ALL, HOUR, PAPER, ROBUST, Comparison, best_so_far, final_at, final_by, final_value, normalized_curve,
                       scorings_within)
from .runs import CompareError
from .terminal import RULES_COLUMNS, anchors_rows, env_title, fmt_budget, k_columns, rule_title, rules_rows, summary_rows

DPI = 100
PANEL_IN = (5.0, 3.8)
MAX_COLS = 3
PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#17becf")
BUDGET_STYLES = ("-", "--", ":", "-.")


def _num(x: Any) -> str:
    if x is None:
        return ""
    if isinstance(x, float):
        return "NaN" if math.isnan(x) else repr(x)
    return str(x)


# -- CSV --------------------------------------------------------------------------------------
CURVES_COLUMNS = ("env_id", "group", "run_id", "source_kind", "label", "finished", "scoring", "working_s", "working_h",
                  "score", "best_score", "normalized_best")
SCORE_AT_K_COLUMNS = ("group", "budget_s", "env_id", "k", "n_runs", "expected", "low", "high", "anchors", "warning")
SUMMARY_COLUMNS = ("env_id", "group", "budget_s", "runs", "finished", "scorings", "working_h", "scorings_per_hour",
                   "mean_final", "mean_normalized", "best_normalized", "anchors", "warning")
RUNS_COLUMNS = ("run_id", "source_kind", "source", "env_id", "group", "label", "finished", "scorings", "working_s",
                "final", "normalized", "start", "reference", "direction", "aggregation", "anchors", "anchors_summary",
                "setting_differs", "counted_by", "paper_final", "robust_final", "robust_note", "participant", "internet",
                "ai_tools")
ANCHORS_COLUMNS = ("env_id", "group", "n_runs", "start", "reference", "anchors", "summary", "mixed")


def _write(path: Path, header: Sequence[str], rows: Iterable[Sequence[Any]]) -> Path:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        w = csv.writer(fh)
        w.writerow(header)
        for row in rows:
            w.writerow([_num(x) for x in row])
    return path


def curve_rows(c: Comparison) -> list[list[Any]]:
    rows = []
    for r in c.runs:
        raw, norm = best_so_far(r), normalized_curve(r)
        for i, s in enumerate(r.scorings):
            rows.append([r.env_id, r.group, r.run_id, r.kind.value, r.label, r.finished, i + 1, s.working_s,
                         s.working_s / HOUR, s.score, raw.values[i], norm.values[i]])
    return rows


def score_at_k_rows(c: Comparison) -> list[list[Any]]:
    rows = []
    for (g, b), sk in c.score_at_k.items():
        for j, k in enumerate(sk.ks):
            rows.append([g, b, ALL, k, sum(sk.n_runs.values()), sk.expected[j], sk.low[j], sk.high[j],
                         c.anchors_tag(ALL, g), c.warning_of(ALL, g)])
        for e, vals in sk.per_env.items():
            for j, k in enumerate(sk.ks):
                rows.append([g, b, e, k, sk.n_runs[e], vals[j], None, None, c.anchors_tag(e, g), c.warning_of(e, g)])
    return rows


def summary_csv_rows(c: Comparison) -> list[list[Any]]:
    rows = []
    for (e, g), st in c.stats.items():
        for b in c.budgets:
            rows.append([e, g, b, st.n_runs, st.n_finished, st.n_scorings, st.hours, st.rate_per_hour,
                         st.mean_final[b], st.mean_normalized[b], st.best_normalized[b], c.anchors_tag(e, g), c.warning_of(e, g)])
    return rows


def run_rows(c: Comparison, *, left_out: bool = False) -> list[list[Any]]:
    """One row per run counted (``final``/``normalized`` by the comparison's rule, ``counted_by``),
    with both rules' finals over the whole run; ``left_out``: the runs the rule could not count too
    (their ``counted_by`` empty, ``final`` NaN)."""
    b = c.budget
    rows = []
    for r in list(c.runs) + (list(c.left_out) if left_out else []):
        counted = r not in c.left_out
        robust = final_by(r, ROBUST)
        rows.append([r.run_id, r.kind.value, r.source, r.env_id, r.group, r.label, r.finished, scorings_within(r),
                     r.duration_s, final_at(r, b) if counted else math.nan, final_value(r, b) if counted else math.nan,
                     r.env.start, r.env.reference, r.env.direction.value, r.env.aggregation.value, r.env.anchors.kind,
                     r.env.anchors.summary, ";".join(r.setting_differs), c.rule if counted else "", final_by(r, PAPER),
                     robust, "no attempt fingerprints: cannot be computed" if robust is None else
                     ("recount at the finish" if any(s.recount for s in r.scorings) else "attempt medians"),
                     r.participant, r.internet, r.ai_tools])
    return rows


def anchors_csv_rows(c: Comparison) -> list[list[Any]]:
    return [[u.env_id, u.group, u.n_runs, u.anchors.start, u.anchors.reference, u.anchors.kind, u.anchors.summary,
             (u.env_id, u.group) in c.mixed] for u in c.anchor_uses]


def write_csv(c: Comparison, out_dir: Path) -> list[Path]:
    """``curves.csv``, ``score_at_k.csv``, ``summary.csv``, ``runs.csv`` and ``anchors.csv`` in ``out_dir``.

    Every row that averages runs says which anchors they used (``anchors``) and, where one group's
    runs on one environment used different ones, ``warning`` says so."""
    out_dir.mkdir(parents=True, exist_ok=True)
    return [
        _write(out_dir / "curves.csv", CURVES_COLUMNS, curve_rows(c)),
        _write(out_dir / "score_at_k.csv", SCORE_AT_K_COLUMNS, score_at_k_rows(c)),
        _write(out_dir / "summary.csv", SUMMARY_COLUMNS, summary_csv_rows(c)),
        _write(out_dir / "runs.csv", RUNS_COLUMNS, run_rows(c, left_out=True)),
        _write(out_dir / "anchors.csv", ANCHORS_COLUMNS, anchors_csv_rows(c)),
    ] + _by_budget_csv(c, out_dir)


def _by_budget_csv(c: Comparison, out_dir: Path) -> list[Path]:
    """``by_budget.csv``, the paper's view, where runs carry their budget (METR's published runs):
    every row names the agent runs it counts, so each number traces to its rows (runs.csv)."""
    from .paper_view import paper_rows

    rows = paper_rows(c)
    if not rows:
        return []
    cols = ["budget_s", "model", "runs", "envs", "k", "agents_score_at_1", "agents_score_at_k", "humans", "human_envs",
            "humans_score_at_1", "humans_score_at_k", "rule", "run_ids"]
    return [_write(out_dir / "by_budget.csv", cols,
                   [[p.budget_s, p.model, p.n_runs, ";".join(p.envs), p.k, p.agent_at_1, p.agent_at_k, p.n_humans,
                     ";".join(p.human_envs), p.human_at_1, p.human_at_k, c.rule, ";".join(p.run_ids)] for p in rows])]


# -- PNG --------------------------------------------------------------------------------------
def panels(c: Comparison) -> list[str]:
    """What the figure shows, in order: each environment, ALL (if several), then score@k ("k")."""
    from .paper_view import paper_rows

    return list(c.envs) + ([ALL] if len(c.envs) > 1 else []) + ["k"] + (["paper"] if paper_rows(c) else [])


def grid_shape(n_panels: int) -> tuple[int, int]:
    cols = min(MAX_COLS, n_panels)
    return math.ceil(n_panels / cols), cols


def png_size(c: Comparison) -> tuple[int, int]:
    """(width, height) in pixels of the PNG for this comparison."""
    rows, cols = grid_shape(len(panels(c)))
    return round(cols * PANEL_IN[0] * DPI), round(rows * PANEL_IN[1] * DPI)


def _matplotlib():
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as exc:
        raise CompareError("the PNG report needs matplotlib, which is not installed",
                           fix="pip install 'rebench-tui[report]', or leave out --png/--html") from exc
    return Figure, FigureCanvasAgg


def _short(text: str, limit: int = 34) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _color(c: Comparison, group: str) -> str:
    return PALETTE[c.groups.index(group) % len(PALETTE)]


def _rule_text(c: Comparison, env: str) -> str:
    run = next(r for r in c.runs if r.env_id == env)
    e = run.env
    rule = "last valid counts" if e.aggregation.value == "last" else f"{e.direction.value} is better"
    return f"{rule}; each group's anchors in its legend"


def _env_panel(ax: Any, c: Comparison, env: str) -> None:
    end_h = c.max_hours()
    for g in c.groups:
        runs = c.runs_of(env, g)
        color = _color(c, g)
        if env != ALL:
            for r in runs:
                cur = normalized_curve(r)
                pts = [(t / HOUR, v) for t, v in zip(cur.times, cur.values) if math.isfinite(v)]
                if c.budget is not None:
                    pts = [p for p in pts if p[0] <= c.budget / HOUR]
                if not pts:
                    continue
                stop = r.duration_s if c.budget is None else min(r.duration_s, c.budget)
                xs = [p[0] for p in pts] + [max(stop / HOUR, pts[-1][0])]
                ys = [p[1] for p in pts] + [pts[-1][1]]
                ax.step(xs, ys, where="post", color=color, alpha=0.45, linewidth=1.0)
        xs, ys = c.group_curve(g, env)
        if xs:
            n_envs = len({r.env_id for r in runs})
            count = f"n={len(runs)}" + (f", {n_envs} env{'s' if n_envs > 1 else ''}" if env == ALL else "")
            warn = "⚠ " if c.warning_of(env, g) else ""
            ax.plot(xs, ys, color=color, linewidth=2.4,
                    label=f"{_short(g)} ({count})\n{warn}anchors: {_short(c.anchors_tag(env, g), 60)}")
    ax.axhline(1.0, color="0.4", linestyle="--", linewidth=0.8)
    ax.axhline(0.0, color="0.6", linewidth=0.6)
    for b in c.budgets:
        if b is not None and b / HOUR < end_h:
            ax.axvline(b / HOUR, color="0.5", linestyle=":", linewidth=0.8)
    ax.set_xlim(0, max(end_h, 1e-9))
    ax.set_ylim(bottom=-0.05)
    ax.set_xlabel("working hours")
    ax.set_ylabel("best-so-far normalized score")
    title = _short(env_title(c, env), 60)
    ax.set_title(title + (" — group means" if env == ALL else f"\n{_rule_text(c, env)}"), fontsize=9.5)
    ax.grid(alpha=0.25)
    ax.legend(fontsize=7, loc="best")


def _k_panel(ax: Any, c: Comparison) -> None:
    for g in c.groups:
        color = _color(c, g)
        for i, b in enumerate(c.budgets):
            sk = c.score_at_k[(g, b)]
            ks = list(sk.ks)
            ax.plot(ks, sk.expected, color=color, linestyle=BUDGET_STYLES[i % len(BUDGET_STYLES)], marker="o",
                    markersize=3.5, label=f"{_short(g)} @ {fmt_budget(b)}")
            lo = [x if math.isfinite(x) else math.nan for x in sk.low]
            hi = [x if math.isfinite(x) else math.nan for x in sk.high]
            ax.fill_between(ks, lo, hi, color=color, alpha=0.15 if i == len(c.budgets) - 1 else 0.07, linewidth=0)
    ax.axhline(1.0, color="0.4", linestyle="--", linewidth=0.8)
    ax.set_xlabel("k (attempts drawn with replacement, best kept)")
    ax.set_ylabel("mean normalized score over environments")
    ax.set_title(f"score@k with {int(c.level * 100)}% bootstrap band ({c.n_boot} resamples, seed {c.seed})", fontsize=9.5)
    if len(c.ks) > 1:
        ax.set_xlim(1, c.ks[-1])
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylim(bottom=-0.05)
    ax.grid(alpha=0.25)
    ax.legend(fontsize=7, loc="best")


def render_png(c: Comparison) -> bytes:
    Figure, FigureCanvasAgg = _matplotlib()
    ps = panels(c)
    rows, cols = grid_shape(len(ps))
    fig = Figure(figsize=(cols * PANEL_IN[0], rows * PANEL_IN[1]), dpi=DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    for i, p in enumerate(ps):
        ax = axes[i // cols][i % cols]
        if p == "k":
            _k_panel(ax, c)
        elif p == "paper":
            from .paper_view import draw, paper_rows

            draw(ax, c, paper_rows(c), lambda g: _color(c, g))
        else:
            _env_panel(ax, c, p)
    for j in range(len(ps), rows * cols):
        axes[j // cols][j % cols].set_visible(False)
    fig.suptitle(f"RE-Bench comparison: {len(c.runs)} runs {rule_title(c)}; thin steps: single runs, thick: group means "
                 "(0 until a first valid score); " + ("finals over whole runs" if c.budget is None else
                                                      f"finals at {fmt_budget(c.budget)} of working time"), fontsize=11)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI)
    return buf.getvalue()


def write_png(c: Comparison, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(render_png(c))
    return path


# -- HTML -------------------------------------------------------------------------------------
def _table(cols: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(x))}</th>" for x in cols)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(x))}</td>" for x in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


METHOD_HTML = """
<h2>Method</h2>
<ul>
<li>Normalized score: (y &minus; start) / (reference &minus; start), clipped at 0 below; invalid (NaN) scorings count for nothing. Each run is normalized by the anchors (start, reference) of the setting it was scored in: a human session by the ones it recorded, a run whose log carries its own by those, a METR task's agent run by METR's published ones; the Anchors table says which each group used.</li>
<li>Best-so-far: the counting score so far, by one rule for every run, human or agent. The paper's rule (the default): the best valid scoring so far (the last where the last counts, Scaling Law), comparable with METR's published numbers. The robust rule (<code>--rule robust</code>): scorings of unchanged files (the same attempt fingerprint, which rebench-tui sessions record) are re-scores of one attempt, which counts with the median of its valid scorings (in timing environments its worst valid one if a scoring failed); then the best attempt, or the last; once a session's finish recounted its leading attempt, the median of that recount. A run without fingerprints cannot be counted by it and is left out, by name. Plotted against pause-excluded working time.</li>
<li>Final at a budget: the counting score over scorings made within the budget; a run without a valid score counts as 0 in means and score@k.</li>
<li>score@k: per environment E[max of k draws with replacement] = &sum;<sub>i</sub> v<sub>(i)</sub> ((i/n)<sup>k</sup> &minus; ((i&minus;1)/n)<sup>k</sup>) over the sorted normalized finals v<sub>(1)</sub> &le; &hellip; &le; v<sub>(n)</sub>, averaged over the environments the group has runs on.</li>
<li>Band: percentile bootstrap; each resample redraws every environment's runs with replacement and recomputes the exact score@k.</li>
</ul>
"""

CSS = """body{font-family:system-ui,sans-serif;margin:1.5em;color:#222}table{border-collapse:collapse;margin:0.5em 0 1.5em}
td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:right}td:first-child,th:first-child{text-align:left}
th{background:#f3f3f3}img{max-width:100%;border:1px solid #ddd}h2{margin-top:1.2em}.warn{color:#a60}"""


def render_html(c: Comparison, png: bytes | None = None, warnings: Sequence[str] = ()) -> str:
    png = render_png(c) if png is None else png
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>RE-Bench comparison</title>",
             f"<style>{CSS}</style></head><body>",
             f"<h1>RE-Bench comparison</h1><p>{len(c.runs)} runs on {len(c.envs)} environment(s), "
             f"every one {html.escape(rule_title(c))}; groups: "
             f"{html.escape(', '.join(c.groups))}; budgets: {html.escape(', '.join(fmt_budget(b) for b in c.budgets))}.</p>",
             f"<img alt='best-so-far curves and score@k' src='data:image/png;base64,{base64.b64encode(png).decode('ascii')}'>"]
    warnings = list(warnings) + list(c.warnings)
    if warnings:
        parts.append("<h2>Warnings</h2><ul>" + "".join(f"<li class='warn'>{html.escape(w)}</li>" for w in warnings) + "</ul>")
    if c.beside:
        parts.append("<h2>Scale and setting</h2><ul>" + "".join(f"<li>{html.escape(x)}</li>" for x in c.beside) + "</ul>")
    from . import paper_view

    prows = paper_view.paper_rows(c)
    if prows:
        parts.append(f"<h2>By time budget</h2><p>{html.escape(paper_view.title(c))}</p>"
                     + _table(paper_view.COLUMNS, paper_view.table_rows(prows)))
    acols, arows = anchors_rows(c)
    parts.append("<h2>Anchors</h2><p>What each group's runs were normalized between: each run by the anchors of the "
                 "setting it was scored in (a session's recorded ones, a log's own, else METR's published ones), unless "
                 "<code>--anchors</code> said otherwise.</p>" + _table(acols, arows))
    parts.append("<h2>Per environment</h2>")
    for env in c.envs + ([ALL] if len(c.envs) > 1 else []):
        cols, rows = summary_rows(c, env)
        parts.append(f"<h3>{html.escape(env_title(c, env))}</h3>" + _table(cols, rows))
    kshow = k_columns(c.ks, 10)
    rows = []
    for (g, b), sk in c.score_at_k.items():
        rows.append([g, fmt_budget(b)] + [f"{sk.expected[sk.ks.index(k)]:.3f} [{sk.low[sk.ks.index(k)]:.3f}, "
                                          f"{sk.high[sk.ks.index(k)]:.3f}]" for k in kshow])
    parts.append("<h2>score@k</h2>" + _table(["group", "budget"] + [f"k={k}" for k in kshow], rows))
    parts.append(f"<h2>Every run by both rules</h2><p>The tables above are {html.escape(rule_title(c))}.</p>"
                 + _table(RULES_COLUMNS, rules_rows(c)))
    parts.append("<h2>Runs</h2>" + _table(
        ["run", "kind", "env", "group", "finished", "scorings", "working h", f"final@{fmt_budget(c.budget)}", "normalized",
         "start → reference", "anchors"],
        [[r[0], r[1], r[3], r[4], "yes" if r[6] else "no", r[7], f"{r[8] / HOUR:.2f}",
          "–" if math.isnan(r[9]) else f"{r[9]:.4g}", f"{r[10]:.2f}", f"{r[11]:g} → {r[12]:g}", r[15]] for r in run_rows(c)]))
    parts.append(METHOD_HTML + "</body></html>\n")
    return "".join(parts)


def write_html(c: Comparison, path: Path, png: bytes | None = None, warnings: Sequence[str] = ()) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(c, png, warnings), encoding="utf-8")
    return path
