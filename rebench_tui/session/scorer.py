"""Scoring: the rules on when a scoring may run, then flush, exec, parse and record.

The scorer runs in the sandbox as another user, in its own process, with its own result
channel (``runtime.supervise``); this side only reads what that channel held, redacts secrets,
adds the scorer's identity and writes the row into the time reserved at the key press.
"""

from __future__ import annotations

import json
import math
import threading
import time
from secrets import token_hex
from typing import Any, Callable

from ..clock import format_hms
from ..errors import RebenchError, SessionError
from ..runtime.base import ExecResult
from ..scoring import ATTEMPT_KEY, RECOUNT_KEY, ScoreResult, json_score, parse_scorer_output
from ..trajectory import score_log
from ..trajectory.audit import AuditWriteError
from ..trajectory.entries import log
from ..trajectory.records import ScoreRecord
from ..trajectory.sealing import seal_scoring
from .core import SessionCore
from .events import ScoreRecorded, ScoringCancelled
from .layout import SCORE_LOG
from .recording import Recording
from .scoring_marker import ScoringMarker
from .attempt_store import AttemptStore, Snapshot, SnapshotRefused
from .snapshots import Snapshots

SCORING_STARTED = "scoring_started"  # the start row's event: a result is recorded only against one
ROOM_KEY = "room"  # details: the scoring room (token, container, image) and what it cost
FLUSH_BEFORE_SCORING_S = 60.0  # the longest a scoring waits for the files it scores to be recorded
Reservation = tuple[int, float | None]


class ScoringBusy(SessionError):
    pass


