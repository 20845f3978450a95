"""Readers that turn recorded attempts into :class:`~rebench_tui.compare.runs.Run` objects.

Three shapes are read:

- **human session folders** (``session.json`` + ``audit.jsonl``): every ``intermediateScore``
  row, at its pause-excluded working time (``workingMs``; else ``usageTotalSeconds``; else
  ``calledAt`` minus the start minus the pauses in ``session.json``);
- **Inspect eval logs** (``.eval`` or ``.json``, through ``inspect_ai.log.read_eval_log``): one
  run per sample, from its intermediate ``ScoreEvent``s at the event metadata's
  ``working_time`` (seconds, pauses excluded) where present, else the event's
  ``working_start``; a ``human_cli`` log without score events is read from its store's
  ``HumanAgentState:scorings``;
- **Vivaria JSON** (``.json`` or ``.jsonl``): a list of trace entries, a list of score-log rows
  (``elapsedTime`` ms, pauses excluded), or a run object holding them (``taskId``, ``agent``,
  ``pauses``, ``startedAt``, ``entries``/``trace`` or ``scoreLog``; a ``runs`` list of such);
  also a run bundle folder (``run.json`` with ``trace_entries.jsonl``/``score_log.jsonl``, as
  ``rebench-tui export --format vivaria`` writes).

Each scoring keeps the attempt fingerprint its source recorded (``details.attempt.fingerprint`` of
a rebench-tui scoring, also in its Vivaria and Inspect exports), so re-scores of the same files
count as one attempt with their median, as the workstation counts them; other sources have none.

Which environment a run belongs to comes from its task name (``EnvResolver``); which anchors
normalize it, from the setting it was scored in (see :mod:`rebench_tui.compare.runs`): a session's recorded anchors,
anchors its log carries (``metadata.anchors``, or ``start_score``/``reference_score``), else
METR's published ones for METR's tasks. A source named
on the command line that cannot be read is an error; one found while scanning a folder is
skipped with a warning, so one stray file does not stop a comparison.

One module per shape: :mod:`.sessions`, :mod:`.inspect_logs`, :mod:`.vivaria` (files and run
bundles); :mod:`.parsing` holds what they share and :mod:`.sources` tells sources apart and reads
them all. Every reader and helper named here is importable from this package.
"""

from __future__ import annotations

from .inspect_logs import HUMAN_MODELS, INSPECT_SUFFIXES, read_inspect_log
from .parsing import own_anchors, paused_ms, row_working_s, score_value, trace_scorings, who_of
from .sessions import is_session_folder, read_human_session, read_sessions_dir
from .sources import Loaded, filter_runs, load_sources, read_file, read_path
from .vivaria import (BUNDLE_PAUSES, BUNDLE_RUN, BUNDLE_SCORES, BUNDLE_TRACE, JSON_SUFFIXES, is_vivaria_bundle,
                      load_json_or_jsonl, read_vivaria, read_vivaria_bundle)

__all__ = [
    "BUNDLE_PAUSES", "BUNDLE_RUN", "BUNDLE_SCORES", "BUNDLE_TRACE", "HUMAN_MODELS", "INSPECT_SUFFIXES", "JSON_SUFFIXES",
    "Loaded", "filter_runs", "is_session_folder", "is_vivaria_bundle", "load_json_or_jsonl", "load_sources",
    "own_anchors", "paused_ms", "read_file", "read_human_session", "read_inspect_log", "read_path", "read_sessions_dir",
    "read_vivaria", "read_vivaria_bundle", "row_working_s", "score_value", "trace_scorings", "who_of",
]
