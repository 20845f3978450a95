"""The paper's view: score@k by time budget for each model, beside the human cohort at the same
working times.

RE-Bench's figures put agents given a time budget ``T`` (and ``k`` attempts of it) beside human
experts after ``T`` of working time. Here, for every model and every budget its runs were given
(:attr:`Run.budget_s`, METR's ``time_limit``):

- **agents**: score@1 and score@K of that model's runs of that budget (``K``: the fewest runs it
  has on any of its environments at that budget), each run's final score, averaged over the
  environments it has runs of (:func:`.analysis.score_at_k`);
- **humans**: the human sessions of the same environments, each by its counting score after
  ``T`` working seconds (its best-so-far, by the comparison's rule), as score@1 (their mean) and
  score@K, averaged over the environments the humans have sessions of among those.

Every run is read by the comparison's one counting rule (:attr:`Comparison.rule_words`), which
the tables name. Runs without a budget of their own (other agent logs) are not in this view.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .analysis import Comparison, score_at_k

HOUR = 3600.0


@dataclass(frozen=True)
class PaperRow:
    budget_s: float
    model: str
    envs: tuple[str, ...]
    n_runs: int
    k: int  # K: the fewest runs the model has on one of these environments at this budget
    agent_at_1: float
    agent_at_k: float
    n_humans: int
    human_envs: tuple[str, ...]
    human_at_1: float
    human_at_k: float
    run_ids: tuple[str, ...]  # the agent runs counted (their rows are named in the runs table)


def paper_rows(c: Comparison, n_boot: int = 0) -> list[PaperRow]:
    """One row per (budget, model) of the runs that carry a budget, budgets ascending."""
    by: dict[tuple[float, str], list] = {}
    for r in c.runs:
        if not r.human and r.budget_s is not None:
            by.setdefault((r.budget_s, r.group), []).append(r)
    humans = [r for r in c.runs if r.human]
    rows = []
    for (budget, model), runs in sorted(by.items()):
        envs = tuple(sorted({r.env_id for r in runs}))
        k = min(sum(1 for r in runs if r.env_id == e) for e in envs)
        ks = (1, k) if k > 1 else (1,)
        a = score_at_k(runs, ks, None, group=model, n_boot=n_boot)
        hs = [r for r in humans if r.env_id in envs]
        h = score_at_k(hs, ks, budget, group="human", n_boot=n_boot) if hs else None
        rows.append(PaperRow(budget, model, envs, len(runs), k, a.at(1), a.at(k),
                             len(hs), tuple(sorted({r.env_id for r in hs})),
                             h.at(1) if h else math.nan, h.at(k) if h else math.nan,
                             tuple(r.run_id for r in runs)))
    return rows


def _f(x: float) -> str:
    return "–" if not math.isfinite(x) else f"{x:.2f}"


def _budget(b: float) -> str:
    return f"{b / HOUR:g}h" if b >= HOUR else f"{b / 60:g}m"


COLUMNS = ["budget", "model", "runs", "envs", "agents score@1", "agents score@K (K)", "humans at the same working time",
           "humans score@1", "humans score@K"]


def table_rows(rows: list[PaperRow]) -> list[list[str]]:
    return [[_budget(p.budget_s), p.model, str(p.n_runs), ", ".join(p.envs), _f(p.agent_at_1),
             f"{_f(p.agent_at_k)} ({p.k})", f"{p.n_humans} session(s)" + (f" on {', '.join(p.human_envs)}" if p.n_humans else ""),
             _f(p.human_at_1), _f(p.human_at_k)] for p in rows]


def title(c: Comparison) -> str:
    return ("the paper's view: score@k by time budget, agents beside humans after the same working time "
            f"(mean normalized score over environments) — counted by {c.rule_words}")


def draw(ax, c: Comparison, rows: list[PaperRow], colors) -> None:
    """The matplotlib panel: score@1 against the budget per model, humans at the same times."""
    models = sorted({p.model for p in rows})
    for m in models:
        ps = [p for p in rows if p.model == m]
        xs = [p.budget_s / HOUR for p in ps]
        ax.plot(xs, [p.agent_at_1 for p in ps], marker="o", color=colors(m), label=f"{m} score@1")
        if any(p.k > 1 for p in ps):
            ax.plot(xs, [p.agent_at_k for p in ps], marker="^", linestyle="--", color=colors(m), label=f"{m} score@K")
    budgets = sorted({p.budget_s for p in rows})
    hum = [(b / HOUR, next(p.human_at_1 for p in rows if p.budget_s == b)) for b in budgets]
    hum = [(x, y) for x, y in hum if math.isfinite(y)]
    if hum:
        ax.plot([x for x, _ in hum], [y for _, y in hum], marker="s", color="black", label="humans at that working time")
    ax.axhline(1.0, color="0.4", linestyle="--", linewidth=0.8)
    ax.set_xlim(0, max(budgets) / HOUR * 1.15)
    ax.set_xlabel("time budget (hours)")
    ax.set_ylabel("mean normalized score")
    ax.set_title(f"score@k by time budget — {c.rule_words}", fontsize=9.5)
    ax.set_ylim(bottom=-0.05)
    ax.grid(alpha=0.25)
    ax.legend(fontsize=7, loc="best")
