"""One attempt at one environment, whoever made it: the common shape every importer produces.

A :class:`Run` is a list of scorings ``(working seconds, score)`` in order, plus what the
comparison needs to read them: the environment's direction and aggregation rule, and the
anchors (start and reference scores, with where they come from) that its normalization maps to
0 and 1 (:class:`EnvInfo`).

**Each run is normalized by the anchors of the setting it was scored in** (:class:`EnvResolver`):

- a human session by the anchors it recorded (session.json: published, measured by the project
  or calibrated on its host; older sessions: their two numbers, kind ``recorded``);
- a run whose log carries anchors of its own (rebench-tui's exports, a log with
  ``start_score``/``reference_score``) by those;
- a METR, Vivaria or Inspect run of a METR task by METR's published anchors
  (``environments/published.toml``), never by this machine's calibration or manifest: those
  describe another setting (other GPUs, models, data, judges);
- a run of an environment METR never published by the catalog profile's anchors (``--profile``).

``--anchors published|calibrated|FILE`` replaces all of these (``override``); where it cannot
(no published figure, no calibration here, no entry in the file) the run keeps its own and a
warning says so. The environments' scoring rules come from the same published table, and from
the catalog for environments it adds.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from ..catalog.anchors import PUBLISHED_FILE, Anchors, AnchorsError, Published, load_published
from ..catalog.setting import recorded_differences
from ..errors import RebenchError
from ..scoring import Aggregation, Direction, Rule

if TYPE_CHECKING:
    from ..catalog import Catalog


class CompareError(RebenchError):
    """A source could not be read into runs."""


class UnknownEnvironment(CompareError):
    """A task name that maps to no environment."""


class SourceKind(StrEnum):
    HUMAN_SESSION = "human session"
    INSPECT = "inspect log"
    VIVARIA = "vivaria json"
    PUBLISHED = "METR published run"


HUMAN_LABEL = "human"
OVERRIDES = ("published", "calibrated")


@dataclass(frozen=True)
class EnvInfo:
    """An environment's scoring rule and the anchors one run is normalized with."""

    env_id: str
    family: str
    direction: Direction
    aggregation: Aggregation
    anchors: Anchors
    title: str = ""
    origin: str = "published"  # where the rule came from: published | catalog:<profile> | session:<profile> | log
    timing: bool = False  # the score is a time: a failed re-score counts against its attempt (scoring.Rule)

    @property
    def start(self) -> float:
        return self.anchors.start

    @property
    def reference(self) -> float:
        return self.anchors.reference

    def normalize(self, score: float) -> float:
        return self.anchors.normalize(score)

    def with_anchors(self, anchors: Anchors) -> "EnvInfo":
        return EnvInfo(self.env_id, self.family, self.direction, self.aggregation, anchors, self.title, self.origin,
                       self.timing)

    @property
    def rule(self) -> Rule:
        return Rule(self.aggregation, self.direction, failures_count=self.timing)


def default_published() -> Published | None:
    """The published table of this checkout (``environments/published.toml``), if it reads."""
    from ..config import PACKAGE_ROOT

    table, _problems = load_published(PACKAGE_ROOT / "environments" / PUBLISHED_FILE)
    return table


def published_environments(published: Published | None = None) -> tuple[EnvInfo, ...]:
    """The environments METR published, with their published anchors."""
    table = published if published is not None else default_published()
    if table is None:
        return ()
    return tuple(EnvInfo(p.env_id, p.family, p.direction, p.aggregation, p.anchors(), p.title, "published")
                 for p in table.envs.values())


def _key(name: str) -> str:
    return name.strip().lower()


def read_anchors_file(path: Path) -> dict[str, Anchors]:
    """Anchors by environment id from ``--anchors FILE``: a calibration file (``rebench-tui
    calibrate`` writes them: one environment) or a TOML/JSON table ``{env_id: {start, reference}}``
    (``[environments.<id>]`` as in published.toml, or at the top level)."""
    from ..catalog.calibration import Calibration

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CompareError(f"--anchors {path}: cannot be read: {exc}",
                           fix="name a calibration file (~/.config/rebench-tui/calibration/ENV/PROFILE.json) or a TOML "
                               "file of [environments.<id>] start/reference tables") from None
    data: Any
    try:
        data = json.loads(text)
    except ValueError:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise CompareError(f"--anchors {path}: neither JSON nor TOML ({exc})") from None
    if isinstance(data, dict) and "env_id" in data and "start" in data and isinstance(data["start"], dict):
        try:
            cal = Calibration.model_validate(data)
        except Exception as exc:  # noqa: BLE001 - reported with the file
            raise CompareError(f"--anchors {path}: looks like a calibration file but does not read: "
                               f"{str(exc).splitlines()[0]}") from None
        a = cal.anchors(None, path)
        return {cal.env_id: Anchors(a.start, a.reference, "file", f"from {path}: {a.summary}", a.provenance)}
    table = data.get("environments", data) if isinstance(data, dict) else None
    out: dict[str, Anchors] = {}
    for env_id, row in (table or {}).items():
        if not isinstance(row, dict):
            continue
        try:
            start, ref = float(row["start"]), float(row["reference"])
            out[str(env_id)] = Anchors(start, ref, "file", f"from {path}" + (f": {row['note']}" if row.get("note") else ""),
                                       {"file": str(path), **{k: v for k, v in row.items() if isinstance(v, (str, int, float))}})
        except (KeyError, TypeError, ValueError, AnchorsError) as exc:
            raise CompareError(f"--anchors {path}: [{env_id}] needs numeric start and reference that differ ({exc})") from None
    if not out:
        raise CompareError(f"--anchors {path}: no anchors in it",
                           fix="write [environments.<id>] tables with start and reference, or pass a calibration file")
    return out


