"""Choosing human sessions by who worked and under which conditions (``compare --participant``,
``--ai-tools``, ``--internet``). Agent runs have no participant: the filters keep them all."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

from .runs import Run

AI_TOOLS = {"yes": "AI_TOOLS_AVAILABLE", "no": "NO_AI_TOOLS", "unknown": "UNKNOWN_IF_AI_TOOLS_AVAILABLE"}


@dataclass(frozen=True)
class HumanFilter:
    participants: Sequence[str] = ()
    ai_tools: str | None = None  # yes | no | unknown (AI_TOOLS), None: any
    internet: bool | None = None  # None: any

    @property
    def active(self) -> bool:
        return bool(self.participants) or self.ai_tools is not None or self.internet is not None

    def keeps(self, run: Run) -> bool:
        if not run.human:
            return True
        if self.participants and run.participant not in self.participants:
            return False
        if self.ai_tools is not None and (run.ai_tools or AI_TOOLS["unknown"]) != AI_TOOLS[self.ai_tools]:
            return False
        return self.internet is None or run.internet is self.internet

    def words(self) -> str:
        parts = [f"participant {', '.join(self.participants)}"] if self.participants else []
        if self.ai_tools is not None:
            parts.append(f"AI tools {self.ai_tools}")
        if self.internet is not None:
            parts.append("internet allowed" if self.internet else "no internet")
        return "; ".join(parts)
