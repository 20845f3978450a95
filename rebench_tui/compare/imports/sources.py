"""Reading any source a comparison names: session ids, session folders, run files (told apart by
suffix and content), run bundles, published-run files, or folders of any of these; and picking
the runs of some environments out of what was read."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..runs import CompareError, EnvResolver, Run
from .inspect_logs import INSPECT_SUFFIXES, read_inspect_log
from .sessions import is_session_folder, read_human_session
from .vivaria import JSON_SUFFIXES, is_vivaria_bundle, load_json_or_jsonl, read_vivaria, read_vivaria_bundle


def _looks_like_inspect_json(data: Any) -> bool:
    return isinstance(data, dict) and isinstance(data.get("eval"), dict) and "version" in data


def read_file(path: Path, resolver: EnvResolver, *, task: str | None = None, label: str | None = None) -> list[Run]:
    """Runs from one file, told apart by suffix and content."""
    suffix = path.suffix.lower()
    if suffix in INSPECT_SUFFIXES:
        return read_inspect_log(path, resolver, task=task, label=label)
    if suffix in JSON_SUFFIXES:
        data = load_json_or_jsonl(path)
        if _looks_like_inspect_json(data):
            return read_inspect_log(path, resolver, task=task, label=label)
        return read_vivaria(path, resolver, task=task, label=label, data=data)
    raise CompareError(f"{path}: not a run file (expected .eval, .json or .jsonl)")


@dataclass
class Loaded:
    runs: list[Run] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what a source left out on purpose (METR's other suites)

    def add(self, runs: Iterable[Run]) -> None:
        seen = {(r.kind, r.source, r.run_id) for r in self.runs}
        for r in runs:
            if (r.kind, r.source, r.run_id) not in seen:
                self.runs.append(r)
                seen.add((r.kind, r.source, r.run_id))


def _scan(folder: Path) -> list[Path]:
    """Session folders and run files under a folder (session folders are not entered)."""
    found: list[Path] = []
    for p in sorted(folder.iterdir()):
        if p.name.startswith((".", "_")):
            continue
        if is_session_folder(p) or is_vivaria_bundle(p):
            found.append(p)
        elif p.is_dir():
            found += _scan(p)
        elif p.suffix.lower() in INSPECT_SUFFIXES + JSON_SUFFIXES:
            found.append(p)
    return found


def read_path(path: Path, resolver: EnvResolver, *, task: str | None = None, label: str | None = None) -> list[Run]:
    if is_session_folder(path):
        return [read_human_session(path, resolver)]
    if is_vivaria_bundle(path):
        return [read_vivaria_bundle(path, resolver, task=task, label=label)]
    return read_file(path, resolver, task=task, label=label)


def load_sources(sources: Sequence[str | Path], resolver: EnvResolver, *, sessions_dir: Path | None = None,
                 task: str | None = None, label: str | None = None) -> Loaded:
    """Read every source: session ids (looked up in ``sessions_dir``), session folders, run files,
    or folders of any of these. Named sources must read; scanned ones may be skipped (warned)."""
    from ...workstation import find_session

    from ..published_runs import is_published_file, read_published

    loaded = Loaded()

    def read_one(f: Path) -> None:
        if is_published_file(f):
            got = read_published(f, resolver)
            loaded.add(got.runs)
            loaded.notes += got.notes
        else:
            loaded.add(read_path(f, resolver, task=task, label=label))

    for src in sources:
        path = Path(src)
        if not path.exists():
            if path.suffix.lower() in INSPECT_SUFFIXES + JSON_SUFFIXES:  # a run file's name, not a session id
                raise CompareError(f"{src}: no such file (looked in {path.absolute().parent})", kept="nothing was compared",
                                   fix="check the file's name and folder")
            if sessions_dir is None or isinstance(src, Path) or "/" in str(src):
                raise CompareError(f"{src}: no such file, folder or session",
                                   fix="name a session id, a session folder, an .eval/.json/.jsonl file or a folder of them")
            path = find_session(sessions_dir, str(src))
        if path.is_dir() and not is_session_folder(path) and not is_vivaria_bundle(path):
            files = _scan(path)
            if not files:
                loaded.warnings.append(f"{path}: no sessions or run files found")
            for f in files:
                try:
                    read_one(f)
                except CompareError as exc:
                    loaded.warnings.append(f"skipped {f}: {exc.what}")
        else:
            read_one(path)
    return loaded


def filter_runs(runs: Iterable[Run], resolver: EnvResolver, envs: Sequence[str] = (), *,
                finished_only: bool = False) -> list[Run]:
    """Runs of the named environments (any accepted name), finished ones only if asked."""
    runs = list(runs)
    present = {r.env_id for r in runs}
    wanted = {e if e in present else resolver.env_id(e) for e in envs} if envs else None
    out = []
    for r in runs:
        if wanted is not None and r.env_id not in wanted:
            continue
        if finished_only and not r.finished:
            continue
        out.append(r)
    return out