class EnvResolver:
    """Maps task names to environments and gives each run its scoring rule and anchors.

    Accepted names (case-insensitive): the environment id (``fix_embedding``), the METR family
    (``ai_rd_fix_embedding``), and ``family/task`` (``ai_rd_fix_embedding/main``).

    ``override``: None (each run by its own setting's anchors, see the module text),
    ``"published"``, ``"calibrated"`` (this host's calibration files in ``config_dir``) or a path
    to an anchors file. Where an override cannot apply, the run keeps its own anchors and
    :attr:`warnings` says so (once per environment).
    """

    def __init__(self, catalog: "Catalog | None" = None, profile: str = "gpu", *, published: Published | None = None,
                 override: str | Path | None = None, config_dir: Path | None = None) -> None:
        self.profile = profile
        self.catalog = catalog
        self.config_dir = config_dir
        if published is None and catalog is not None:
            published = catalog.published
            if published is None and (catalog.root / PUBLISHED_FILE).is_file():
                published, _problems = load_published(catalog.root / PUBLISHED_FILE)
        self.published = published if published is not None else default_published()
        self.override = override
        self.file_anchors: dict[str, Anchors] = {}
        if override is not None and str(override) not in OVERRIDES:
            self.file_anchors = read_anchors_file(Path(override))
        self.warnings: list[str] = []
        self._warned: set[tuple[str, str]] = set()
        self.envs: dict[str, EnvInfo] = {e.env_id: e for e in published_environments(self.published)}
        if catalog is not None:
            from ..catalog.anchors import manifest_anchors

            for env in catalog.environments.values():
                m = env.manifest
                name = profile if profile in m.profiles else env.profile_names[0]
                if env.id in self.envs:  # METR's task: its agent runs keep the published anchors
                    pub = self.envs[env.id]
                    self.envs[env.id] = EnvInfo(env.id, m.family, m.score.direction, m.score.aggregation, pub.anchors,
                                                m.title or pub.title, "published", m.score.timing)
                else:
                    self.envs[env.id] = EnvInfo(env.id, m.family, m.score.direction, m.score.aggregation,
                                                manifest_anchors(env, name), m.title, f"catalog:{name}", m.score.timing)
        self.aliases: dict[str, str] = {}
        for info in self.envs.values():
            self.aliases[_key(info.env_id)] = info.env_id
            self.aliases[_key(info.family)] = info.env_id

    @property
    def known(self) -> list[str]:
        return sorted(self.envs)

    def env_id(self, name: str) -> str:
        """The environment id a task name refers to; raises :class:`UnknownEnvironment`."""
        key = _key(name)
        candidates = [key, key.split("/", 1)[0], re.sub(r"^ai_rd_", "", key.split("/", 1)[0])]
        for c in candidates:
            if c in self.aliases:
                return self.aliases[c]
        raise UnknownEnvironment(
            f"task {name!r} is none of the known environments",
            fix=f"use an environment id or METR family name: {', '.join(self.known)} "
                "(or ai_rd_<id>, optionally with /main); `--task` names it for files that do not",
        )

    def info(self, name: str, own: Anchors | None = None) -> EnvInfo:
        """The rule of a task name, normalized by ``own`` (anchors the run's log carries) if given,
        else by the environment's default for agent runs; then the override, if any."""
        base = self.envs[self.env_id(name)]
        return self.apply(base.with_anchors(own) if own is not None else base)

    def apply(self, info: EnvInfo, profile: str | None = None) -> EnvInfo:
        """``info`` with the override's anchors where the override has some for it."""
        if self.override is None:
            return info
        env_id = info.env_id
        got: Anchors | None = None
        why = ""
        if str(self.override) == "published":
            pub = self.published.get(env_id) if self.published is not None else None
            got = pub.anchors() if pub is not None else None
            why = f"{env_id} has no published figures"
        elif str(self.override) == "calibrated":
            got, why = self._calibrated(env_id, profile or self.profile)
        else:
            got = self.file_anchors.get(env_id)
            why = f"{self.override} has no anchors for {env_id}"
        if got is None:
            key = (env_id, why)
            if key not in self._warned:
                self._warned.add(key)
                self.warnings.append(f"--anchors {self.override}: {why}; its runs keep their own anchors")
            return info
        return info.with_anchors(got)

    def _calibrated(self, env_id: str, profile: str) -> tuple[Anchors | None, str]:
        from ..catalog.calibration import calibration_path, read_calibration_anchors

        if self.config_dir is None:
            return None, "no config folder to look for calibrations in"
        path = calibration_path(self.config_dir, env_id, profile)
        if not path.is_file():
            return None, f"{env_id} ({profile}) is not calibrated on this host (`rebench-tui calibrate {env_id} --profile {profile}`)"
        env = self.catalog.environments.get(env_id) if self.catalog is not None else None
        try:
            return read_calibration_anchors(path, env), ""
        except AnchorsError as exc:
            return None, exc.what


