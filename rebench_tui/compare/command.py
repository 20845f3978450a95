"""What ``rebench-tui compare`` does, below the command line: gather runs, then write the reports.

Which human sessions are compared: the sessions named among the sources (ids, folders, or
folders of sessions), every session in each ``--humans`` folder, and, when neither gave any
human run, every session in the sessions folder (unless ``--no-humans``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Sequence

from ..clock import parse_duration
from .analysis import Comparison
from .imports import Loaded, filter_runs, load_sources, read_human_session, read_sessions_dir
from .runs import CompareError, EnvResolver, Run
from .scale import onto_published
from .who import HumanFilter

NO_BUDGET = ("none", "all", "0")


def parse_budget(text: str) -> float | None:
    """Seconds from ``8h``/``90m``/``3600``; ``none`` (or ``all``) means the whole run."""
    if text.strip().lower() in NO_BUDGET:
        return None
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise CompareError(f"--budget {text!r}: {exc}", fix="use e.g. --budget 2h --budget 8h, or --budget none") from exc


def resolver_for(settings, profile: str = "gpu", anchors: str | None = None) -> EnvResolver:
    """Environment facts from the catalog where it loads, else from the published table alone.
    ``anchors``: the ``--anchors`` override (published, calibrated or a file), None for each
    run's own setting."""
    from ..catalog.anchors import PUBLISHED_FILE, load_published

    published, _problems = load_published(settings.environments / PUBLISHED_FILE)
    try:
        from .. import workstation

        cat = workstation.catalog(settings)
    except Exception:  # noqa: BLE001 - the published table still serves every RE-Bench environment
        cat = None
    return EnvResolver(cat, profile=profile, published=published, override=anchors, config_dir=settings.config_dir)


@dataclass
class Gathered:
    runs: list[Run] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # Lines printed beside the table, not only on stderr: the one scale published runs put every
    # run on, and how the settings differ (compare.scale).
    beside: list[str] = field(default_factory=list)


def run_setting(run: Run) -> str | None:
    """The profile a run was made in: a session's own (origin ``session:<profile>``), the catalog
    profile an agent run was read by (``catalog:<profile>``), gpu for a run of METR's published
    tasks; None for a log that carries its own rule and says nothing of its setting."""
    origin = run.env.origin or ""
    kind, _, profile = origin.partition(":")
    if kind in ("session", "catalog") and profile:
        return profile
    return "gpu" if kind == "published" else None


def separate_settings(runs: Sequence[Run]) -> tuple[list[Run], list[Run]]:
    """Human sessions of a profile other than gpu, on an environment where the comparison also
    holds runs of another setting (GPU sessions, agent runs), become a group of their own
    ("human (smoke)"), so no group averages a CPU smoke session with H100 runs. Where an
    environment's runs all share one profile (a smoke-only comparison), nothing changes.
    Returns the runs (in order) and those set apart."""
    by_env: dict[str, set[str | None]] = {}
    for r in runs:
        setting = run_setting(r)
        if setting is not None:
            by_env.setdefault(r.env_id, set()).add(setting)
    out, apart = [], []
    for r in runs:
        p = run_setting(r)
        if r.human and p not in (None, "gpu") and len(by_env.get(r.env_id, ())) > 1:
            r = replace(r, setting_group=p)
            apart.append(r)
        out.append(r)
    return out, apart


def _keep_settings_apart(out: "Gathered") -> None:
    out.runs, apart = separate_settings(out.runs)
    if apart:
        out.notes.append(f"{len(apart)} human session(s) of a profile other than gpu are a group of their own "
                         f"({', '.join(sorted({r.group for r in apart}))}), not beside the GPU setting's runs "
                         "(--mix-profiles puts them in one group)")


