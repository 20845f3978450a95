"""Runs the participant's solve() on the held-out problems; executed by score.py as the participant.

score.py reads this file and starts `python3 -c <this source> PROBLEMS_JSON` as the owner of
the home folder (not root, without the protected group, with a clean environment that holds
no secret), in /home/agent/solution. PROBLEMS_JSON holds the problems without their hidden
tests. The environment gives REBENCH_SOLVE_SECONDS (the budget per problem) and
REBENCH_PARALLEL (how many problems are solved at once, each in its own thread).

Protocol, on the original stdout (the participant's prints go to stderr): one JSON object per
line, {"index": i, "status": "ok"|"error"|"timeout"|"bad_return", ...} per problem, then
{"done": true}; or a single {"fatal": "...", "traceback": "..."} if solve.py cannot be used.
A problem whose solve() runs past the budget is reported as "timeout" and its thread is
abandoned (the process exits once every problem is answered or abandoned).
"""

import importlib.util
import json
import os
import sys
import threading
import time
import traceback

OUT = os.fdopen(os.dup(1), "w", buffering=1)  # not inherited by child processes (PEP 446)
os.dup2(2, 1)
SEND_LOCK = threading.Lock()
MAX_CODE = 1 << 20


def send(obj):
    line = json.dumps(obj)
    with SEND_LOCK:
        OUT.write(line + "\n")
        OUT.flush()


def finish(code=0):
    try:
        sys.stdout.flush()  # the participant's prints (fd 1 is the stderr log now)
        sys.stderr.flush()
    finally:
        os._exit(code)


def load_solve():
    path = os.path.join(os.getcwd(), "solve.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist")
    sys.path.insert(0, os.getcwd())
    spec = importlib.util.spec_from_file_location("solve", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["solve"] = module
    spec.loader.exec_module(module)
    fn = getattr(module, "solve", None)
    if not callable(fn):
        raise AttributeError("solve.py defines no function solve(problem)")
    return fn


def main():
    with open(sys.argv[1], encoding="utf-8") as fh:
        problems = json.load(fh)
    budget = float(os.environ.get("REBENCH_SOLVE_SECONDS", "120"))
    parallel = max(1, int(os.environ.get("REBENCH_PARALLEL", "4")))
    try:
        solve = load_solve()
    except BaseException as exc:  # noqa: BLE001 - SyntaxError, SystemExit, anything: the scaffold is unusable
        send({"fatal": f"could not import solve.py: {type(exc).__name__}: {exc}",
              "traceback": traceback.format_exc()[-4000:]})
        finish()

    answered = {}
    cond = threading.Condition()

    def work(i):
        t0 = time.monotonic()
        try:
            code = solve(problems[i])
            if isinstance(code, str):
                rec = {"status": "ok", "code": code[:MAX_CODE]}
            else:
                rec = {"status": "bad_return", "error": f"solve() returned {type(code).__name__}, not str"}
        except BaseException as exc:  # noqa: BLE001
            rec = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:1000],
                   "traceback": traceback.format_exc()[-3000:]}
        rec["seconds"] = round(time.monotonic() - t0, 3)
        with cond:
            if i not in answered:
                answered[i] = True
                send({"index": i, **rec})
            cond.notify_all()

    pending = list(range(len(problems)))
    running = {}
    with cond:
        while pending or running:
            now = time.monotonic()
            for i in [i for i in running if i in answered]:
                del running[i]
            for i, t0 in list(running.items()):
                if now - t0 > budget:
                    answered[i] = True
                    del running[i]
                    send({"index": i, "status": "timeout", "seconds": round(now - t0, 3)})
            while pending and len(running) < parallel:
                i = pending.pop(0)
                running[i] = time.monotonic()
                threading.Thread(target=work, args=(i,), daemon=True, name=f"solve-{i}").start()
            if pending or running:
                cond.wait(timeout=0.2)
    send({"done": True})
    finish()


main()
