"""The recount: at the finish, fresh scorings of the leading attempt, whose median then counts.

Why: timing scores are noisy, and every attempt is a new draw. Grouping re-scores of unchanged
files by their median stops a participant who presses the score key again on the same files, but
not one who changes a comment between presses: each press is then an attempt of its own, and the
best of many single draws wins. The recount takes the attempt the session's rule leads with and
scores it ``recount_runs`` more times, from the snapshot kept when it was first scored. Those
scorings are drawn after the choice, independently of the draws that made it, so their median has
the same distribution whichever of many equally good attempts led: pressing more often, with or
without edits, cannot move it. Only one attempt is recounted on purpose: taking the best of
several attempts' fresh medians would bring the luck of the draw back in.

The recount's scorings are ordinary scoring rows marked ``details.recount`` (``scoring.Rule``
counts them alone), each in a scoring room of its own on a copy of the snapshot the attempt was
scored from; the participant's home is never touched.
"""

from __future__ import annotations

import json
from typing import Any

from ..scoring import json_score
from ..trajectory.entries import log
from .core import SessionCore
from .scorer import Scorer
from .snapshots import Snapshots

# The finishes that end a participant's work (a calibration's finish recounts nothing).
PARTICIPANT_FINISHES = ("submitted", "time_limit")
RECOUNT_STATE = "recount.json"  # in .state/ while the home holds an earlier attempt's files


def recount(core: SessionCore, scorer: Scorer) -> None:
    """Recount the leading attempt where the session asks for it; every outcome is in the record."""
    runs = core.meta.recount_runs
    lead = core.final()
    if runs <= 0 or lead is None or any(r.recount for r in core.history):
        return
    why = _cannot(core, scorer, lead.fingerprint)
    if why:
        _note(core, f"no recount: {why}; the in-session rule counts", {"event": "recount_skipped", "reason": why})
        return
    assert lead.fingerprint is not None
    score = "sealed" if core.seal_to else f"{lead.score:.4g}"  # a sealed score is in no row's clear text
    _note(core, f"recount: attempt {lead.attempt} (score {score} from {lead.n} scoring(s)) is scored {runs} more "
                "times from the snapshot of its files taken when it was scored; the median of these counts",
          {"event": "recount_started", "attempt": lead.attempt, "fingerprint": lead.fingerprint, "runs": runs,
           "in_session": None if core.seal_to else json_score(lead.score)})
    info = {"fingerprint": lead.fingerprint, "n_files": None, "source": "snapshot"}
    for i in range(runs):  # each in a room of its own, from the kept snapshot: the home is never touched
        scorer.score(final=True, recount={"attempt": info, "of_attempt": lead.attempt, "run": i + 1, "runs": runs})


def restore_after_recount(core: SessionCore, snapshots: Snapshots) -> bool:
    """On reopening: if the app stopped while a recount held an earlier attempt's files in the home,
    put the participant's final files back (and say so in the record). True if it did."""
    marker = core.state / RECOUNT_STATE
    if not marker.is_file():
        return False
    final = json.loads(marker.read_text(encoding="utf-8"))["final"]
    snapshots.place(final)
    marker.unlink()
    _note(core, "the app stopped during the recount, with an earlier attempt's files in the home; your final files "
                "are back in place", {"event": "recount_restored", "fingerprint": final})
    return True


def _cannot(core: SessionCore, scorer: Scorer, fp: str | None) -> str | None:
    if not fp:
        return "the leading attempt was scored without a fingerprint"
    if not scorer.store.has(fp):
        return "no snapshot of the leading attempt's files was kept"
    if not core.sandbox.is_running():
        return "the sandbox is not running"
    return None


def _note(core: SessionCore, text: str, content: dict[str, Any]) -> None:
    core.audit.append(log(text, content, title="score"))