def gather(sources: Sequence[str], resolver: EnvResolver, *, sessions_dir: Path, humans_dirs: Sequence[Path] = (),
           no_humans: bool = False, envs: Sequence[str] = (), finished_only: bool = False, task: str | None = None,
           label: str | None = None, paper_setting_only: bool = False, runs: Sequence[Run] = (),
           who: HumanFilter | None = None, mix_profiles: bool = False) -> Gathered:
    """``runs``: runs read elsewhere (a study's witnessed sessions), compared with the sources'.
    ``mix_profiles``: keep human sessions of a smaller profile in the one ``human`` group with
    those of the GPU setting (by default they form a group of their own: separate_settings)."""
    loaded = load_sources(sources, resolver, sessions_dir=sessions_dir, task=task, label=label)
    loaded.add(runs)
    for folder in humans_dirs:
        if not folder.is_dir():
            raise CompareError(f"--humans {folder}: no such folder")
        _add_sessions(loaded, folder, resolver)
    out = Gathered(warnings=list(loaded.warnings), notes=list(loaded.notes))
    if not no_humans and not humans_dirs and not any(r.human for r in loaded.runs):
        before, warned = len(loaded.runs), len(loaded.warnings)
        _add_sessions(loaded, sessions_dir, resolver)
        out.warnings += loaded.warnings[warned:]  # a session that does not read is said, not silently left out
        added = len(loaded.runs) - before
        if added:
            out.notes.append(f"added {added} human session(s) from {sessions_dir} (--no-humans leaves them out)")
    out.runs = filter_runs(loaded.runs, resolver, envs, finished_only=finished_only)
    if who is not None and who.active:
        dropped = [r for r in out.runs if not who.keeps(r)]
        out.runs = [r for r in out.runs if who.keeps(r)]
        out.notes.append(f"left out {len(dropped)} human session(s) not matching {who.words()} (agent runs are kept)")
    off = [r for r in out.runs if r.setting_differs]
    if paper_setting_only and off:
        out.runs = [r for r in out.runs if not r.setting_differs]
        out.notes.append(f"left out {len(off)} run(s) not made in the paper's setting (--paper-setting-only): "
                         + ", ".join(f"{r.run_id} ({', '.join(r.setting_differs)})" for r in off[:10])
                         + (" …" if len(off) > 10 else ""))
    elif off:
        out.warnings += [f"{r.run_id}: not in the paper's setting: differs in {', '.join(r.setting_differs)} "
                         "(`rebench-tui list -v` says how; --paper-setting-only leaves such runs out)" for r in off]
    if not mix_profiles:
        _keep_settings_apart(out)
    for r in out.runs:
        out.notes += [f"{r.run_id}: {n}" for n in r.notes if n.startswith(("profile", "sealed"))]  # sealed: no key set
    out.runs, out.beside = onto_published(out.runs, resolver)
    out.beside = [n for n in out.notes if "METR's published results" in n or "fatal error" in n] + out.beside
    out.warnings += resolver.warnings
    if not out.runs:
        raise CompareError("no runs to compare" + (" after --env/--finished-only/--paper-setting-only" if loaded.runs else ""),
                           kept="; ".join(filter(None, [f"{len(out.warnings)} warning(s) above" if out.warnings else "",
                                                        *[n for n in out.notes if n.startswith("left out")]])) or None,
                           fix="name session ids or folders, Inspect .eval/.json logs, or Vivaria .json/.jsonl files "
                               "(see `rebench-tui compare --help`)")
    return out


def compare_beside_session(folder: Path, env, profile: str, agent_runs: str | None, *, n_boot: int = 200) -> Comparison:
    """The comparison a session's screen shows: this environment's human sessions (the session's
    own folder's neighbours, itself included) and any agent runs in ``agent_runs``."""
    from ..catalog import Catalog
    from .analysis import compare

    resolver = EnvResolver(Catalog(root=env.path.parent, environments={env.id: env}), profile=profile)
    got = gather([agent_runs] if agent_runs else [], resolver, sessions_dir=folder.parent,
                 humans_dirs=[folder.parent] if agent_runs else [], envs=[env.id])
    return compare(got.runs, n_boot=n_boot)


def _add_sessions(loaded: Loaded, folder: Path, resolver: EnvResolver | None = None) -> None:
    for p in read_sessions_dir(folder):
        try:
            loaded.add([read_human_session(p, resolver)])
        except CompareError as exc:
            loaded.warnings.append(f"skipped {p}: {exc.what}" + (f" (next: {exc.fix})" if exc.fix else ""))


def write_reports(c: Comparison, out_dir: Path, *, png: bool, html: bool, csv: bool,
                  warnings: Sequence[str] = ()) -> list[Path]:
    from . import report

    written: list[Path] = []
    image = report.render_png(c) if (png or html) else None
    if png:
        out_dir.mkdir(parents=True, exist_ok=True)
        path = out_dir / "compare.png"
        path.write_bytes(image or b"")
        written.append(path)
    if html:
        written.append(report.write_html(c, out_dir / "compare.html", image, warnings))
    if csv:
        written += report.write_csv(c, out_dir)
    return written
