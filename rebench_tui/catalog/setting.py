"""The paper's setting of an environment beside each profile's own.

A manifest's ``[paper]`` table names what RE-Bench used for every setting that moves the score
(baseline models, judge, code model, problem set, data, time budgets) and where that is stated:
every row has a ``source`` and a ``basis``. ``basis = "paper"`` (the default): the source names
the section or table of the paper (or METR's own RE-Bench README) that says it.
``basis = "secondary"``: only a secondary source gives the value (a third party's note, excerpts
of a port of METR's code), and ``source`` names it. ``basis = "not found"``: nobody here found the
value; ``paper`` says what is unknown and ``source`` where it was looked for.
Each profile's ``[profiles.<name>.setting]`` table says, for every one of those settings, either
``here = "same"`` or what the profile uses instead and ``why``. A gpu profile must answer for every
setting; a smoke profile that leaves the table out is a small stand-in throughout.

The differences travel with every session (``session.json``'s ``setting``), so a comparison can
flag or leave out runs that were not made in the paper's setting.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .paper_figures import RunAndScore, StartSpread

SAME = "same"
Basis = Literal["paper", "secondary", "not found"]
# What a citation of the paper looks like: a section (§2.1, appendix B.1.3, A.1), a table, or
# METR's own RE-Bench README.
CITATION = re.compile(r"§\s*\d|\bappendix\s+[A-Z]\b|\b[A-Z]\.\d|\bTable\s+\d|\bREADME\b", re.IGNORECASE)
STAND_IN = "a small stand-in of the same shape (the smoke profile runs on a CPU in minutes)"


class _Frozen(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PaperSetting(_Frozen):
    paper: str = Field(min_length=1, description="what RE-Bench used, or, where nobody found it, what is unknown")
    source: str = Field(min_length=1, description="the section or table of the paper that says it; for a "
                        "secondary value, who gives it; for a value not found, where it was looked for")
    basis: Basis = Field("paper", description="paper | secondary | not found")

    @model_validator(mode="after")
    def _cites_a_section(self) -> PaperSetting:
        if self.basis == "paper" and not CITATION.search(self.source):
            raise ValueError(f"source {self.source!r} names no section of the paper: cite it (e.g. 'RE-Bench appendix "
                             f"B.1.3', 'RE-Bench Table 3'), or set basis = \"secondary\" (naming who gives the value) "
                             f"or basis = \"not found\"")
        return self

    @property
    def cited(self) -> str:
        """The source as people read it: a secondary or unfound value says so."""
        return self.source if self.basis == "paper" else f"{self.basis}: {self.source}"


class PaperSpec(_Frozen):
    source: str = Field(min_length=1, description="the paper and task-family version these settings are read from")
    settings: dict[str, PaperSetting] = Field(min_length=1)
    start_spread: StartSpread | None = None  # the paper's Table 4 (paper_figures.py)
    run_and_score: RunAndScore | None = None  # the paper's Table 3


class ProfileSetting(_Frozen):
    here: str = Field(min_length=1, description=f"{SAME!r}, or what this profile uses instead")
    why: str = Field("", description="why it differs (required unless here is 'same')")

    @model_validator(mode="after")
    def _difference_says_why(self) -> "ProfileSetting":
        if self.here.strip() != SAME and not self.why.strip():
            raise ValueError(f"here = {self.here!r} differs from the paper: say why (why = \"...\")")
        return self


@dataclass(frozen=True)
class SettingRow:
    """One setting of one profile: the paper's value, this profile's, and why they differ."""

    name: str
    paper: str
    here: str
    why: str = ""
    source: str = ""

    @property
    def same(self) -> bool:
        return self.here == SAME

    def to_record(self) -> dict[str, str]:
        return {"name": self.name, "paper": self.paper, "here": self.here, "why": self.why}


def check_profiles(paper: PaperSpec | None, profiles: dict[str, Any]) -> list[str]:
    """Problems with the profiles' setting tables against the paper's (empty when all is well)."""
    problems = []
    known = set(paper.settings) if paper is not None else set()
    for name, spec in profiles.items():
        given = set(spec.setting)
        if given and paper is None:
            problems.append(f"profile {name!r} has a setting table but the manifest has no [paper] table to set it beside")
            continue
        standins = getattr(spec, "standins", None)
        if standins is not None and paper is not None and (odd := sorted(set(standins.setting) - known)):
            problems.append(f"profile {name!r}'s standins name setting(s) the [paper] table does not have: {', '.join(odd)}")
        if unknown := sorted(given - known):
            problems.append(f"profile {name!r} names setting(s) the [paper] table does not have: {', '.join(unknown)}")
        # The gpu profile answers every setting; another may stay silent (its whole setting is a stand-in)
        # but, once it answers one, answers all: a half table would read as "not stated" beside the rest.
        if paper is not None and (name == "gpu" or given) and (missing := [s for s in paper.settings if s not in given]):
            problems.append(f"profile {name!r} does not say how it stands on the paper's setting(s) {', '.join(missing)}: "
                            f"add [profiles.{name}.setting] entries (here = \"same\", or what it uses and why)"
                            + ("" if name == "gpu" else ", or remove the table to mark the whole profile a stand-in"))
    return problems


def setting_rows(paper: PaperSpec | None, given: dict[str, ProfileSetting]) -> tuple[SettingRow, ...]:
    """Every paper setting beside the profile's answer (a smoke profile's silence: the stand-in)."""
    if paper is None:
        return ()
    unanswered = (STAND_IN, "the smoke profile's stand-in") if not given else ("not stated", "the profile does not say")
    rows = []
    for name, p in paper.settings.items():
        mine = given.get(name)
        here, why = unanswered if mine is None else (mine.here.strip(), mine.why.strip())
        rows.append(SettingRow(name, p.paper, here, why, p.cited))
    return tuple(rows)


def setting_record(paper: PaperSpec | None, rows: tuple[SettingRow, ...]) -> dict[str, Any] | None:
    """What a session keeps: the paper's source, the settings held, and each difference in full."""
    if paper is None:
        return None
    return {"paper": paper.source, "same": [r.name for r in rows if r.same],
            "differs": [r.to_record() for r in rows if not r.same]}


