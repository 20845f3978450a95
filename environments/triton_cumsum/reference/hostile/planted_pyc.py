"""Compiled into ``solution/__pycache__/solution.<tag>.pyc`` and stamped with the real
``solution.py``'s modification time and size, so Python prefers it to the recorded source. It
leaves a mark in the home (a test looks for it), then answers honestly; a real attack would put a
memo or a faster kernel here, unseen by the record and the attempt fingerprint."""
import os

with open(os.path.join(os.environ.get("REBENCH_HOME", "/home/agent"), ".door-planted-pyc"), "a") as fh:
    fh.write("the planted bytecode ran\n")

from _honest import honest  # noqa: E402


def prefix_sum(x):
    return honest(x)
