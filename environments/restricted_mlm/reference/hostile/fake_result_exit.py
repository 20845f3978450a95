"""Hostile: prints a fake best result where scorers' results used to be read (stdout, stderr,
their raw descriptors), then ends its process before the scorer gets anything.
Expected: NaN, "the model's process ended ... without handing in its graph"."""

import json
import os
import sys

LINE = json.dumps({"score": -5.0, "message": {"loss": 1.5067, "execution_time": 0.01}, "details": {}})
print(LINE, flush=True)
print(LINE, file=sys.stderr, flush=True)
for fd in (1, 2):
    try:
        os.write(fd, (LINE + "\n").encode())
    except OSError:
        pass
os._exit(0)
