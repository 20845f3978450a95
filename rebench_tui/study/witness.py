"""The workstation's side of study mode: stream a session's audit rows to the collector as they
are written.

The durable local queue is the audit log itself: it is fsynced before any row counts, and the
collector's row count is the cursor. So nothing is lost while the collector is stopped or the
network is down: on reconnect the witness asks the collector how many rows it has and sends the
rest, in order. The audit log pokes the witness after each write (``AuditLog.on_written``); a
timer retries as well.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..trajectory.entries import log_event
from ..trajectory.records import AUDIT, META
from .client import Collector, CollectorRefused, CollectorUnreachable
from .ledger import MAX_ROW_BYTES

MAX_BATCH_BYTES = 4 << 20  # of the request's JSON, in UTF-8: well under the collector's default bound
MAX_BATCH_ROWS = 2000
MIN_BATCH_BYTES = 64 << 10  # a refusal for size halves the batch, down to this


class _Shortfall(Exception):
    """The audit log has fewer rows than the collector witnessed."""


@dataclass(frozen=True)
class WitnessState:
    local: int  # rows in the session's audit log (as last read)
    witnessed: int | None  # rows the collector has (None: not known yet)
    since: float | None  # when the collector last answered
    error: str | None  # why the last attempt failed (None: it did not)

    @property
    def current(self) -> bool:
        return self.error is None and self.witnessed == self.local

    def words(self, now: float) -> str:
        if self.current:
            return f"witness: current ({self.witnessed} rows)"
        behind = "" if self.witnessed is None else f"{self.local - self.witnessed} row(s) behind; "
        if self.error is None:
            return f"witness: {behind}sending"
        ago = "" if self.since is None else f", last answer {int(now - self.since)} s ago"
        return f"⚠ witness: {behind}{self.error}{ago}; rows are kept and sent on reconnect"


def stub(line: str) -> dict[str, Any]:
    """A row too long to send whole: its place in the chain, its hash, its size, its kind and
    event (a long finish row still ends the session at the collector)."""
    row = json.loads(line)
    facts = log_event(row.get("content"))
    return {"hash": row["hash"], "prevHash": row["prevHash"], "calledAt": row["calledAt"],
            "modifiedAt": row.get("modifiedAt", row["calledAt"]), "workingMs": row.get("workingMs"),
            "kind": (row.get("content") or {}).get("type", "stub"), "bytes": len(line.rstrip("\n").encode("utf-8")),
            **({"event": facts["event"]} if facts and isinstance(facts.get("event"), str) else {})}


class Witness:
    def __init__(self, folder: Path, collector: Collector, *, retry_s: float = 2.0,
                 now: Callable[[], float] = time.time) -> None:
        self.folder = folder
        self.collector = collector
        self.retry_s = retry_s
        self._now = now
        meta = json.loads((folder / META).read_text(encoding="utf-8"))
        self.session_id = meta["id"]
        self.info = {"run_id": meta["run_id"], "env_id": meta["env_id"]}
        self._poke = threading.Event()
        self._stop = threading.Event()
        self._lock = threading.Lock()  # one sync at a time
        self._acked: int | None = None
        self._offset = 0  # byte offset of the first row not yet witnessed
        self._local = 0
        self._since: float | None = None
        self._error: str | None = None
        self._thread: threading.Thread | None = None
        self._batch_bytes = MAX_BATCH_BYTES

    # -- life -----------------------------------------------------------------------------
    def start(self, audit=None) -> "Witness":
        if audit is not None:
            audit.on_written.append(self.poke)
        self._thread = threading.Thread(target=self._run, name="witness", daemon=True)
        self._thread.start()
        return self

    def poke(self) -> None:
        self._poke.set()

    def stop(self, wait_s: float = 5.0) -> WitnessState:
        """Try to send what is left (for at most ``wait_s``), then end the thread."""
        self.wait_current(wait_s)
        self._stop.set()
        self._poke.set()
        if self._thread is not None:
            self._thread.join(timeout=wait_s + 15.0)  # a request under way ends within the client's timeout
        return self.state()

    def wait_current(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while True:
            self.sync()
            if self.state().current or time.monotonic() >= deadline:
                return self.state().current
            time.sleep(min(0.2, max(0.0, deadline - time.monotonic())))

    def state(self) -> WitnessState:
        return WitnessState(self._local, self._acked, self._since, self._error)

    def words(self) -> str:
        return self.state().words(self._now())

    def _run(self) -> None:
        delay = self.retry_s
        while not self._stop.is_set():
            ok = self.sync()
            if ok:
                delay = self.retry_s
                self._poke.wait(delay)
            else:  # back off: rows written meanwhile wait for the next try, not a connection each
                delay = min(delay * 2, 10.0)
                self._stop.wait(delay)
            self._poke.clear()

    # -- one round ------------------------------------------------------------------------
    def sync(self) -> bool:
        """Send every complete row the collector lacks; whether the collector took them all."""
        with self._lock:
            try:
                if self._acked is None:
                    self._resync()
                lines = self._unsent()
                while lines:
                    batch = self._batch(lines)
                    try:
                        answer = self.collector.send(self.session_id, self._acked, batch, self.info)
                    except CollectorRefused as exc:
                        if exc.status != 413 or len(batch) == 1 or self._batch_bytes <= MIN_BATCH_BYTES:
                            raise
                        self._batch_bytes //= 2  # too large for this collector: send it in smaller pieces
                        continue
                    sent = lines[:len(batch)]
                    self._acked = int(answer["count"])
                    self._offset += sum(len(x.encode("utf-8")) for x in sent)
                    lines = lines[len(batch):]
                self._since, self._error = self._now(), None
                return True
            except CollectorUnreachable:
                self._error = "collector unreachable"
            except CollectorRefused as exc:
                what = exc.what.split(': ', 1)[-1]
                self._error = (f"refused as too large ({exc.status}): {what}" if exc.status == 413
                               else f"refused ({exc.status}): {what}")
                self._acked = None  # ask the collector again where it stands before the next try
            except _Shortfall as exc:
                self._error = str(exc)
                self._acked = None
            return False

    def _resync(self) -> None:
        head = self.collector.head(self.session_id)
        self._acked = int(head["count"])
        self._since = self._now()
        self._offset = 0
        have = 0
        with open(self.folder / AUDIT, "rb") as fh:
            for _ in range(self._acked):
                line = fh.readline()
                if not line.endswith(b"\n"):
                    break
                self._offset += len(line)
                have += 1
        if have < self._acked:
            self._local = have
            raise _Shortfall(f"the collector witnessed {self._acked} rows but the audit log has {have}: rows were removed")

    def _unsent(self) -> list[str]:
        path = self.folder / AUDIT
        if not path.exists():
            return []
        with open(path, "rb") as fh:
            fh.seek(self._offset)
            data = fh.read()
        whole = data[: data.rfind(b"\n") + 1]  # a row still being written waits for the next round
        lines = whole.decode("utf-8").splitlines(keepends=True)
        self._local = (self._acked or 0) + len(lines)
        return lines

    def _batch(self, lines: list[str]) -> list[Any]:
        """The next request's rows: at most ``self._batch_bytes`` of JSON as sent (UTF-8 bytes,
        not characters), a row longer than the collector takes whole as its stub."""
        batch: list[Any] = []
        size = 0
        for line in lines[:MAX_BATCH_ROWS]:
            text = line.rstrip("\n")
            whole = len(text.encode("utf-8"))
            item: Any = text if whole <= MAX_ROW_BYTES else stub(line)
            cost = (len(json.dumps(text, ensure_ascii=False).encode("utf-8")) if isinstance(item, str)
                    else len(json.dumps(item).encode("utf-8"))) + 2
            if batch and size + cost > self._batch_bytes:
                break
            batch.append(item)
            size += cost
        return batch
