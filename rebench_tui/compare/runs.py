"""One attempt at one environment, whoever made it: the common shape every importer produces.

A :class:`Run` is a list of scorings ``(working seconds, score)`` in order, plus what the
comparison needs to read them: the environment's direction, aggregation rule and the start and
reference scores that normalization maps to 0 and 1 (:class:`EnvInfo`).

Environment facts come from the catalog (``environments/<id>/environment.toml``, profile ``gpu``
by default) where an environment is there, else from :data:`BUILTIN_ENVIRONMENTS` below: the
published RE-Bench figures (``shared/spec/environments.md``), kept in this one place. Human
sessions carry their own facts in ``session.json`` (the profile they were scored under).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Iterable

from ..errors import RebenchError
from ..scoring import Aggregation, Direction, normalize

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


HUMAN_LABEL = "human"


@dataclass(frozen=True)
class EnvInfo:
    """What scoring rule an environment has: enough to normalize and aggregate its scores."""

    env_id: str
    family: str
    direction: Direction
    aggregation: Aggregation
    start: float
    reference: float
    title: str = ""
    origin: str = "built-in"  # built-in | catalog:<profile> | session

    def normalize(self, score: float) -> float:
        return normalize(score, self.start, self.reference)


def _env(env_id: str, family: str, direction: str, aggregation: str, start: float, reference: float, title: str) -> EnvInfo:
    return EnvInfo(env_id, family, Direction(direction), Aggregation(aggregation), start, reference, title)


# The seven RE-Bench environments as published (start and reference of the GPU setting).
BUILTIN_ENVIRONMENTS: tuple[EnvInfo, ...] = (
    _env("fix_embedding", "ai_rd_fix_embedding", "lower", "min", 2.2, 0.26, "Fix embedding"),
    _env("optimize_llm_foundry", "ai_rd_optimize_llm_foundry", "lower", "min", 5.6, 4.54, "Optimize LLM Foundry"),
    _env("triton_cumsum", "ai_rd_triton_cumsum", "lower", "min", 1.56, 0.47, "Triton cumsum"),
    _env("small_scaling_law", "ai_rd_small_scaling_law", "higher", "last", 0.24, 0.84, "Scaling law"),
    _env("restricted_mlm", "ai_rd_restricted_mlm", "lower", "min", 1.81, 1.13, "Restricted MLM"),
    _env("nanogpt_chat_rl", "ai_rd_nanogpt_chat_rl", "higher", "max", 0.54, 0.85, "NanoGPT chat RL"),
    _env("rust_codecontests", "ai_rd_rust_codecontests_inference", "higher", "max", 0.0, 0.13, "Rust CodeContests"),
)


def _key(name: str) -> str:
    return name.strip().lower()


class EnvResolver:
    """Maps task names to environments and gives each environment's scoring facts.

    Accepted names (case-insensitive): the environment id (``fix_embedding``), the METR family
    (``ai_rd_fix_embedding``), and ``family/task`` (``ai_rd_fix_embedding/main``).
    """

    def __init__(self, catalog: "Catalog | None" = None, profile: str = "gpu") -> None:
        self.profile = profile
        self.envs: dict[str, EnvInfo] = {e.env_id: e for e in BUILTIN_ENVIRONMENTS}
        if catalog is not None:
            for env in catalog.environments.values():
                m = env.manifest
                prof = env.profile(profile) if profile in m.profiles else env.profile(env.profile_names[0])
                self.envs[env.id] = EnvInfo(env.id, m.family, m.score.direction, m.score.aggregation,
                                            prof.start_score, prof.reference_score, m.title, f"catalog:{prof.name}")
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

    def info(self, name: str) -> EnvInfo:
        return self.envs[self.env_id(name)]


@dataclass(frozen=True)
class Scoring:
    working_s: float
    score: float  # NaN: an invalid attempt
    # The attempt fingerprint of the files it scored, where the source records one (rebench-tui
    # sessions and their exports): scorings that share it are re-scores of one attempt, counted
    # with their median. None: a scoring of its own (agent runs, older sessions).
    fingerprint: str | None = None

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

    @property
    def env_id(self) -> str:
        return self.env.env_id

    @property
    def group(self) -> str:
        """Who made it, for grouping: ``human`` or the agent label."""
        return HUMAN_LABEL if self.human else self.label

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
             notes: Iterable[str] = ()) -> Run:
    """A run with its scorings sorted by working time (stable: equal times keep file order)."""
    ordered = tuple(sorted(scorings, key=lambda s: s.working_s))
    return Run(kind, run_id, env, label, ordered, finished, source, working_s, human, tuple(notes))
