"""Comparing human sessions with AI-agent runs on the same environments.

- :mod:`.runs` — the common :class:`Run` model and the environments' scoring facts;
- :mod:`.imports` — readers of human session folders, Inspect logs and Vivaria JSON;
- :mod:`.analysis` — pure functions: best-so-far curves, finals at a budget, rates, score@k;
- :mod:`.report` — CSV, PNG (matplotlib) and HTML files;
- :mod:`.terminal` — a plotext chart and rich tables.

Nothing here imports textual; the compare screen lives in ``rebench_tui.tui.screens.compare``.
"""

from .analysis import ALL, Comparison, ScoreAtK, compare, expected_max, score_at_k
from .imports import Loaded, filter_runs, load_sources, read_human_session, read_inspect_log, read_vivaria
from .runs import (CompareError, EnvInfo, EnvResolver, Run, Scoring, SourceKind, UnknownEnvironment,
                   published_environments)

__all__ = [
    "ALL", "CompareError", "Comparison", "EnvInfo", "EnvResolver", "Loaded", "Run", "ScoreAtK",
    "Scoring", "SourceKind", "UnknownEnvironment", "compare", "expected_max", "filter_runs", "load_sources",
    "published_environments", "read_human_session", "read_inspect_log", "read_vivaria", "score_at_k",
]
