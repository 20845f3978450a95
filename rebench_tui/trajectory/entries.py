"""Vivaria trace entries: the audit log's row contract.

Top-level rows are loose (extra keys are allowed, as in Vivaria); ``content`` objects are
strict: no keys beyond those listed for their ``type``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

INT32_MAX = 2**31 - 1
MAX_INDEX = 2**53


class _Content(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class LogAttributes(_Content):
    style: dict[str, Any] | None = None
    title: str | None = None


class LogContent(_Content):
    type: Literal["log"] = "log"
    content: list[Any]
    attributes: LogAttributes | None = None


class ActionContent(_Content):
    type: Literal["action"] = "action"
    action: dict[str, Any]


class ObservationContent(_Content):
    type: Literal["observation"] = "observation"
    observation: dict[str, Any]


class IntermediateScoreContent(_Content):
    type: Literal["intermediateScore"] = "intermediateScore"
    score: float | None | Literal["NaN", "Infinity", "-Infinity"]
    message: dict[str, Any]
    details: dict[str, Any]


class SubmissionContent(_Content):
    type: Literal["submission"] = "submission"
    value: str


class ErrorContent(_Content):
    type: Literal["error"] = "error"
    from_: Literal["agent", "server", "task", "serverOrTask", "user", "usageLimits"] = Field(alias="from")
    detail: Any
    trace: str | None = None
    extra: Any | None = None


class FrameStartContent(_Content):
    type: Literal["frameStart"] = "frameStart"
    name: str | None = None


class FrameEndContent(_Content):
    type: Literal["frameEnd"] = "frameEnd"


class SettingChange(_Content):
    kind: Literal["toggleInteractive"]
    value: bool


class SettingChangeContent(_Content):
    type: Literal["settingChange"] = "settingChange"
    change: SettingChange


Content = Annotated[
    Union[
        LogContent,
        ActionContent,
        ObservationContent,
        IntermediateScoreContent,
        SubmissionContent,
        ErrorContent,
        FrameStartContent,
        FrameEndContent,
        SettingChangeContent,
    ],
    Field(discriminator="type"),
]


class TraceEntry(BaseModel):
    model_config = ConfigDict(extra="allow")

    runId: int = Field(ge=1, le=INT32_MAX)
    index: int = Field(ge=1, le=MAX_INDEX)
    agentBranchNumber: int = Field(0, ge=0)
    calledAt: int = Field(ge=0)
    modifiedAt: int = Field(ge=0)
    usageTotalSeconds: int | None = None
    content: Content


CONTENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(Content)


def content_dict(content: BaseModel | dict[str, Any]) -> dict[str, Any]:
    """Validate content against the strict contract and return it as plain JSON-ready data."""
    model = CONTENT_ADAPTER.validate_python(content.model_dump(by_alias=True) if isinstance(content, BaseModel) else content)
    data = model.model_dump(by_alias=True, exclude_none=False, mode="json")
    if data.get("type") == "log":  # optional parts of a log row are left out rather than written as null
        attrs = {k: v for k, v in (data.get("attributes") or {}).items() if v is not None}
        if attrs:
            data["attributes"] = attrs
        else:
            data.pop("attributes", None)
    return data


def log(*lines: Any, title: str | None = None) -> dict[str, Any]:
    """A ``log`` row's content: human-readable lines (objects allowed) with an optional title."""
    c: dict[str, Any] = {"type": "log", "content": list(lines)}
    if title is not None:
        c["attributes"] = {"title": title}
    return c


# The log events that say what state a session is in (``state.chain_state`` reads them).
FINISH_EVENT = "session_finished"


def log_event(content: Any) -> dict[str, Any] | None:
    """The facts object of a ``log`` row's content (its ``event`` and the rest), or None."""
    if not isinstance(content, dict) or content.get("type") != "log":
        return None
    lines = content.get("content")
    if isinstance(lines, list) and len(lines) > 1 and isinstance(lines[1], dict) and "event" in lines[1]:
        return lines[1]
    return None


def is_finish(content: Any) -> bool:
    """Whether a row's content is the finish row that ends a session's record."""
    facts = log_event(content)
    return facts is not None and facts.get("event") == FINISH_EVENT
