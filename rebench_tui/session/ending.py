"""Notes, the shell's open/close rows, the submission and the finish: how a session ends, and
what its last row says (the final score, and the hashes ``verify`` rechecks)."""

from __future__ import annotations

import shutil
import time

from ..errors import SessionError
from ..hashing import sha256_file
from ..scoring import json_score
from ..trajectory.entries import log
from ..trajectory.records import CountingScore, ScoreRecord
from ..trajectory.sealing import seal_finish
from .core import SessionCore
from .events import NoteSaved, RecordingTrouble, SessionFinished
from .files import scan
from .layout import SCORE_LOG, WORKSPACE
from .recount import PARTICIPANT_FINISHES, recount
from .scorer import Scorer, ScoringBusy
from .timekeeping import Timekeeping


class Ending:
    def __init__(self, core: SessionCore, scorer: Scorer, time: Timekeeping) -> None:
        self.core = core
        self.scorer = scorer
        self.time = time

    def note(self, text: str) -> None:
        text = text.strip()
        if not text:
            return
        self.core.audit.append(log(text, {"event": "note", "note": text}, title="note"))
        self.core.emit(NoteSaved(text))

    def shell_opened(self, argv: list[str]) -> None:
        self.core.audit.append(log(f"shell opened: {' '.join(argv)}", {"event": "shell_open", "argv": argv}, title="shell"))

    def shell_closed(self, exit_code: int | None) -> None:
        how = f"exit {exit_code}" if exit_code is not None else "no exit status: it could not be opened"
        self.core.audit.append(log(f"shell closed ({how})", {"event": "shell_close", "exit": exit_code},
                                   title="shell"))

    def app_closed_running(self) -> None:
        self.core.audit.append(log("app closed; the clock keeps running (the participant chose so)",
                                   {"event": "app_closed", "clock_running": True}, title="session"))

    def submit(self, value: str = "") -> ScoreRecord | None:
        """Final submission: one last scoring, the submission row, then the session is finished
        (also when that scoring fails: the error is raised after the finish is recorded)."""
        c = self.core
        if c.finished:
            raise SessionError("this session is already finished", kept="all records")
        if self.scorer.running:
            raise ScoringBusy("a scoring is running", fix="wait for it to finish (or cancel it), then submit")
        try:
            return self.scorer.score(final=True)
        finally:
            c.audit.append({"type": "submission", "value": value})
            with c.meta_lock:
                c.meta.submission = value
            self.finish("submitted")

    def finish_at_time_limit(self) -> ScoreRecord | None:
        """At zero: take the final score on the work as it stands, then finish (also when that
        scoring fails: the error is raised after the finish is recorded)."""
        try:
            if self.core.sandbox.is_running():
                while self.scorer.running:  # a scoring already under way counts; wait for it
                    time.sleep(0.1)
                return self.scorer.score(final=True)
            return None
        finally:
            self.finish("time_limit")

    def finish(self, reason: str) -> None:
        """The session's last row. What the recorders saw until now is recorded first and they
        stop; the finish row goes before session.json says finished, so a crash in between leaves
        the audit log saying it (``rebench-tui repair`` writes session.json from it): the log is
        the record of truth, and takes no row after this one (``AuditLog`` refuses them)."""
        c = self.core
        if c.finished:
            return
        self._stop_recording()
        with c.meta_lock:
            self.time.stop()
        recount_error = self._recount() if reason in PARTICIPANT_FINISHES else None
        with c.meta_lock:
            best = c.final()
            c.meta.status, c.meta.finish_reason = "finished", reason
            c.meta.completed_at = int(c.clock.time() * 1000)
            final = {"final_score": json_score(best.score) if best else None,
                     "final_attempt": best.representative if best else None,
                     "final_scorings": list(best.scorings) if best else []}
            if c.seal_to:  # a hidden score: sealed to the researcher's key, here as in the finish row
                final = seal_finish(c.seal_to, final)
                c.meta.final_sealed = final["final_sealed"]
            c.meta.final_score = None if c.seal_to or best is None else best.score
            c.meta.final_attempt, c.meta.final_scorings = final["final_attempt"], list(final["final_scorings"])
        sync_note = self._sync_remote_home()
        # What the record ends with: the score log and the workspace, by hash (`verify` rechecks them).
        files = {SCORE_LOG: sha256_file(c.folder / SCORE_LOG)}
        files.update({f"{WORKSPACE}/{rel}": d["sha256"] for rel, d in scan(c.workspace, c.ignore).items() if d["sha256"]})
        row = c.audit.append(log(
            f"session finished ({reason}); final score " + _final_words(c, best),
            {"event": "session_finished", "reason": reason, **final, "working_s": c.wclock.used(), "files": files,
             **({"files_note": sync_note} if sync_note else {}), **({"recount_error": recount_error} if recount_error else {})},
            title="session",
        ))
        with c.meta_lock:
            c.meta.completed_at = int(row["calledAt"])
            c.save()
            c.sealed = True  # session.json is final too: nothing of the session is written again
        c.index()
        c.emit(SessionFinished(reason, best))

    def _stop_recording(self) -> None:
        """Before the finish row: the files and commands seen so far are recorded, then the
        recorders stop (a finished session's log takes no row after its finish)."""
        recording = self.scorer.recording
        for step in (lambda: recording.flush(timeout=10.0), recording.stop):
            try:
                step()
            except Exception as exc:  # noqa: BLE001 - the finish goes ahead; the trouble is said
                self.core.emit(RecordingTrouble(f"recording the last changes before the finish failed: {exc}"))

    def closing(self, pause_clock: bool | None) -> None:
        """The row that says the app or command closed the session (``trajectory.state`` reads it:
        without one the session was interrupted): the pause, the participant's choice to keep the
        clock running, or, for a command without the screen, the clock as it was."""
        c = self.core
        if c.finished:
            return
        if pause_clock and self.time.pause("app closed"):
            return
        if pause_clock is False:
            self.app_closed_running()
            return
        running = c.wclock.running
        who = "a command without the screen" if pause_clock is None else "the app (the clock was paused already)"
        c.audit.append(log(f"session closed by {who}; the clock is {'running' if running else 'paused'}",
                           {"event": "session_closed", "clock_running": running}, title="session"))

    def release_gpus(self) -> str | None:
        """A finished session's container stops if it holds GPUs, so the next session can have them;
        the records, the home (folder or volume) and the stopped container stay. What was done, or None."""
        c = self.core
        if not c.finished or not (c.sandbox.describe().get("gpus") or 0) or not c.sandbox.is_running():
            return None
        try:
            c.sandbox.stop()
        except Exception as exc:  # noqa: BLE001 - the records are complete; `rebench-tui stop` can do it later
            return f"the container could not be stopped to free its GPUs ({exc}); run `rebench-tui stop {c.meta.id}`"
        return f"container stopped: its GPUs are free (records and home kept; `rebench-tui stop {c.meta.id} --remove` removes it)"

    def _recount(self) -> str | None:
        """The recount of the leading attempt (``recount.py``); a failure is said in the finish row,
        and the finish goes on: the recount's scorings recorded so far count."""
        try:
            recount(self.core, self.scorer)
        except Exception as exc:  # noqa: BLE001 - the finish is recorded all the same
            return f"the recount stopped: {exc}"[:500]
        return None

    def _sync_remote_home(self) -> str | None:
        """A remote home is copied here first, so the session folder holds the work it records."""
        c = self.core
        if not c.sandbox.remote:
            return None
        try:
            fresh = c.state / "home-sync"
            shutil.rmtree(fresh, ignore_errors=True)
            skipped = c.sandbox.sync_home(fresh, c.ignore)
            shutil.rmtree(c.workspace, ignore_errors=True)
            fresh.rename(c.workspace)
        except Exception as exc:  # noqa: BLE001 - the finish is recorded all the same, with what is here
            return f"the home could not be copied from {c.sandbox.host} ({exc}); hashes are of the local copy"
        if skipped:
            return f"{len(skipped)} entr(ies) of the remote home not copied as unsafe: " + "; ".join(skipped[:20])
        return None


def _final_words(c: SessionCore, best: CountingScore | None) -> str:
    if c.seal_to:
        return "sealed to the researcher's key"
    return f"{best.score:.4g} ({counting_words(best)}, rule {c.aggregation.value})" if best else "none (no valid scoring)"


def counting_words(c: CountingScore) -> str:
    if c.recount:
        return (f"median of {c.n} fresh scorings of attempt {c.attempt} at the finish ({', '.join(map(str, c.scorings))}), "
                f"range {c.low:.4g} to {c.high:.4g}")
    if c.n == 1:
        return f"scoring {c.representative}"
    return f"median of {c.n} scorings of unchanged files ({', '.join(map(str, c.scorings))}), range {c.low:.4g} to {c.high:.4g}"
