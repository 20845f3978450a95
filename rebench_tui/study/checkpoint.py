"""The collector's WAL checkpoints, off the writers' path. SQLite's own checkpoint runs inside
the commit that grew the write-ahead log past its threshold, on the writer's thread and under
the ledger's lock; while a researcher's view holds a read snapshot it cannot finish, so every
commit would try again. Here the writer's connection never checkpoints: a thread of the
collector does, on a connection of its own, whenever the log has grown past ``WAL_BYTES``.
A PASSIVE checkpoint waits for no one and no writer waits for it; committed rows are safe in
the log either way (a process killed mid-checkpoint leaves a log SQLite replays on the next
open)."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

WAL_BYTES = 4 << 20  # SQLite's own default threshold: 1,000 pages of 4 KiB
WAL_KEPT = 1 << 20  # the writer's journal_size_limit: a log started over shrinks to this, so growth shows
EVERY_S = 0.25


class Checkpointer:
    def __init__(self, path: Path) -> None:
        self._wal = Path(str(path) + "-wal")
        self._conn = sqlite3.connect(str(path), check_same_thread=False, timeout=30)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="collector-checkpoint", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        last = 0  # the log's size at the last checkpoint: one a reader's snapshot held back is not retried
        while not self._stop.wait(EVERY_S):  # until the log has grown by WAL_BYTES again (each one fsyncs)
            try:
                size = self._wal.stat().st_size
                if size < last:
                    last = 0  # the log was started over
                if size - last >= WAL_BYTES:
                    self._conn.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                    last = size
            except (OSError, sqlite3.Error):
                continue  # no log yet, or busy: the next round tries again

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._conn.close()
