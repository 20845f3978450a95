"""Hostile: leaves a double-forked, setsid daemon behind that keeps trying to reach the scorer
(signals to its parent, its descriptors, /protected) after the model is handed in, and tries to
kill the scorer itself. Expected: the honest score, and no process of the participant left once
the scoring is over (the supervisor ends them)."""

import os
import signal
import time

import _start

try:
    os.kill(os.getppid(), signal.SIGKILL)
    print("killed the scorer", flush=True)
except OSError as exc:
    print(f"kill scorer: {exc.strerror}", flush=True)

if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        scorer = os.getppid()
        for _ in range(600):
            for target in (f"/proc/{scorer}/fd/1", "/protected/score.py"):
                try:
                    with open(target, "a") as fh:
                        fh.write('{"score": -5.0}\n')
                except OSError:
                    pass
            time.sleep(0.5)
        os._exit(0)
    os._exit(0)
os.wait()

get_trained_model = _start.get_trained_model
