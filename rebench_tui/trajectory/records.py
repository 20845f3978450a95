"""What a session folder holds besides the audit log: ``session.json`` and in-memory score records."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Literal

from pydantic import BaseModel, ConfigDict, Field

from ..clock import ClockState
from ..safe_write import write_json

if TYPE_CHECKING:
    from ..scoring import Attempt, Rule

SCHEMA_VERSION = 1

# The session folder's names: one home for what ``Session.create`` makes and every reader opens
# (verify, the exports, the index, compare).
META = "session.json"
AUDIT = "audit.jsonl"
SCORE_LOG = "score_log.csv"
WORKSPACE = "workspace"
STATE = ".state"
FILES_STATE = "files.json"
COMMANDS_STATE = "commands.json"
LOCK = "lock"


class Pause(BaseModel):
    """Vivaria-shaped pause row (``run_pauses_t``): a human's own pause uses reason ``pauseHook``."""

    start: int
    end: int | None = None
    reason: str = "pauseHook"


class ClockModel(BaseModel):
    limit_s: float
    banked_s: float = 0.0
    running_since_wall: float | None = None

    def to_state(self) -> ClockState:
        return ClockState(self.limit_s, self.banked_s, self.running_since_wall)

    @classmethod
    def from_state(cls, st: ClockState) -> "ClockModel":
        return cls(limit_s=st.limit_s, banked_s=st.banked_s, running_since_wall=st.running_since_wall)


# Vivaria's words for whether a human baseliner could use AI tools.
AiTools = Literal["NO_AI_TOOLS", "AI_TOOLS_AVAILABLE", "UNKNOWN_IF_AI_TOOLS_AVAILABLE"]
AI_TOOLS_UNKNOWN = "UNKNOWN_IF_AI_TOOLS_AVAILABLE"


class Participant(BaseModel):
    """Who worked, and under which conditions (RE-Bench's experts could use the internet and AI
    tools). ``None``: not said when the session started."""

    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    internet: bool | None = None
    ai_tools: AiTools = AI_TOOLS_UNKNOWN

    def words(self) -> str:
        internet = {True: "internet allowed", False: "no internet", None: "internet not stated"}[self.internet]
        tools = {"NO_AI_TOOLS": "no AI tools", "AI_TOOLS_AVAILABLE": "AI tools allowed",
                 AI_TOOLS_UNKNOWN: "AI tools not stated"}[self.ai_tools]
        return f"participant {self.id or '(not given)'}, {internet}, {tools}"


def participant_of(pid: str | None, internet: bool | None, ai_tools: str) -> Participant:
    """A participant from the command line's words (``ai_tools``: yes, no or unknown)."""
    tools = {"yes": "AI_TOOLS_AVAILABLE", "no": "NO_AI_TOOLS"}.get(ai_tools, AI_TOOLS_UNKNOWN)
    return Participant(id=(pid or "").strip() or None, internet=internet, ai_tools=tools)  # type: ignore[arg-type]


