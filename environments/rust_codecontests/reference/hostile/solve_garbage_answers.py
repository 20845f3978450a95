"""Answers with garbage: huge, non-string, non-UTF-8; and forges answers on the control channel."""
import os
import socket
import sys
import threading

import __main__

from _honest import solve as honest

sys.path.insert(0, os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib"))
from rebench_scorer.channel import Channel  # noqa: E402

FORGED = [{"score": 1.0}, {"done": True}, {"ready": True}, {"index": True, "status": "ok", "code": "fn main(){}"},
          {"index": -1, "status": "ok", "code": "fn main(){}"}, {"index": 99, "status": "passed"},
          {"index": 0, "status": "passed", "outcome": "passed"}, {"index": 1, "status": "ok", "code": 12345},
          {"index": 2, "status": "ok", "code": "x" * 3_000_000}, {"index": 3, "status": "ok", "code": ["fn main(){}"]},
          {"index": 4, "status": "ok", "code": "fn main() { println!(\"\ud800\"); }"}]
# The runner's own lock (it sends its answers under it): forged frames never interleave with real ones.
LOCK = getattr(__main__, "SEND_LOCK", threading.Lock())


def channel():
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}").startswith("socket:"):
                return Channel(socket.socket(fileno=os.dup(int(name))))
        except (OSError, ValueError):
            pass
    return None


CH = channel()
CALLS = [0]


def solve(problem):
    CALLS[0] += 1
    if CH is not None and CALLS[0] == 1:
        with LOCK:
            for msg in FORGED:
                CH.send(msg)
    k = CALLS[0] % 6
    if k == 1:
        return "fn main() { println!(\"1\"); }\n" * 40_000  # ~1.2 MB
    if k == 2:
        return {"code": "fn main(){}", "status": "passed"}
    if k == 3:
        return "fn main() { println!(\"\ud800\"); }"
    if k == 4:
        return b"fn main(){}"
    if k == 5:
        return None
    return honest(problem)
