"""Runs the participant's solve() for the scorer; executed by score.py as the participant.

score.py reads this file and starts `python3 -c <this source>` through rebench_scorer.participant:
as the owner of the home folder (not root, without the protected group), with a clean
environment that holds no secret, in /home/agent/solution, with a control channel
(rebench_scorer.channel) as its only link to the scorer. Nothing this process says is believed:
the scorer compiles and runs every program itself, on tests this process never sees.

Protocol on the channel (JSON objects):
    runner -> scorer  {"ready": true} once solve.py is imported, or {"fatal": str, "traceback": str}
    scorer -> runner  {"solve": i, "problem": {...}} (the problem without its hidden tests), as
                      many at once as REBENCH_PARALLEL; each is solved in a thread of its own
    runner -> scorer  {"index": i, "status": "ok", "code": str} or {"index": i, "status":
                      "error" | "bad_return" | "too_big", "error": str, "traceback": str}
    scorer -> runner  {"stop": true}, or the channel closes: the process ends

The scorer keeps the clock: an answer that comes later than REBENCH_SOLVE_SECONDS after its
problem was sent counts as a timeout, and the thread is abandoned.
"""

import importlib.util
import json
import os
import sys
import threading
import traceback

sys.path.insert(0, os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib"))
from rebench_scorer.channel import Channel, ChannelError  # noqa: E402

CHANNEL = Channel.from_env()
os.environ.pop("REBENCH_CONTROL_FD", None)
os.set_inheritable(CHANNEL.sock.fileno(), False)  # not handed to the processes solve() starts
SEND_LOCK = threading.Lock()
MAX_CODE_BYTES = 256 * 1024  # the harness's limit (rust_harness.MAX_SOURCE_BYTES)


def send(obj):
    with SEND_LOCK:
        try:
            CHANNEL.send(obj)
        except ChannelError:
            os._exit(3)  # the scorer is gone


def finish(code=0):
    try:
        sys.stdout.flush()
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


def answer(i, code):
    if not isinstance(code, str):
        return {"index": i, "status": "bad_return", "error": f"solve() returned {type(code).__name__}, not str"}
    size = len(code.encode("utf-8", "surrogatepass"))
    if size > MAX_CODE_BYTES:
        return {"index": i, "status": "too_big", "error": f"the program has {size} bytes, more than {MAX_CODE_BYTES}"}
    return {"index": i, "status": "ok", "code": code}


def main():
    try:
        solve = load_solve()
    except BaseException as exc:  # noqa: BLE001 - SyntaxError, SystemExit, anything: the scaffold is unusable
        send({"fatal": f"could not import solve.py: {type(exc).__name__}: {exc}"[:2000],
              "traceback": traceback.format_exc()[-4000:]})
        finish()
    send({"ready": True})

    def work(i, problem):
        try:
            rec = answer(i, solve(problem))
        except BaseException as exc:  # noqa: BLE001
            rec = {"index": i, "status": "error", "error": f"{type(exc).__name__}: {exc}"[:1000],
                   "traceback": traceback.format_exc()[-3000:]}
        try:
            json.dumps(rec)
        except (TypeError, ValueError) as exc:
            rec = {"index": i, "status": "bad_return", "error": f"the answer cannot be sent: {exc}"[:1000]}
        send(rec)

    while True:
        try:
            msg, _fds = CHANNEL.recv(None)
        except ChannelError:
            finish()
        if msg.get("stop"):
            finish()
        if isinstance(msg.get("solve"), int):
            threading.Thread(target=work, args=(msg["solve"], msg.get("problem")), daemon=True,
                             name=f"solve-{msg['solve']}").start()


main()