class SessionMeta(BaseModel):
    """The run's metadata, Vivaria-run-like, rewritten atomically on every change."""

    model_config = ConfigDict(extra="forbid")

    schema_version: int = SCHEMA_VERSION
    id: str
    run_id: int
    env_id: str
    task_id: str
    task_version: str
    title: str
    profile: str
    runtime: str
    host: str
    isolated: bool
    image: str | None = None
    container: str | None = None
    created_at: int
    started_at: int
    completed_at: int | None = None
    status: Literal["active", "finished"] = "active"
    finish_reason: str | None = None
    clock: ClockModel
    pauses: list[Pause] = Field(default_factory=list)
    warnings_given: list[int] = Field(default_factory=list)
    direction: str
    aggregation: str
    visibility: str
    start_score: float
    reference_score: float
    # The anchors start_score and reference_score are, with where they come from (published,
    # measured by the project, calibrated on this host, ...): catalog.anchors.Anchors.to_record().
    # None in sessions recorded before sessions kept it.
    anchors: dict[str, Any] | None = None
    # How the session's profile stands on the paper's setting: catalog.setting.setting_record()
    # ({"paper": source, "same": [names], "differs": [{name, paper, here, why}]}). None: the
    # environment states no paper setting, or the session was recorded before sessions kept it.
    setting: dict[str, Any] | None = None
    score_timeout_s: float
    # GPUs the session's container holds where that is fewer than its profile asks for (a
    # rehearsal: `start --gpus N`; the setting's hardware row says so too). None: the profile's own.
    gpus: int | None = None
    # Who worked and under which conditions (``start --participant/--internet/--ai-tools``).
    participant: Participant = Field(default_factory=Participant)
    # The environment's score is a measured time (its manifest says so): a failed re-score then
    # counts against its attempt (scoring.Rule.failures_count). recount_runs: fresh scorings of
    # the leading attempt the finish takes (0: none). Both False/0 in sessions recorded before.
    timing: bool = False
    recount_runs: int = 0
    submission: str | None = None
    # The score that counts at the finish: the median of the counting attempt's valid scorings
    # (see scoring.counting_attempt). final_attempt names the scoring that stands for that
    # attempt (the one nearest its median); final_scorings lists every valid scoring whose median
    # it is (numbers as final_attempt counts them, 1-based in audit order).
    final_score: float | None = None
    final_attempt: int | None = None
    final_scorings: list[int] = Field(default_factory=list)
    # Hidden scores sealed (trajectory.sealing): the public key they are sealed to (None: in clear),
    # and, once finished, the three final fields above sealed to it (those then empty).
    seal_to: str | None = None
    final_sealed: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def time_limit_s(self) -> float:
        return self.clock.limit_s

    def rule(self) -> "Rule":
        """How this session's scorings count (``scoring.Rule``)."""
        from ..scoring import Aggregation, Direction, Rule

        return Rule(Aggregation(self.aggregation), Direction(self.direction), failures_count=self.timing)

    def save(self, path: Path) -> None:
        try:
            write_json(path, self.model_dump(mode="json"), durable=True, indent=2)
        except OSError as exc:  # a full or read-only disk: the previous session.json stays whole
            from ..errors import SessionError

            raise SessionError(f"{path} could not be written: {exc.strerror or exc}",
                               kept=f"the previous {path.name} (unchanged) and the audit log",
                               fix="free disk space or make the session folder writable, then try again") from exc

    @classmethod
    def load(cls, path: Path) -> "SessionMeta":
        """Read session.json; a missing, damaged or foreign one is a SessionError saying so, what
        was kept (the audit log, the record of truth) and how to rebuild it from the audit log."""
        from pydantic import ValidationError

        from ..errors import SessionError

        sid = path.parent.name
        try:
            return cls.model_validate_json(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            why = f"{path.name} is missing"
        except (OSError, UnicodeDecodeError) as exc:
            why = f"{path.name} cannot be read ({getattr(exc, 'strerror', None) or exc})"
        except ValidationError as exc:
            first = exc.errors()[0] if exc.errors() else {}
            where = ".".join(str(x) for x in first.get("loc", ())) or "the file"
            why = f"{path.name} is damaged ({where}: {first.get('msg', exc.title)})"
        raise SessionError(f"session {sid}: {why}",
                           kept=f"the audit log, the record of truth (untouched), and the rest of {path.parent}",
                           fix=f"`rebench-tui repair {sid}` rebuilds {path.name} (and the score log) from the audit "
                               "log, then try again") from None


@dataclass(frozen=True)
class ScoreRecord:
    """One scoring. ``attempt`` is the scoring's number (1-based, in audit order; the name is
    older than attempts as groups of re-scores). ``fingerprint``/``n_files``: the attempt
    fingerprint of the files it scored (details ``attempt``); None for a scoring recorded
    without one, which is then an attempt of its own."""

    attempt: int
    called_at_ms: int
    working_s: float
    score: float
    normalized: float
    message: dict[str, Any]
    details: dict[str, Any] = field(repr=False, default_factory=dict)
    duration_s: float = 0.0
    fingerprint: str | None = None
    n_files: int | None = None

    @property
    def valid(self) -> bool:
        return math.isfinite(self.score)

    @property
    def recount(self) -> bool:
        """A fresh scoring the workstation took at the finish (``scoring.is_recount``)."""
        from ..scoring import is_recount

        return is_recount(self.details)


@dataclass(frozen=True)
class CountingScore:
    """The score that counts now: the median of one attempt's valid scorings.

    ``attempt``: that attempt's number (1-based, in order of first scoring). ``scorings``: the
    numbers of the attempt's valid scorings (ScoreRecord.attempt), whose median ``score`` is;
    ``representative``: the one of them nearest the median (the earliest on a tie).
    ``n``/``low``/``high``: how many they are and their spread."""

    score: float
    normalized: float
    attempt: int
    fingerprint: str | None
    scorings: tuple[int, ...]
    representative: int
    low: float
    high: float
    recount: bool = False  # the scorings are the finish's recount of the attempt (scoring.Rule)

    @classmethod
    def of(cls, attempt: "Attempt", numbers: list[int], normalize: "Callable[[float], float]",
           recounts: "list[bool] | None" = None) -> "CountingScore":
        """From an attempt of :func:`~rebench_tui.scoring.group_attempts` (or ``Rule.attempt``);
        ``numbers[i]`` is the number of the i-th scoring of the list it was grouped from,
        ``recounts[i]`` whether it is a recount."""
        assert attempt.representative is not None, "an invalid attempt never counts"
        return cls(attempt.score, normalize(attempt.score), attempt.number, attempt.fingerprint,
                   tuple(numbers[i] for i in attempt.valid_indexes), numbers[attempt.representative],
                   attempt.low, attempt.high, bool(recounts) and recounts[attempt.indexes[0]])

    @property
    def n(self) -> int:
        return len(self.scorings)

    @property
    def valid(self) -> bool:
        return math.isfinite(self.score)