@dataclass(frozen=True)
class Scoring:
    working_s: float
    score: float  # NaN: an invalid attempt
    # The attempt fingerprint of the files it scored, where the source records one (rebench-tui
    # sessions and their exports): scorings that share it are re-scores of one attempt, counted
    # with their median. None: a scoring of its own (agent runs, older sessions).
    fingerprint: str | None = None
    recount: bool = False  # a fresh scoring the workstation took at the finish (scoring.is_recount)

    @property
    def valid(self) -> bool:
        return math.isfinite(self.score)


@dataclass(frozen=True)
class Run:
    """One attempt: scorings in working-time order and the rule that reads them."""

    kind: SourceKind
    run_id: str
    env: EnvInfo
    label: str  # "human" for human attempts, else the agent/model label
    scorings: tuple[Scoring, ...]
    finished: bool
    source: str = ""  # the file or folder it came from
    working_s: float | None = None  # total working time of the attempt, where known
    human: bool = False
    notes: tuple[str, ...] = field(default=(), compare=False)
    # The paper's settings this run was not made in (names; the session or export records the
    # rest: catalog.setting). Empty: the paper's setting, or a log that does not say (METR's own runs).
    setting_differs: tuple[str, ...] = ()
    # Who worked and under which conditions, where the source says (human sessions): the
    # participant's id, whether the internet and AI tools were allowed (AI tools in Vivaria's words).
    participant: str | None = None
    internet: bool | None = None
    ai_tools: str | None = None
    # The rule the run is counted by in a comparison (PAPER or ROBUST): one for every run of it.
    counted_by: str = "paper"
    # The time budget the run was given (seconds), where its source says (METR's published runs:
    # ``time_limit``); its wall-clock start and end (ms since the epoch), where known.
    budget_s: float | None = None
    started_ms: int | None = None
    ended_ms: int | None = None
    # A human session's profile where a comparison keeps it apart from runs of another setting
    # (command.separate_settings): its group is then "human (smoke)", not "human".
    setting_group: str = ""

    @property
    def env_id(self) -> str:
        return self.env.env_id

    @property
    def recounts(self) -> list[bool]:
        return [s.recount for s in self.scorings]

    @property
    def robust_countable(self) -> bool:
        """Whether the robust rule can count this run: some scoring records which files it scored
        (an attempt fingerprint). Without any, re-scores and attempts cannot be told apart."""
        return any(s.fingerprint for s in self.scorings)

    @property
    def group(self) -> str:
        """Who made it, for grouping: ``human`` (``human (smoke)`` for a session kept apart from
        runs of another setting) or the agent label."""
        if not self.human:
            return self.label
        return f"{HUMAN_LABEL} ({self.setting_group})" if self.setting_group else HUMAN_LABEL

    @property
    def duration_s(self) -> float:
        """Working time the attempt lasted: its recorded total, else its last scoring's time."""
        last = self.scorings[-1].working_s if self.scorings else 0.0
        return max(self.working_s or 0.0, last)

    @property
    def scores(self) -> list[float]:
        return [s.score for s in self.scorings]

    @property
    def times(self) -> list[float]:
        return [s.working_s for s in self.scorings]

    @property
    def fingerprints(self) -> list[str | None]:
        return [s.fingerprint for s in self.scorings]


def make_run(kind: SourceKind, run_id: str, env: EnvInfo, label: str, scorings: Iterable[Scoring], *,
             finished: bool, source: str = "", working_s: float | None = None, human: bool = False,
             notes: Iterable[str] = (), setting_differs: Iterable[str] = (), participant: str | None = None,
             internet: bool | None = None, ai_tools: str | None = None) -> Run:
    """A run with its scorings sorted by working time (stable: equal times keep file order)."""
    ordered = tuple(sorted(scorings, key=lambda s: s.working_s))
    return Run(kind, run_id, env, label, ordered, finished, source, working_s, human, tuple(notes), tuple(setting_differs),
               participant, internet, ai_tools)


def setting_differs(meta: dict | None) -> tuple[str, ...]:
    """The names of the paper's settings a run's recorded ``setting`` says it differs in."""
    return tuple(str(d["name"]) for d in recorded_differences(meta.get("setting") if isinstance(meta, dict) else None))