class Scorer:
    def __init__(self, core: SessionCore, recording: Recording) -> None:
        self.core = core
        self.recording = recording
        self._lock = threading.Lock()
        self._score_log_backlog: list[tuple[float, float, dict[str, Any], dict[str, Any]]] = []
        self.snapshots = Snapshots(core.workspace, core.state, core.ignore)  # recounts of sessions from before rooms
        self.store = AttemptStore(core.state, core.ignore)

    @property
    def running(self) -> bool:
        return self._lock.locked()

    def score(self, *, cancel: threading.Event | None = None, on_output: Callable[[str, bytes], None] | None = None,
              final: bool = False, recount: dict[str, Any] | None = None) -> ScoreRecord | None:
        """Run the protected scorer once on a snapshot of the participant's files, in a room of its
        own; returns the record, or None if cancelled. Blocking.

        The participant's processes are frozen (the engine's cgroup freezer) from before the
        snapshot to the end of the scoring: nothing of theirs changes the files while they are
        taken, or competes with the scorer for the CPU or GPU while it measures.

        ``recount``: a scoring of the finish's recount (``recount.py``): its ``attempt`` names the
        kept snapshot that is scored again, and the rest goes into ``details.recount``."""
        if not self._lock.acquire(blocking=False):
            raise ScoringBusy("a scoring is already running", fix="wait for it to finish, or cancel it")
        try:
            self._check_allowed(final or recount is not None)
            if recount is None:
                self._prepare()
            token = token_hex(16)
            with self.core.sandbox.frozen():
                frozen_at = time.time()  # wall clock, for the record: the participant held from here to the thaw
                if recount is None:
                    snap = self._take_snapshot()
                    attempt = snap.info()
                else:
                    attempt = recount["attempt"]
                    snap = self.store.load(attempt["fingerprint"])
                self._started(token, attempt, final)
                reservation = self.core.audit.reserve()
                result, room = self._run(reservation, token, snap, attempt, final, cancel, on_output)
                thawing_at = time.time()  # asked before the thaw: the record's window is one they were surely held through
            if room:
                room.update(frozen_at_ms=round(frozen_at * 1000), thawed_at_ms=round(thawing_at * 1000))
            return self._outcome(reservation, result, attempt, final,
                                 None if recount is None else {k: v for k, v in recount.items() if k != "attempt"}, room)
        finally:
            self._lock.release()

    def _take_snapshot(self) -> Snapshot:
        """The snapshot of the home as it stands (frozen): refused with the file's name if it
        holds what a scoring cannot take (a pipe, a socket, a device, a link out of the home)."""
        c = self.core
        started = time.monotonic()
        try:
            archive = c.sandbox.home_archive()
            snap = (self.store.take_from_folder(c.workspace) if archive is None
                    else self.store.take_from_tar(archive[0], prefix=archive[1]))
        except SnapshotRefused as exc:
            c.audit.append(log(str(exc), {"event": "score_refused", "reason": "snapshot", "detail": str(exc)}, title="score"))
            raise
        except Exception as exc:  # noqa: BLE001 - recorded, then raised as a readable error
            c.audit.append(log(f"scoring could not take the snapshot of your files: {exc}",
                               {"event": "score_refused", "reason": "snapshot_failed", "detail": str(exc)[:500]}, title="score"))
            raise RebenchError(f"scoring could not take the snapshot of your files: {exc}", kept="every record and your files",
                               fix="check the container (`rebench-tui doctor`), then score again") from exc
        self._snapshot_s = time.monotonic() - started
        return snap

    def _started(self, token: str, attempt: dict[str, Any], final: bool) -> None:
        """The scoring's start row, in the chain before the scorer runs: its token, the attempt and
        the working time. A result is recorded only against such a row (``details.room.token``)."""
        c = self.core
        c.audit.append(log(f"scoring started (attempt {attempt.get('fingerprint', '')[:12]}, {attempt.get('n_files')} files)",
                           {"event": SCORING_STARTED, "token": token, "attempt": attempt, "final": final,
                            "working_s": round(c.wclock.used(), 3)}, title="score"))

    def _check_allowed(self, final: bool) -> None:
        c = self.core
        if c.finished:  # the final scoring too: it came before the finish row, and nothing comes after it
            raise SessionError("this session is finished; scoring is closed", kept="all records",
                               fix=f"`rebench-tui verify {c.meta.id}`, `export` or `compare` read its records")
        if c.wclock.expired and not final:
            # The limit holds for every caller (screen, `rebench-tui score`, a script): after zero only the
            # final scoring runs, on the files as they stand. The refused attempt is in the record.
            c.audit.append(log("scoring refused: the working time is up", {"event": "score_refused",
                               "reason": "time_limit", "used_s": c.wclock.used()}, title="score"))
            raise SessionError(f"the working time of {format_hms(c.wclock.limit_s)} is up: only the final "
                               "scoring runs now", kept="every record and your files as they are",
                               fix=f"open the session (`rebench-tui resume {c.meta.id}`) or run `rebench-tui finish "
                                   f"{c.meta.id}`: either takes the final score and finishes")
        if not self.recording.link_up:
            raise SessionError(f"the link to the engine at {c.sandbox.host} is down: scoring waits for it",
                               kept="every record (nothing was lost; the container keeps running)",
                               fix="score again once the status line says the link is back")

    def _prepare(self) -> None:
        # File changes made before the key press are recorded before it, by events and a rescan (some
        # events may have been lost): what is scored is in the record.
        self.recording.flush(timeout=FLUSH_BEFORE_SCORING_S, rescan=True)
        if self._score_log_backlog:
            self.core.audit.flush()  # a full disk held rows back: they go first, or this scoring waits
            self.flush_score_log()

    def _run(self, reservation: Reservation, token: str, snap: Snapshot, attempt: dict[str, Any], final: bool,
             cancel: threading.Event | None, on_output: Callable[[str, bytes], None] | None) -> tuple[ExecResult, dict[str, Any]]:
        """The scorer in a room of its own, on a copy of ``snap``; the room is removed after."""
        c = self.core
        sandbox, manifest = c.sandbox, c.env.manifest
        marker = ScoringMarker(token, reservation[0], reservation[1], final, attempt, c.profile.score_timeout)
        room_info: dict[str, Any] = {"token": token, "snapshot_s": round(getattr(self, "_snapshot_s", 0.0), 3)}
        try:
            marker.save(c.marker_path)  # on disk before the scorer starts: a crash from here on is settled on resume
            opened = time.monotonic()
            room = sandbox.open_room(token, lambda tar, arcname: self.store.add_to_tar(snap, tar, arcname),
                                     network=c.profile.scoring_network)
            room_info.update(room.describe_room(), open_s=round(time.monotonic() - opened, 3))
            try:
                argv = [room.python, f"{room.protected}/{manifest.score.scorer}"]
                result = room.exec(argv, user=manifest.score.user, timeout=c.profile.score_timeout, cancel=cancel,
                                   on_output=on_output, workdir=room.home, token=token)
            finally:
                room.close_room()
            return result, room_info
        except Exception as exc:  # noqa: BLE001 - recorded, then raised as a readable error
            c.audit.fill(reservation, {"type": "error", "from": "server", "detail": f"scoring could not run: {exc}",
                                       "trace": None, "extra": None})
            ScoringMarker.clear(c.marker_path)
            raise RebenchError(f"scoring could not run: {exc}", kept="every earlier record",
                               fix="check the container (`rebench-tui doctor`), then score again") from exc

    def _outcome(self, reservation: Reservation, result: ExecResult, attempt: dict[str, Any],
                 final: bool, recount: dict[str, Any] | None = None, room: dict[str, Any] | None = None) -> ScoreRecord | None:
        c = self.core
        if result.refused_links:
            links = result.refused_links
            self.fill_refused(reservation, links)
            names = ", ".join(link for link, _target in links[:5])
            raise SessionError(f"scoring refused: {len(links)} symbolic link(s) in your files lead where the scorer's "
                               f"held-out data is ({names}); the scorer runs as root and would follow them",
                               kept="every record; the scorer did not run",
                               fix="replace those links with ordinary files (copy what you need), then score again")
        if result.cancelled:
            c.audit.fill(reservation, log("scoring cancelled by the participant",
                                          {"event": "score_cancelled", "duration_s": result.duration_s}, title="score"))
            ScoringMarker.clear(c.marker_path)
            c.emit(ScoringCancelled(result.duration_s))
            return None
        parsed = self.parsed(result)
        details = {**parsed.details, "duration_s": round(result.duration_s, 3), "final": final, ATTEMPT_KEY: attempt,
                   **({RECOUNT_KEY: recount} if recount is not None else {}), **({ROOM_KEY: room} if room else {})}
        if result.timed_out:
            details["timeout_s"] = c.profile.score_timeout
        return self.record(reservation, parsed, details, result.duration_s, attempt, final)

    def fill_refused(self, reservation: Reservation, links: list[list[str]]) -> None:
        names = ", ".join(link for link, _target in links[:5])
        self.core.audit.fill(reservation, log(f"scoring refused: {len(links)} link(s) in the workspace lead into the "
                                              f"protected area: {names}", {"event": "score_refused", "links": links},
                                              title="score"))
        ScoringMarker.clear(self.core.marker_path)

    def parsed(self, result: ExecResult) -> ScoreResult:
        """The scorer's result as recorded: from its result channel (``parse_scorer_output``),
        secrets redacted, the scorer's identity added, withheld if links into the protected area
        appeared while it ran."""
        parsed = self._redacted(parse_scorer_output(result.result, result.stdout, result.stderr, result.exit_code,
                                                     timed_out=result.timed_out))
        parsed = self._with_scorer_identity(parsed)
        late = result.late_links
        if late:  # made while the scorer ran: what it printed may hold what they point at; none of it is kept
            parsed = ScoreResult(math.nan, {"error": "links into the protected area appeared during scoring; the result "
                                                     "is withheld: " + ", ".join(link for link, _t in late[:5])},
                                 {"withheld": True, "links": late, "exit_code": result.exit_code})
        return parsed

    def record(self, reservation: Reservation, parsed: ScoreResult, details: dict[str, Any], duration_s: float,
               attempt: dict[str, Any], final: bool) -> ScoreRecord:
        """Write a scoring's row into its reservation, then the score log, the history and the index."""
        c = self.core
        record = ScoreRecord(len(c.history) + 1, reservation[0], (reservation[1] or 0.0), parsed.score,
                             c.normalize(parsed.score), parsed.message, details, duration_s,
                             fingerprint=attempt.get("fingerprint"), n_files=attempt.get("n_files"))
        content = {"type": "intermediateScore", "score": json_score(parsed.score), "message": parsed.message,
                   "details": details}
        if c.seal_to:  # a hidden score: the record holds it sealed to the researcher's key (the screen hides it)
            content = seal_scoring(c.seal_to, content["score"], parsed.message, details)
        shown = math.nan if c.seal_to else parsed.score
        log_row = (reservation[0] / 1000, shown, content["message"], content["details"])
        try:
            c.audit.fill(reservation, content)
        except AuditWriteError:
            # The row waits in the log's queue and is written by the next successful write; its
            # score-log row waits here, so the two logs keep agreeing.
            c.history.append(record)
            self._score_log_backlog.append(log_row)
            raise  # the marker stays: if the row never reaches the disk, the next resume settles the scoring
        ScoringMarker.clear(c.marker_path)
        self._score_log_backlog.append(log_row)
        self.flush_score_log()
        c.history.append(record)
        if c.store is not None:
            c.store.add_score(c.meta.id, record.attempt, record.called_at_ms, record.working_s, shown,
                              c.normalize(shown), content["message"], fingerprint=record.fingerprint)
            c.index()
        c.emit(ScoreRecorded(record, final, tuple(c.history), c.final()))
        return record

    def flush_score_log(self) -> None:
        """Write score-log rows still waiting (a full disk held them back), oldest first."""
        while self._score_log_backlog:
            score_log.append(self.core.folder / SCORE_LOG, *self._score_log_backlog[0])
            self._score_log_backlog.pop(0)

    def flush_backlog(self) -> None:
        """On closing: rows a full disk held back get one more chance."""
        if self._score_log_backlog:
            self.core.audit.flush()
            self.flush_score_log()

    def _with_scorer_identity(self, parsed: ScoreResult) -> ScoreResult:
        """Record which scorer produced the result: the digest it reported over its own files, and
        whether that is the digest of this environment's protected folder as catalogued here."""
        expected = self.core.env.scorer_sha256
        reported = parsed.details.get("scorer_sha256")
        details = {**parsed.details, "scorer_sha256": reported, "scorer_sha256_expected": expected,
                   "scorer_matches_catalog": reported == expected}
        return ScoreResult(parsed.score, parsed.message, details)

    def _redacted(self, r: ScoreResult) -> ScoreResult:
        """A scorer that prints a secret (a service's key in a traceback) must not put it in the record."""
        redactor = self.core.redactor
        if not redactor:
            return r
        return ScoreResult(r.score, json.loads(redactor.text(json.dumps(r.message))),
                           json.loads(redactor.text(json.dumps(r.details))))
