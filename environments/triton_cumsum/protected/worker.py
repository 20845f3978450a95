"""The participant's side of triton_cumsum's scoring: runs in a process of its own, as the
participant, started by score.py (which reads this file as root and passes it to ``python3 -c``).

It imports ~/solution/solution.py and answers the scorer's requests on the control channel:

- ``{"op": "run", "input": <buffer>, "k": K, "n": N}``: call ``prefix_sum`` on each of the K
  rows of the input, then hand the outputs back (CPU: copied into the output buffer that came with
  the request; CUDA: after a synchronize, each output shared as the input was, through PyTorch's
  IPC for a ``cuda`` input, or named by its driver IPC handle (rebench_scorer.cuda_ipc) for a
  ``cuda-ipc`` input, whose mapping is kept for later batches), and say ``{"done": true}``;
- ``{"op": "release"}``: drop the outputs of the last run;
- ``{"op": "exit"}``.

Nothing this process says is believed: the scorer times the calls with its own clock and checks
every output itself. A solution that changes this file's behaviour (it can: it runs here) only
changes what it hands back.
"""

import os
import sys
import traceback

sys.path.insert(0, os.environ["REBENCH_SCORER_LIB"])

from rebench_scorer import arrays, cuda_ipc  # noqa: E402
from rebench_scorer.channel import Channel  # noqa: E402


def main() -> None:
    ch = Channel.from_env()
    home = os.environ.get("REBENCH_HOME", os.path.expanduser("~"))
    solution_dir = os.path.join(home, "solution")
    try:
        import importlib.util

        import torch

        sys.path.insert(0, solution_dir)
        spec = importlib.util.spec_from_file_location("solution", os.path.join(solution_dir, "solution.py"))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        prefix_sum = module.prefix_sum
    except BaseException as exc:  # noqa: BLE001 - the scorer reports it as NaN
        ch.send({"error": f"could not import solution.py: {type(exc).__name__}: {exc}",
                 "traceback": traceback.format_exc()[-4000:]})
        return
    ch.send({"ready": True, "torch": torch.__version__})
    held = {}  # the last run's outputs: the scorer reads them until "release"
    inputs = None  # cuda_ipc.Opener for the scorer's input buffers
    while True:
        msg, fds = ch.recv()
        op = msg.get("op")
        if op == "exit":
            return
        if op == "release":
            held.clear()
            if torch.cuda.is_available():
                torch.cuda.ipc_collect()
            ch.send({"released": True})
            continue
        if op != "run":
            ch.send({"error": f"unknown request {op!r}"})
            continue
        k, n = int(msg["k"]), int(msg["n"])
        try:
            if msg["input"]["kind"] == "cuda":
                held["x"] = x = arrays.open_cuda(msg["input"], dtype="int32", shape=[k, n])
                outs = [prefix_sum(x[i]) for i in range(k)]
                torch.cuda.synchronize()
                held["outs"] = outs = [o.contiguous() for o in outs]
                descs = [arrays.share_cuda(o) for o in outs]
                del x, outs
                ch.send({"done": True, "outputs": descs})
            elif msg["input"]["kind"] == "cuda-ipc":
                if inputs is None:
                    inputs = cuda_ipc.Opener(device=0)
                x = inputs.open(msg["input"], dtype="int32", shape=[k, n])
                outs = [prefix_sum(x[i]) for i in range(k)]
                torch.cuda.synchronize()
                held["outs"] = outs = [o.contiguous() for o in outs]
                descs = [cuda_ipc.describe(o) for o in outs]
                del x, outs
                ch.send({"done": True, "outputs": descs})
            else:
                in_fd, out_fd = fds
                x = arrays.tensor_on(arrays.map_fd(in_fd, k * n * 4, writable=True, private=True), "int32", [k, n])
                out = arrays.tensor_on(arrays.map_fd(out_fd, k * n * 4, writable=True), "int32", [k, n])
                for i in range(k):
                    y = prefix_sum(x[i])
                    out[i].copy_(y)  # a wrong shape raises here; the scorer checks the values
                for fd in fds:
                    os.close(fd)
                ch.send({"done": True})
        except BaseException as exc:  # noqa: BLE001
            ch.send({"error": f"prefix_sum raised {type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-4000:]})


main()
