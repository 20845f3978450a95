"""The participant's container frozen for a scoring: ``docker pause`` (the cgroup freezer, which no
signal of the participant's undoes), tried again where the kernel's freezer gives up, and the thaw
after it, checked against the engine's own view of the container. A mixin of the Docker sandbox.
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any, Iterator

from ..errors import RebenchError
from .exec_gate import ExecGate, ExecsInFlight


class EngineFreezer:
    """``frozen()`` for a sandbox with a ``container``, its ``gate`` and ``room_of``."""

    container: Any
    gate: ExecGate
    room_of: str | None

    @contextmanager
    def frozen(self) -> Iterator[None]:
        """The participant's container frozen by the engine (``docker pause``: the cgroup freezer,
        which no signal of theirs undoes) for the duration, then thawed; the app's own execs wait."""
        if self.room_of is not None:  # a room is never frozen: it is the scorer's
            yield
            return
        try:
            with self.gate.freeze(self._freeze, self._thaw):
                yield
        except ExecsInFlight as exc:  # raised before anything was frozen
            raise RebenchError(f"the participant's container could not be frozen for the scoring: {exc}",
                               kept="every record; nothing was scored", fix="score again in a moment") from None

    def _freeze(self) -> None:
        """``docker pause``, tried again a few times: the kernel's freezer gives up on a cgroup whose
        processes do not all stop in time (one in the middle of a disk write on a loaded machine), and
        the engine then says so (``unable to freeze``) with the container thawed. Any other failure
        (the engine slower than the client's timeout, say) may still have frozen it: thawed again
        before the error is raised, so a failed scoring never leaves the participant frozen."""
        import docker.errors

        for wait in (0.2, 0.5, 1.0, 2.0, None):
            try:
                self.container.pause()
                return
            except docker.errors.APIError as exc:
                if "freeze" in str(exc) and wait is not None:
                    time.sleep(wait)
                    continue
                failure: BaseException = exc
            except Exception as exc:  # noqa: BLE001 - a timeout: the pause may yet have happened
                failure = exc
            self._thaw_if_paused(settle_s=5.0)
            raise RebenchError(f"the participant's container could not be frozen for the scoring: "
                               f"{getattr(failure, 'explanation', None) or failure}", kept="every record; nothing was scored",
                               fix="score again (a busy disk can keep a process from stopping in time)") from None

    def _thaw_if_paused(self, settle_s: float = 0.0) -> None:
        """Thaw the container if the engine says it is paused (looking again for ``settle_s``: a
        pause the engine was still carrying out when the client gave up)."""
        deadline = time.monotonic() + settle_s
        while True:
            try:
                self.container.reload()
                if self.container.status == "paused":
                    self.container.unpause()
                    return
            except Exception:  # noqa: BLE001 - gone, or thawed meanwhile: stop and remove say the rest
                pass
            if time.monotonic() >= deadline:
                return
            time.sleep(0.5)

    def _thaw(self) -> None:
        """Thaw after a scoring; a failed unpause is looked at again (the engine's own view of the
        container), and raised only if it is still paused then."""
        try:
            self.container.unpause()
            return
        except Exception:  # noqa: BLE001 - a link lost meanwhile, or a slow engine: looked at below
            pass
        self._thaw_if_paused(settle_s=5.0)
        try:
            self.container.reload()
        except Exception:  # noqa: BLE001 - the engine is gone: the next attach thaws it
            return
        if self.container.status == "paused":
            raise RebenchError("the participant's container stayed frozen after the scoring",
                               kept="every record; the container", fix=f"`docker unpause {self.container.name}`, or "
                               "reopen the session (`rebench-tui resume`), which thaws it")
