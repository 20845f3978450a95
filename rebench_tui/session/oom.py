"""The row for the kernel killing a process of the container for memory (an OOM kill).

The capture daemon reads the container's cgroup memory events at every look and writes an
``oom`` record when their ``oom_kill`` count grows (``runtime/capture/capture.py``); the command
collector turns it into this row. It is said in the record because nothing else says it: a
process of the participant's that is killed exits with 137 like any ``kill -9``, and Docker's
``OOMKilled`` is about the container's first process only.
"""

from __future__ import annotations

from typing import Any

from ..trajectory.entries import log


def oom_rows(rec: dict[str, Any]) -> list[dict[str, Any]]:
    killed, total = rec.get("killed"), rec.get("oom_kill")
    ended = rec.get("ended") or []
    names = "; ".join(" ".join(map(str, e.get("argv") or []))[:120] for e in ended[:5])
    text = (f"out of memory: the kernel killed {killed} process(es) in the container for memory "
            f"(the container's {total} so far)" + (f"; ended around then: {names}" if names else ""))
    return [log(text, {"event": "oom_kill", "killed": killed, "oom_kill_total": total, "source": rec.get("source"),
                       "ended": ended, "ended_total": rec.get("ended_total"), "at_ms": rec.get("received")},
                title="memory")]
