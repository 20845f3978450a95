"""Leaves files in the shared temporary folders (/tmp, /dev/shm) for the next scoring to find (a
cache of answers or compiled kernels would go there), then answers honestly. Expected: the
honest score, and nothing of it left after the scoring."""
import os

for folder in ("/tmp", "/dev/shm"):
    os.makedirs(os.path.join(folder, "rebench-memo"), exist_ok=True)
    with open(os.path.join(folder, "rebench-memo", "answers"), "w") as fh:
        fh.write("kept for the next scoring\n")

from _honest import honest  # noqa: E402


def prefix_sum(x):
    return honest(x)
