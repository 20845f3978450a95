"""The participant's side of triton_cumsum's scoring: runs in a process of its own, as the
participant, started by score.py (which reads this file as root and passes it to ``python3 -c``).

It imports ~/solution/solution.py (or, started by the scorer with REBENCH_TRITON_TRUSTED=1 to
measure its own hand-over, uses the scorer's PyTorch reference instead) and answers the scorer's requests on the control channel:

- ``{"op": "run", "input": <buffer>, "k": K, "n": N}``: call ``prefix_sum`` on each of the K
  rows of the input, then hand the outputs back (CPU: copied into the output buffer that came with
  the request; CUDA: after a synchronize, each output shared as the input was, through PyTorch's
  IPC for a ``cuda`` input, or named by its driver IPC handle (rebench_scorer.cuda_ipc) for a
  ``cuda-ipc`` input, whose mapping is kept for later batches: the scorer writes a fresh input
  into the same buffer for every batch), and say ``{"done": true}``;
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


SPIN_S = 2.0  # on a GPU, how long a wait for the next request spins before it sleeps


def trusted_prefix_sum(x):
    """The trusted worker's kernel: the values of the scorer's reference (score.reference), in
    int32 throughout (a few plain PyTorch kernels, about a tenth of the reference's time on a GPU,
    so its batches are closer in length to those of a fast solution's). Exact: the scorer's inputs
    lie in [-10, 10), so no partial sum of 10^8 of them leaves +-10^9, inside int32."""
    import torch

    positive = (x > 0).to(torch.int32)
    odd_before = (torch.cumsum(positive, -1, dtype=torch.int32) - positive) & 1
    return torch.cumsum(torch.where(odd_before.bool(), x, 0), -1, dtype=torch.int32)


def trusted() -> bool:
    """Started by the scorer to time its own hand-over: made non-dumpable first (no process of
    the participant's user may read or trace it), and no solution is imported."""
    if os.environ.get("REBENCH_TRITON_TRUSTED") != "1":
        return False
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        raise SystemExit("could not make the trusted worker non-dumpable")
    return True


def main() -> None:
    ch = Channel.from_env()
    home = os.environ.get("REBENCH_HOME", os.path.expanduser("~"))
    solution_dir = os.path.join(home, "solution")
    try:
        import importlib.util

        import torch

        if trusted():
            ch.send({"ready": True, "torch": torch.__version__, "trusted": True})
            return serve(ch, trusted_prefix_sum, torch)
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
    serve(ch, prefix_sum, torch)


def serve(ch, prefix_sum, torch) -> None:
    """Answer the scorer's requests until it says exit."""
    held = {}  # the last run's outputs: the scorer reads them until "release"
    inputs = None  # cuda_ipc.Opener for the scorer's input buffers
    spin = SPIN_S if torch.cuda.is_available() else 0.0  # a GPU's batches are timed to the sub-millisecond
    while True:
        ch.wait(spin)
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
                held["outs"] = outs = [o.contiguous() for o in outs]
                descs = [cuda_ipc.describe(o) for o in outs]  # while the kernels run
                torch.cuda.synchronize()
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


if __name__ == "__main__":
    main()
