"""The environment manifest (``environment.toml``) as typed, validated data."""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, model_validator

from ..clock import DEFAULT_TIME_LIMIT_S, check_time_limit, parse_duration
from ..scoring import Aggregation, Direction
from .paper_figures import timeout_problems
from .setting import PaperSpec, ProfileSetting, SettingRow, check_profiles, on_fewer_gpus, setting_rows

if TYPE_CHECKING:
    from .published import PublishedEnv

PROFILE_NAMES = ("gpu", "smoke")


def _duration(value: Any) -> float:
    return parse_duration(value)


def parse_size(value: Any) -> int:
    """Bytes from ``100g``, ``512m``, ``2G``, or a plain integer of bytes."""
    if isinstance(value, bool):
        raise ValueError("a size must be a number of bytes or a string like 16g")
    if isinstance(value, int):
        size = value
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)i?b?\s*", str(value), re.IGNORECASE)
        if not m:
            raise ValueError(f"not a size: {value!r} (use e.g. 16g, 512m)")
        mult = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40}[m.group(2).lower()]
        size = int(float(m.group(1)) * mult)
    if size <= 0:
        raise ValueError("a size must be positive")
    return size


Duration = Annotated[float, BeforeValidator(_duration)]
Size = Annotated[int, BeforeValidator(parse_size)]


_PLAIN_NAME = re.compile(r"(?!\.\.?$)[^/\x00]+")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# A runaway job must not take the host down: every container has a process limit (a fork bomb
# stops at it) and an open-files limit, whatever the manifest says.
DEFAULT_PIDS = 4096
DEFAULT_OPEN_FILES = 16384


class Resources(_Strict):
    gpus: int = Field(0, ge=0)
    cpus: float | None = Field(None, gt=0)
    memory: Size | None = None
    pids: int = Field(DEFAULT_PIDS, ge=64, le=1 << 20, description="most processes and threads in the container")
    open_files: int = Field(DEFAULT_OPEN_FILES, ge=256, le=1 << 20, description="open files per process")


class ResourceOverride(_Strict):
    gpus: int | None = Field(None, ge=0)
    cpus: float | None = Field(None, gt=0)
    memory: Size | None = None
    pids: int | None = Field(None, ge=64, le=1 << 20)
    open_files: int | None = Field(None, ge=256, le=1 << 20)


class ScoreSpec(_Strict):
    direction: Direction
    aggregation: Aggregation
    visibility: Literal["visible", "hidden"] = "visible"
    description: str = Field(min_length=1)
    scorer: str = Field(min_length=1, description="script in protected/, run by the container's python3")
    timeout: Duration = 600.0
    user: str = "root"
    # The score is a measured time (noisy from one scoring to the next): a failed re-score then
    # counts against its attempt, which counts with its worst valid scoring.
    timing: bool = False
    # Fresh scorings of the leading attempt the finish takes, from the snapshot kept when it was
    # scored; their median is the score that counts (0: none, the in-session rule counts).
    recount: int = Field(0, ge=0, le=25)
    # Files the scoring room's ~/assets holds in place of the participant's: a file name directly
    # under ~/assets -> a held-out file under the protected assets (same kind, never shown). The
    # participant's work then runs, when scored, on inputs it never saw: weights or answers kept
    # from an earlier run cannot match what the scorer compares them with.
    room_assets: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _plain_room_assets(self) -> "ScoreSpec":
        for name, held_out in self.room_assets.items():
            if not _PLAIN_NAME.fullmatch(name):
                raise ValueError(f"room_assets: {name!r} must be a file name directly under ~/assets (no '/', not '.' or '..')")
            parts = PurePosixPath(held_out).parts
            if not parts or held_out.startswith("/") or any(p in ("..", ".") for p in parts):
                raise ValueError(f"room_assets: {held_out!r} must be a relative path inside the protected assets")
        return self


class AssetsSpec(_Strict):
    prepare: str = Field(min_length=1, description="script in the environment folder that builds the assets")


