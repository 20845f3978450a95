"""The shell's desk: carries out the `task` command's requests, and keeps the shell's prompt current.

The participant's `task` command (``runtime/capture/task.py``) only asks: it leaves one request
file in the sandbox's spool folder (``Sandbox.task_dir``/in, which the participant can write).
A thread here looks for it every ``interval`` seconds through the sandbox's root read (a regular
file only, never through a link, at most ``MAX_REQUEST_BYTES + 1`` bytes), removes it, parses it
strictly (``task_requests``), runs the session's own command for it (the same one the app's key
calls: ``Session.score``, ``note``, ``submit``, ``pause``, ``resume``), and writes the answer
into the spool folder, where only root can write. One request at a time: the next is read once
this one is answered.

It also writes two small files the shell's prompt reads (``hooks.sh``): ``prompt`` (the
working time left, in minutes) and ``warning`` (a number and the latest warning, printed once
before the next prompt). While the app is suspended under the shell key, it gives the time
warnings the app's clock would (``Timekeeping.tick``: each once, whoever asks first).
"""

from __future__ import annotations

import math
import threading

from ..clock import format_hms
from ..errors import RebenchError
from ..trajectory.records import ScoreRecord
from .events import SessionEvent, SessionFinished, TimeWarning
from .task_requests import (MAX_REQUEST_BYTES, BadRequest, TaskRequest, answer_bytes, parse_request, prompt_words,
                            status_words)

WRITE = ('cd "$1" || exit 1; umask 022; printf "%s" "$3" > ".$2.tmp" && mv -f ".$2.tmp" "$2"; '
         'find . -maxdepth 1 -name "answer-*" -mmin +30 -delete 2>/dev/null; exit 0')
TAKE = 'rm -f "$1/in/request"'


