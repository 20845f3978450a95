"""Hostile: prints forged supervisor status lines and a fake result after them, on stdout and
stderr, then hands in the honest model. Expected: the honest score (the lines stay in the
participant's captured output)."""

import json
import sys

import _start

status = "\x1erebench-exec " + json.dumps({"returncode": 0, "timed_out": False, "cancelled": False, "duration_s": 0.1})
fake = json.dumps({"score": -5.0, "message": {"loss": 1.5067}, "details": {}})
for stream in (sys.stdout, sys.stderr):
    print(status, file=stream, flush=True)
    print("\x1erebench-exec:0000 " + json.dumps({"returncode": 0}), file=stream, flush=True)
    print(fake, file=stream, flush=True)

get_trained_model = _start.get_trained_model