class TimeSpec(_Strict):
    # the paper's 8 h by default; at most 7 days (clock.MAX_TIME_LIMIT_S), as for --time-limit
    limit: Annotated[float, BeforeValidator(lambda v: check_time_limit(_duration(v)))] = DEFAULT_TIME_LIMIT_S


def _home_relative(value: str) -> str:
    p = PurePosixPath(value)
    if not value or p.is_absolute() or ".." in p.parts or "\0" in value:
        raise ValueError(f"{value!r} must be a path inside the participant's home (relative, no '..')")
    return value


HomePath = Annotated[str, BeforeValidator(lambda v: _home_relative(str(v)))]


class SetupSpec(_Strict):
    """How one solution is put in place in a fresh session before it is scored: repository files
    copied into the participant's home, then an optional command run as the participant."""

    # home path (relative) -> path in the environment folder (a file, or a folder merged into place)
    files: dict[HomePath, str] = Field(default_factory=dict)
    command: list[str] | None = Field(None, min_length=1, description="argv; `python3` is the sandbox's interpreter")
    workdir: str = Field("", description="where the command runs, relative to the home ('' = the home)")
    timeout: Duration = 1800.0

    @model_validator(mode="after")
    def _workdir_inside(self) -> "SetupSpec":
        if self.workdir:
            _home_relative(self.workdir)
        return self


class Tolerance(_Strict):
    """How far a fresh calibration's medians may lie from the manifest's figures (the noise of this
    profile's scores between prepares and machines); CI checks the figures against it."""

    start: float = Field(ge=0)
    reference: float = Field(ge=0)


class CalibrationSpec(_Strict):
    """What ``rebench-tui calibrate`` runs for a profile, as data: the reference solution (and any
    step the starting one needs), or why the profile cannot be calibrated on this project's
    machines."""

    unavailable: str = Field("", description="why it cannot run here (no hub weights, a paid API): calibrate refuses, naming it")
    start: SetupSpec = Field(default_factory=SetupSpec)
    reference: SetupSpec | None = None
    tolerance: Tolerance | None = None
    # Secrets that only a stand-in service checks (any value works): drawn at random for a
    # calibration when the user supplied none.
    random_secrets: list[Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9_]*$")]] = Field(default_factory=list)

    @model_validator(mode="after")
    def _reference_unless_unavailable(self) -> "CalibrationSpec":
        if not self.unavailable and self.reference is None:
            raise ValueError("give calibration.reference (how the reference solution is set up), or calibration.unavailable (why it cannot run here)")
        return self


class StandInSpec(_Strict):
    """What stands in for the outside service a profile's secrets reach (an LLM judge, a code model),
    for a rehearsal without it: ``start --stand-ins``. Its services start before the profile's own,
    the secrets it fixes (loopback endpoints, model names) or draws (keys only a stand-in checks) are
    not asked of the user, and each setting it changes is recorded as a difference from the paper's."""

    why: str = Field(min_length=1, description="what the stand-in is and what its scores mean")
    services: list[Annotated[list[str], Field(min_length=1)]] = Field(min_length=1)
    secrets: dict[Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9_]*$")], str] = Field(default_factory=dict)
    random_secrets: list[Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9_]*$")]] = Field(default_factory=list)
    setting: dict[str, str] = Field(default_factory=dict, description="paper setting -> what the stand-in uses instead")


