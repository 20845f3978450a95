"""Which CUDA IPC directions work between the root scorer and a uid-1000 worker (run as root on a
GPU host, REBENCH_SCORER_LIB pointing at a copy readable by uid 1000). Prints one line a case."""
import os
import sys

sys.path.insert(0, os.environ["REBENCH_SCORER_LIB"])
import torch  # noqa: E402

from rebench_scorer import arrays, participant  # noqa: E402

WORKER = r'''
import os, sys
sys.path.insert(0, os.environ["REBENCH_SCORER_LIB"])
import torch
from rebench_scorer import arrays
from rebench_scorer.channel import Channel
ch = Channel.from_env()
x = torch.arange(1000, dtype=torch.int32, device="cuda")
ch.send({"desc": arrays.share_cuda(x)})
msg, _ = ch.recv(60)
try:
    y = arrays.open_cuda(msg["desc"], dtype="int32", shape=[1000])
    ch.send({"root_to_worker": int(y.sum())})
except Exception as exc:
    ch.send({"root_to_worker": f"{type(exc).__name__}: {exc}"[:200]})
ch.recv(60)
'''
for who in ("uid1000", "root"):
    acct = participant.account() if who == "uid1000" else participant.Account(0, 0, "root", "/tmp")
    p = participant.start([sys.executable, "-c", WORKER], env={"REBENCH_SCORER_LIB": os.environ["REBENCH_SCORER_LIB"]},
                          who=acct, cwd="/tmp")
    msg, _ = p.channel.recv(120)
    try:
        t = arrays.open_cuda(msg["desc"], dtype="int32", shape=[1000])
        print(who, "worker->scorer:", int(t.sum()), flush=True)
    except Exception as exc:  # noqa: BLE001
        print(who, "worker->scorer:", f"{type(exc).__name__}: {exc}"[:200], flush=True)
    z = torch.arange(1000, dtype=torch.int32, device="cuda") * 2
    p.channel.send({"desc": arrays.share_cuda(z, reader_uid=acct.uid)})
    print(who, "scorer->worker:", p.channel.recv(120)[0], flush=True)
    p.channel.send({"bye": 1})
    p.wait(10); p.kill()
    print(who, "worker stderr:", p.stderr()[-300:], flush=True)
