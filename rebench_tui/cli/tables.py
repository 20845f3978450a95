"""The tables the commands print: environments (brief and -v), a profile's setting beside the
paper's, and the sessions; ids in them are never cut."""

from __future__ import annotations


from rich.markup import escape
from rich.table import Table

from ..clock import format_hms
from ..config import Settings
from .common import _anchors_here


def _id_column(t: Table, name: str, ids) -> None:
    """A column of ids: never cut, never wrapped (ids are what users copy); others give way."""
    t.add_column(name, no_wrap=True, overflow="ignore", min_width=max([len(name), *(len(i) for i in ids)]))


def _environments_brief(cat, settings: Settings) -> Table:
    """The environments in four columns that stay whole in an 80-column terminal (-v has the rest)."""
    t = Table(title="environments (rebench-tui list -v: titles, tasks, where the anchors come from)")
    _id_column(t, "id", cat.environments)
    t.add_column("better", no_wrap=True)
    t.add_column("start → reference", no_wrap=True)
    t.add_column("time", no_wrap=True)
    for env in cat.environments.values():
        score = env.manifest.score
        lines = []
        for p in map(env.profile, env.profile_names):
            a, _problem = _anchors_here(env, p.name, settings)
            start, ref = (a.start, a.reference) if a is not None else (p.start_score, p.reference_score)
            lines.append(f"{p.name} {start:.4g} → {ref:.4g}")
        t.add_row(env.id, score.direction.value + (", hidden" if score.visibility == "hidden" else ""), "\n".join(lines),
                  format_hms(env.manifest.time.limit))
    return t


def _environments_table(cat, settings: Settings) -> Table:
    t = Table(title=f"environments in {settings.environments}")
    _id_column(t, "id", cat.environments)
    t.add_column("title")
    t.add_column("METR task", overflow="fold")  # an id too: folded onto lines when narrow, never cut
    for col in ("score", "profiles: start → reference (GPUs), anchors", "time"):
        t.add_column(col)
    for env in cat.environments.values():
        m = env.manifest
        lines = []
        for p in map(env.profile, env.profile_names):
            a, _problem = _anchors_here(env, p.name, settings)
            start, ref = (a.start, a.reference) if a is not None else (p.start_score, p.reference_score)
            tag = (a.kind if a.kind != "calibrated" else a.tag) if a is not None else "calibration file unreadable"
            n = len(p.differences)
            lines.append(f"{p.name}: {start:.4g} → {ref:.4g} ({p.gpus}), {tag}"
                         + ("" if not p.setting else ", paper's setting" if not n else f", {n} setting(s) differ"))
        t.add_row(env.id, m.title, f"{m.task_id} {m.version}", f"{m.score.direction.value} is better, {m.score.aggregation.value}"
                  + (", hidden" if m.score.visibility == "hidden" else ""), "\n".join(lines), format_hms(m.time.limit))
    return t


def _setting_table(env) -> Table | str:
    """The paper's setting beside each profile's, every difference named with why (list -v)."""
    paper = env.manifest.paper
    if paper is None:
        return f"  [bold]{env.id}[/bold]: the manifest states no paper setting (no [paper] table)\n"
    profiles = [env.profile(name) for name in env.profile_names]
    t = Table(title=f"{env.id}: the paper's setting ({escape(paper.source)}) beside this project's", title_justify="left",
              show_lines=True, expand=True)
    t.add_column("setting", no_wrap=True)
    t.add_column("paper")
    for p in profiles:
        t.add_column(p.name)
    for (name, ps), *rows in zip(paper.settings.items(), *(p.setting for p in profiles)):  # setting_rows keeps the order
        t.add_row(name, escape(ps.paper) + f" [dim]({escape(ps.cited)})[/dim]",
                  *("[green]same[/green]" if r.same else f"[yellow]differs:[/yellow] {escape(r.here)} — {escape(r.why)}"
                    for r in rows))
    return t


def _sessions_table(rows: list[dict], settings: Settings, verbose: bool, damaged: dict[str, str] | None = None) -> Table:
    """Id (which starts with the environment's), status, working time and final score: whole in 80
    columns; -v adds environment, profile, runtime, scorings and the normalized final. A session
    whose session.json does not read (``damaged``) says DAMAGED."""
    damaged = damaged or {}
    t = Table(title=f"sessions in {settings.sessions}")
    _id_column(t, "id", [r["id"] for r in rows])
    cols = ("env", "profile", "runtime", "status", "working", "scores", "final", "normalized") if verbose else (
        "status", "working", "final")
    for col in cols:
        t.add_column(col, no_wrap=not verbose)
    for r in rows:
        fin, norm = r.get("final_score"), r.get("final_normalized")
        cells = {"env": r["env_id"], "profile": r["profile"], "runtime": f"{r['runtime']}@{r['host']}",
                 "status": "DAMAGED" if r["id"] in damaged else r["status"],
                 "working": format_hms(r.get("working_s") or 0), "scores": str(r.get("n_scores") or 0),
                 "final": "" if fin is None else f"{fin:.4g}", "normalized": "" if norm is None else f"{norm:.3g}"}
        t.add_row(r["id"], *(cells[c] for c in cols))
    return t