class ProfileSpec(_Strict):
    description: str = ""
    base_image: str = Field(min_length=1)
    start_score: float
    reference_score: float
    # published: METR's figures (environments/published.toml must hold exactly these);
    # measured: measured by this project (`measured` says how); uncalibrated: a placeholder.
    anchors: Literal["published", "measured", "uncalibrated"] = "measured"
    measured: str = Field("", description="how and where the start and reference scores were measured")
    calibration: CalibrationSpec | None = None
    score_timeout: Duration | None = None
    env: dict[str, str] = Field(default_factory=dict)
    resources: ResourceOverride = Field(default_factory=ResourceOverride)
    # Values the user supplies (API keys, endpoints); they reach only services and <protected>/secrets.env.
    secrets: list[Annotated[str, Field(pattern=r"^[A-Z][A-Z0-9_]*$")]] = Field(default_factory=list)
    # Commands started as root in the sandbox at creation (and on resume when not running): stand-in
    # models, proxies that add a key. Each is an argv list.
    services: list[Annotated[list[str], Field(min_length=1)]] = Field(default_factory=list)
    # How this profile stands on each of the paper's settings ([paper] below): "same" or what and why.
    setting: dict[str, ProfileSetting] = Field(default_factory=dict)
    standins: StandInSpec | None = None
    # Whether the scoring room gets a network: none unless the scorer calls out (a judge's API).
    scoring_network: bool = False

    @model_validator(mode="after")
    def _distinct_scores(self) -> "ProfileSpec":
        if not (math.isfinite(self.start_score) and math.isfinite(self.reference_score)):
            raise ValueError("start_score and reference_score must be finite numbers (not NaN or Infinity)")
        if self.start_score == self.reference_score:
            raise ValueError("start_score and reference_score must differ (normalization divides by their difference)")
        if self.standins is not None and (extra := sorted({*self.standins.secrets, *self.standins.random_secrets} - set(self.secrets))):
            raise ValueError(f"standins set secret(s) the profile does not list in `secrets`: {', '.join(extra)}")
        return self


class Manifest(_Strict):
    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    title: str = Field(min_length=1)
    family: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    version: str = Field(min_length=1)
    task: str = "main"
    summary: str = ""
    score: ScoreSpec
    time: TimeSpec = Field(default_factory=TimeSpec)
    resources: Resources = Field(default_factory=Resources)
    assets: AssetsSpec | None = None
    # Keys are checked per entry so an unknown profile is reported beside every other problem.
    profiles: dict[Literal["gpu", "smoke"], ProfileSpec] = Field(min_length=1)
    # RE-Bench's own setting (baselines, judge, code model, problem set, data), beside each profile's.
    paper: PaperSpec | None = None

    @model_validator(mode="after")
    def _settings_answer_the_paper(self) -> "Manifest":
        problems = check_profiles(self.paper, self.profiles)
        if self.paper is not None:  # scorer timeouts keep headroom over the paper's time for one scoring
            problems += timeout_problems(self.paper.run_and_score, {
                name: spec.score_timeout or self.score.timeout for name, spec in self.profiles.items()})
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def task_id(self) -> str:
        """Vivaria's taskId: ``family/task`` in lower case."""
        return f"{self.family}/{self.task}".lower()


@dataclass(frozen=True)
class Profile:
    """A manifest profile with the environment's resources merged in."""

    name: str
    base_image: str
    start_score: float
    reference_score: float
    measured: str
    score_timeout: float
    env: dict[str, str]
    gpus: int
    cpus: float | None
    memory: int | None
    secrets: tuple[str, ...] = ()
    services: tuple[tuple[str, ...], ...] = ()
    pids: int = DEFAULT_PIDS
    open_files: int = DEFAULT_OPEN_FILES
    anchors: str = "measured"  # the kind of the manifest's figures: published | measured | uncalibrated
    calibration: CalibrationSpec | None = None
    setting: tuple[SettingRow, ...] = ()  # the paper's settings beside this profile's (setting.py)
    standins: StandInSpec | None = None   # what `start --stand-ins` puts in place of outside services
    standing_in: bool = False             # this profile runs with them (with_standins)
    scoring_network: bool = False         # the scoring room has a network (else none: its own loopback only)

    @property
    def differences(self) -> tuple[SettingRow, ...]:
        return tuple(r for r in self.setting if not r.same)

    def on_gpus(self, n: int | None) -> "Profile":
        """This profile on ``n`` GPUs instead of its own count (a rehearsal on a smaller machine):
        the setting rows say so. ``None`` or the profile's own count: unchanged. More GPUs than the
        profile asks for, or GPUs for a profile that uses none, are refused."""
        if n is None or n == self.gpus:
            return self
        if self.gpus == 0 or n < 1 or n > self.gpus:
            raise ValueError(f"profile {self.name!r} asks for {self.gpus} GPU(s); --gpus can only lower that, "
                             f"to between 1 and {self.gpus}" if self.gpus else f"profile {self.name!r} uses no GPU")
        return replace(self, gpus=n, setting=on_fewer_gpus(self.setting, self.gpus, n))

    def with_standins(self, on: bool = True) -> "Profile":
        """This profile with its stand-ins for outside services (``standins``) in place; refused
        where it has none."""
        if not on or self.standing_in:
            return self
        if self.standins is None:
            raise ValueError(f"profile {self.name!r} has no stand-ins (it needs no outside service, or none is written)")
        st = self.standins
        rows = tuple(SettingRow(r.name, r.paper, st.setting[r.name], st.why, r.source) if r.name in st.setting else r
                     for r in self.setting)
        return replace(self, services=tuple(tuple(c) for c in st.services) + self.services, setting=rows, standing_in=True)

    def standin_secrets(self) -> dict[str, str]:
        """The secrets the stand-ins fix or draw (empty unless ``standing_in``)."""
        import secrets as _random

        if not self.standing_in or self.standins is None:
            return {}
        return {**self.standins.secrets, **{n: "standin-" + _random.token_hex(16) for n in self.standins.random_secrets}}


