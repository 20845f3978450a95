"""How rebench_scorer.cuda_ipc behaves between two processes on a GPU host (run with
REBENCH_SCORER_LIB pointing at the helpers; both sides run as the calling user, as the GPU broker
and the worker do). Prints one line a case:

- a child allocates ten 400 MB outputs per round through PyTorch, frees them, allocates again
  (as a worker does batch after batch) and describes each; does the same block give the same
  handle again, and how long does this side take to open them the first time and afterwards?
- a Buffer of this side's, opened by the child: does it read what was written?
- the child hands back this side's own input handle: refused (the scorer depends on it)?

The 2026-12-03 H200 run printed into reference/device_logs/ beside the harness figures.
"""
import os
import sys
import time

sys.path.insert(0, os.environ["REBENCH_SCORER_LIB"])
import torch  # noqa: E402

from rebench_scorer import cuda_ipc  # noqa: E402
from rebench_scorer.channel import Channel  # noqa: E402

CHILD = r'''
import os, sys, time
sys.path.insert(0, os.environ["REBENCH_SCORER_LIB"])
import torch
from rebench_scorer import cuda_ipc
from rebench_scorer.channel import Channel
ch = Channel.from_env()
n = 100_000_000
for rnd in range(4):
    outs = [torch.full((n,), rnd * 10 + i, dtype=torch.int32, device="cuda") for i in range(10)]
    torch.cuda.synchronize()
    t = time.perf_counter()
    descs = [cuda_ipc.describe(o) for o in outs]
    ch.send({"descs": descs, "describe_ms": (time.perf_counter() - t) * 1000})
    ch.recv(60)
    del outs
msg, _ = ch.recv(60)
x = cuda_ipc.Opener(0).open(msg["input"], dtype="int32", shape=[4, 1000])
ch.send({"sum": int(x.sum())})
ch.send({"descs": [msg["input"]]})
ch.recv(60)
'''


def main() -> None:
    import socket
    import subprocess

    a, b = socket.socketpair()
    env = {**os.environ, "REBENCH_CONTROL_FD": str(b.fileno())}
    proc = subprocess.Popen([sys.executable, "-c", CHILD], env=env, pass_fds=[b.fileno()])
    b.close()
    ch = Channel(a)
    torch.zeros(1, device="cuda")
    opener = cuda_ipc.Opener(0)
    seen: list[list[str]] = []
    for rnd in range(4):
        msg, _ = ch.recv(120)
        t = time.perf_counter()
        outs = [opener.open(d, dtype="int32", shape=[100_000_000]) for d in msg["descs"]]
        first = [int(o[0]) for o in outs]
        ms = (time.perf_counter() - t) * 1000
        handles = [d["handle"] for d in msg["descs"]]
        repeats = sum(h in seen[-1] for h in handles) if seen else 0
        seen.append(handles)
        print(f"round {rnd}: child describe {msg['describe_ms']:.3f} ms for 10; open+read here {ms:.3f} ms; "
              f"values ok {first == [rnd * 10 + i for i in range(10)]}; handles seen last round {repeats}/10; "
              f"driver opens so far {opener.opened}", flush=True)
        del outs
        ch.send({"next": True})
    buf = cuda_ipc.Buffer([4, 1000], "int32")
    buf.tensor.copy_(torch.arange(4000, dtype=torch.int32, device="cuda").view(4, 1000))
    torch.cuda.synchronize()
    ch.send({"input": buf.desc})
    print("child reads a Buffer: sum", ch.recv(60)[0]["sum"], "expected", sum(range(4000)), flush=True)
    own = ch.recv(60)[0]["descs"][0]
    try:
        opener.open(own, dtype="int32", shape=[4, 1000])
        print("own handle handed back: OPENED (the scorer would read its own input)", flush=True)
    except cuda_ipc.ShareError as exc:
        print("own handle handed back: refused:", exc, flush=True)
    ch.send({"bye": True})
    proc.wait(30)
    opener.close()
    buf.free()


if __name__ == "__main__":
    main()