class Desk:
    def __init__(self, session, interval: float = 1.0) -> None:  # session: Session (not imported: it imports us)
        self.session = session
        self.interval = interval
        self.dir = session.sandbox.task_dir
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._prompt: str | None = None
        self._warning_seq = 0
        self._pending_warning: str | None = None
        self._lock = threading.Lock()
        self._listening = False
        self.handled: list[TaskRequest] = []  # what was carried out, in order (tests, the app's feed)

    @property
    def available(self) -> bool:
        return self.dir is not None

    # -- the thread ---------------------------------------------------------------------------
    def start(self) -> bool:
        """Start looking for requests; False where the sandbox has no spool folder."""
        if not self.available or self.session.finished:
            return False
        if not self._listening:
            self.session.subscribe(self._on_event)
            self._listening = True
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self._loop, name="rebench-task-desk", daemon=True)
            self._thread.start()
        return True

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.poll()
            except Exception:  # noqa: BLE001 - an engine hiccup (a link down): the next look tries again
                continue

    # -- one look -----------------------------------------------------------------------------
    def poll(self) -> TaskRequest | None:
        """Refresh the prompt files, then carry out a waiting request (returned), if any."""
        s = self.session
        if not s.finished and s.time.due():
            s.tick()  # the warning's rows, as the app's clock would write them (each once, whoever is first)
        self._refresh_prompt()
        raw = s.sandbox.read_small_file(f"{self.dir}/in/request", MAX_REQUEST_BYTES + 1)
        if not raw:
            return None
        self._exec(["sh", "-c", TAKE, "sh", self.dir])  # taken: the task command now waits for the answer
        try:
            request = parse_request(raw)
        except BadRequest as exc:
            if exc.request_id is not None:
                self._answer(exc.request_id, False, f"task: {exc}. Run task --help for the commands.")
            return None
        ok, text = self.carry_out(request)
        self._answer(request.id, ok, text)
        self.handled.append(request)
        self._refresh_prompt()
        return request

    def carry_out(self, request: TaskRequest) -> tuple[bool, str]:
        """(succeeded, what to tell the participant): the session's own command for the request."""
        s = self.session
        try:
            match request.verb:
                case "status":
                    return True, self.status_text()
                case "note":
                    if s.finished:
                        return False, "task: this session is finished: its record takes nothing more."
                    s.note(request.text)
                    return True, f"note saved: {request.text}"
                case "pause":
                    if s.pause():
                        return True, "clock paused; `task resume` (or p in the app) resumes it"
                    return False, ("task: the session is finished; the clock is stopped." if s.finished
                                   else "task: the clock is already paused.")
                case "resume":
                    if s.resume():
                        return True, "clock running"
                    return False, ("task: the session is finished; the clock is stopped." if s.finished
                                   else "task: the clock is already running.")
                case "score":
                    rec = s.score()
                    return (False, "task: the scoring was cancelled (recorded as cancelled).") if rec is None \
                        else (rec.valid or s.hidden, self._score_text(rec))
                case "submit":
                    rec = s.submit(request.text)
                    head = "submitted: the session is finished."
                    return True, head if rec is None else f"{head} Final scoring: {self._score_text(rec)}"
        except RebenchError as exc:
            return False, "task: " + str(exc).replace("\n", "\n  ")
        return False, f"task: unknown request {request.verb}"

    # -- words --------------------------------------------------------------------------------
    def status_text(self) -> str:
        s = self.session
        w = s.wclock
        lines = [s.status_line(), status_words(w.remaining(), w.used(), w.running, s.finished)]
        n = len(s.history)
        if s.scoring:
            lines.append("a scoring is running now")
        if s.hidden:
            lines.append(f"{n} scoring(s); scores are hidden in this environment")
        else:
            best = s.final()
            counts = "no valid score yet" if best is None else \
                f"counts now: {best.score:g} (normalized {_norm(best.normalized)}), attempt {best.attempt}"
            lines.append(f"{n} scoring(s); {counts}")
        lines.append("task score · task note TEXT · task submit · task pause / resume  (task --help)")
        return "\n".join(lines)

    def _score_text(self, rec: ScoreRecord) -> str:
        if self.session.hidden:
            return f"scoring {rec.attempt} recorded (scores are hidden in this environment)"
        if rec.valid:
            return f"score {rec.attempt}: {rec.score:g} (normalized {_norm(rec.normalized)})"
        return f"score {rec.attempt}: NaN — {_message(rec.message)}"

    # -- the prompt's files -------------------------------------------------------------------
    def _on_event(self, event: SessionEvent) -> None:
        """Events that the shell hears of as a warning before its next prompt."""
        match event:
            case TimeWarning(remaining_s=t):
                text = f"{format_hms(t)} of working time left"
            case SessionFinished(reason=reason):
                text = f"the session is finished ({reason}); its record takes nothing more"
            case _:
                return
        with self._lock:
            self._pending_warning = text

    def _refresh_prompt(self) -> None:
        s = self.session
        w = s.wclock
        words = prompt_words(w.remaining(), w.running, s.finished)
        if s.time_is_up:
            words = "time is up"
        if words != self._prompt:
            self._write("prompt", words + "\n")
            self._prompt = words
        with self._lock:
            text, self._pending_warning = self._pending_warning, None
        if text is not None:  # numbered by the time in ms: a new app's warnings never repeat an old number
            self._warning_seq = max(self._warning_seq + 1, int(s.clock.time() * 1000))
            self._write("warning", f"{self._warning_seq} {text}\n")

    def _answer(self, request_id: str, ok: bool, text: str) -> None:
        self._write(f"answer-{request_id}", answer_bytes(ok, text).decode("utf-8"))

    def _write(self, name: str, content: str) -> None:
        self._exec(["sh", "-c", WRITE, "sh", self.dir, name, content])

    def _exec(self, argv: list[str]) -> None:
        r = self.session.sandbox.exec(argv, user="root", timeout=30)
        if not r.ok:
            raise RuntimeError(f"the spool folder could not be written (exit {r.exit_code}): {r.stderr[-300:]}")


def _norm(value: float) -> str:
    return "n/a" if not math.isfinite(value) else f"{value:.2f}"


def _message(message: object) -> str:
    if isinstance(message, dict):
        words = [str(v) for k, v in message.items() if isinstance(v, str)] or [f"{k}: {v}" for k, v in message.items()]
        return "; ".join(words)[:300] or "no message"
    return str(message)[:300]