@dataclass(frozen=True)
class Rehearsal:
    """How a session departs from its profile to rehearse where the paper's machine is not at hand:
    fewer GPUs (``start --gpus N``) and stand-ins for outside services (``start --stand-ins``). Both
    are recorded (session.json, the setting's differences) and shown."""

    gpus: int | None = None
    standins: bool = False

    def apply(self, profile: Profile) -> Profile:
        return profile.on_gpus(self.gpus).with_standins(self.standins)

    @classmethod
    def of(cls, gpus: int | None, metadata: dict[str, Any]) -> "Rehearsal":
        """The rehearsal a session recorded (its ``gpus`` and metadata)."""
        return cls(gpus, bool(metadata.get("standins")))


@dataclass(frozen=True)
class Environment:
    """One loaded, validated environment folder."""

    path: Path
    manifest: Manifest
    instructions: str
    # METR's published figures for this environment (environments/published.toml), if any
    published: "PublishedEnv | None" = None

    @property
    def id(self) -> str:
        return self.manifest.id

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    @property
    def protected_dir(self) -> Path:
        return self.path / "protected"

    @functools.cached_property
    def scorer_sha256(self) -> str:
        """The digest a scorer of this environment reports over its own files (the scorer
        helpers' ``identity`` module computes the same in the container)."""
        from ..hashing import scorer_digest

        return scorer_digest(self.protected_dir)

    @property
    def dockerfile(self) -> Path:
        return self.path / "Dockerfile"

    @property
    def profile_names(self) -> list[str]:
        return [p for p in PROFILE_NAMES if p in self.manifest.profiles]

    def profile(self, name: str) -> Profile:
        try:
            spec = self.manifest.profiles[name]
        except KeyError:
            raise KeyError(f"environment {self.id!r} has no profile {name!r}; it has {self.profile_names}") from None
        base, over = self.manifest.resources, spec.resources
        return Profile(
            name=name,
            base_image=spec.base_image,
            start_score=spec.start_score,
            reference_score=spec.reference_score,
            measured=spec.measured,
            score_timeout=spec.score_timeout or self.manifest.score.timeout,
            env=dict(spec.env),
            gpus=base.gpus if over.gpus is None else over.gpus,
            cpus=over.cpus if over.cpus is not None else base.cpus,
            memory=over.memory if over.memory is not None else base.memory,
            pids=over.pids if over.pids is not None else base.pids,
            open_files=over.open_files if over.open_files is not None else base.open_files,
            secrets=tuple(spec.secrets),
            services=tuple(tuple(cmd) for cmd in spec.services),
            anchors=spec.anchors,
            calibration=spec.calibration,
            setting=setting_rows(self.manifest.paper, spec.setting),
            standins=spec.standins,
            scoring_network=spec.scoring_network,
        )
