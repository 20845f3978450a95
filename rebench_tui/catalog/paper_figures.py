"""Two figures RE-Bench gives per environment, kept in a manifest's ``[paper]`` table and used.

- ``[paper.start_spread]``: the standard deviation of the starting solution's score between
  scorings (the paper's Table 4). It says how much of a score is noise: the README's noise
  section quotes it per environment, beside this project's own measured spreads.
- ``[paper.run_and_score]``: how long one run and scoring takes (the paper's Table 3), and what
  that figure covers. Where it is one run of what this project's scorer itself runs
  (``scorer_runs_it``), every profile that keeps the paper's sizes must give its scorer a timeout
  of at least ``HEADROOM`` times the figure, so a scoring as slow as METR's never times out.
  Where the figure covers more (a training run the participant starts), the scorer's timeout
  cannot follow from it, and ``covers`` says so.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from ..clock import parse_duration

HEADROOM = 2.0
# Profiles that keep the paper's sizes (a smoke profile's sizes are its own).
FULL_SIZE_PROFILES = ("gpu",)


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class StartSpread(_Frozen):
    sd: float = Field(ge=0, description="standard deviation of the starting solution's score")
    unit: str = Field("", description="what sd is in, where that is not the score's own unit or is unclear")
    source: str = Field(min_length=1)


class RunAndScore(_Frozen):
    time: float | None = Field(None, description="the figure in seconds, from a duration such as '40s' or '2h30m'; absent: not given")
    covers: str = Field(min_length=1, description="what the figure counts, and how it bears on the scorer's timeout")
    scorer_runs_it: bool = Field(False, description="the figure is one run of what this project's scorer runs")
    source: str = Field(min_length=1)

    @field_validator("time", mode="before")
    @classmethod
    def _duration(cls, value: Any) -> Any:
        return None if value is None else parse_duration(value)

    @model_validator(mode="after")
    def _a_figure_to_keep_headroom_over(self) -> RunAndScore:
        if self.scorer_runs_it and self.time is None:
            raise ValueError("scorer_runs_it needs the figure (time) that the scorer's timeout keeps headroom over")
        return self


def timeout_problems(figure: RunAndScore | None, timeouts: dict[str, float]) -> list[str]:
    """Profiles (name -> scorer timeout in seconds) whose timeout leaves too little headroom."""
    if figure is None or not figure.scorer_runs_it or figure.time is None:
        return []
    need = HEADROOM * figure.time
    return [f"profile {name!r}: the scorer's timeout {timeout:g} s is under {HEADROOM:g} x the paper's "
            f"{figure.time:g} s for one run and scoring ({figure.source}); give it at least {need:g} s"
            for name, timeout in timeouts.items() if name in FULL_SIZE_PROFILES and timeout < need]


def figures_lines(spread: StartSpread | None, run: RunAndScore | None) -> list[str]:
    """list -v: the two figures in words (or that the manifest does not give them)."""
    lines = []
    if spread is None:
        lines.append("start-score spread: not given in the manifest")
    else:
        unit = f" ({spread.unit})" if spread.unit else ""
        lines.append(f"start-score spread: sd {spread.sd:g}{unit} ({spread.source})")
    if run is None:
        lines.append("one run and scoring: not given in the manifest")
    else:
        took = "no figure" if run.time is None else duration_words(run.time)
        lines.append(f"one run and scoring: {took} ({run.source}) — {run.covers}")
    return lines


def duration_words(seconds: float) -> str:
    """40 s, 8 min, 2.5 h: the largest unit that gives the figure with at most one decimal."""
    for unit, size in (("h", 3600), ("min", 60)):
        if seconds >= size and (seconds / size * 10) % 1 == 0:
            return f"{seconds / size:g} {unit}"
    return f"{seconds:g} s"