def recorded_differences(record: Any) -> list[dict[str, Any]]:
    """The differences a recorded ``setting`` (session.json, an export's metadata) lists, read
    defensively: a record from a file may have any shape; anything that is not one is none."""
    differs = record.get("differs") if isinstance(record, dict) else None
    if not isinstance(differs, list):
        return []
    return [d for d in differs if isinstance(d, dict) and d.get("name")]


def setting_words(record: dict[str, Any] | None) -> str:
    """One line for people: whether a session (by its record) ran in the paper's setting."""
    if record is None:
        return "the environment states no paper setting"
    differs = recorded_differences(record)
    if not differs:
        return "in the paper's setting"
    return f"differs from the paper's setting in {len(differs)}: " + ", ".join(d["name"] for d in differs)


GPU_ROW = "hardware"  # the [paper] setting a GPU count belongs to (added where a table lacks it)


def on_fewer_gpus(rows: tuple[SettingRow, ...], asked: int, given: int) -> tuple[SettingRow, ...]:
    """The setting rows of a profile run on ``given`` GPUs where it asks for ``asked`` (a
    rehearsal): the hardware row says so, whatever it said before."""
    why = (f"a rehearsal on {given} GPU(s) where the profile asks for {asked} (`start --gpus {given}`): the same work "
           "runs on fewer devices, so it takes longer and time-bound results can differ")
    here = f"{given} GPU(s) instead of {asked}"
    out, seen = [], False
    for r in rows:
        if r.name == GPU_ROW:
            seen = True
            was = "" if r.same else f" ({r.here})"
            r = SettingRow(r.name, r.paper, here + was, why, r.source)
        out.append(r)
    if not seen:
        out.append(SettingRow(GPU_ROW, f"{asked} GPU(s)", here, why, "the profile"))
    return tuple(out)

