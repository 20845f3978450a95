"""Scorer for triton_cumsum: exactness first, then speed, with the participant's code in a
process of its own.

Run by the workstation as root inside the container (or by the local runtime) with REBENCH_HOME
and REBENCH_PROFILE (gpu or smoke). The result goes into the scorer's result channel
(rebench_scorer.result), never through stdout.

Who does what:
- The participant's ``solution.py`` is imported and called only in a worker process (worker.py,
  run as the participant with no access to /protected, this process's memory, its clock or its
  result channel). It gets inputs and hands outputs back through shared buffers (memfd on the
  CPU, CUDA IPC on a GPU) and a control socket.
- This process draws every input (fresh random int32 in [-10, 10) for every call), computes the
  expected output with its own PyTorch reference, times the calls with its own clock, and checks
  every output.

Timing: a batch of K calls on K different inputs. The clock starts when the inputs are in place
and the request is sent; it stops when this process has itself read the right values at S secret
random positions of every output (so a worker that says "done" before its kernels have finished
gains nothing: the check fails until they have). Then, outside the clock, every element of every
output is compared. The score is ln of the median over timed batches of (batch time / K), in
milliseconds. The per-batch cost of the hand-over (a request, a reply, opening K output buffers
and one gather) is part of the time. Measured on an H200 with the default ``torch`` IPC mode
(reference/device_logs/2026-12-03-h200-harness_gpu-broker.log, same run): starting solution
4.19-4.23 ms a call here vs 3.83 ms in-process with CUDA events; reference kernel 0.73-0.76 ms vs
0.42-0.48 ms. That is about 3.5 ms a batch of 10 calls (0.35 ms a call), mostly opening freshly
shared output buffers: more than the 5% the in-process figure allows. The ``driver`` modes
(IPC_MODES below) keep mappings across batches to cut it; they have not run on a GPU yet.
"""

from __future__ import annotations

import os
import sys

PR_GET_DUMPABLE, PR_SET_DUMPABLE = 3, 4
if "--broker" in sys.argv[1:]:  # the GPU side (gpu_broker): out of reach of the participant's processes before anything loads
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise SystemExit("could not make the GPU broker non-dumpable")

sys.path.insert(0, os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib"))
from rebench_scorer import result  # noqa: E402  (first: takes the result channel out of reach)

import math  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

from rebench_scorer import arrays, cuda_ipc, participant, room  # noqa: E402
from rebench_scorer.channel import ChannelError  # noqa: E402

PROFILES = {
    # n: elements per call; k: calls per batch (each its own input); warmup/timed: batches;
    # samples: secret positions read per output to stop the clock; budget_s: everything after import
    "gpu": {"n": 100_000_000, "k": 10, "warmup": 1, "timed": 5, "samples": 4096, "budget_s": 120, "import_s": 120,
            "ipc": "torch"},
    "smoke": {"n": 16_384, "k": 2, "warmup": 0, "timed": 3, "samples": 256, "budget_s": 150, "import_s": 90},
}
CHECK_N = 1024
LOW, HIGH = -10, 10
HERE = os.path.dirname(os.path.abspath(__file__)) if "__file__" in globals() else ""


class Invalid(Exception):
    """The solution's answer is wrong or it broke the protocol: NaN with this message."""

    def __init__(self, message: dict) -> None:
        super().__init__(str(message))
        self.message = message


def reference(x):
    import torch

    positive = (x > 0).to(torch.int64)
    odd_before = torch.remainder(torch.cumsum(positive, -1) - positive, 2).bool()
    return torch.cumsum(torch.where(odd_before, x.to(torch.int64), 0), -1).to(torch.int32)


def first_difference(out, expected) -> int | None:
    import torch

    diff = torch.nonzero((out.to(torch.int64) != expected.to(torch.int64)).reshape(-1))
    return int(diff[0, 0]) if diff.numel() else None


class Harness:
    """This side of the exchange with the worker."""

    def __init__(self, worker: participant.Participant, device: str, gen, deadline: float, ipc: str = "torch") -> None:
        self.worker = worker
        self.device = device
        self.gen = gen
        self.deadline = deadline
        self.ipc = ipc  # on a GPU: one of IPC_MODES
        self.inputs: dict = {}
        self.opener = cuda_ipc.Opener(device=0) if device == "cuda" and ipc != "torch" else None

    def _recv(self) -> dict:
        """The worker's next message. Its process ending is an answer too (children it left may
        still hold the socket open), looked at every half second."""
        while True:
            left = self.deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError()
            try:
                msg, fds = self.worker.channel.recv(timeout=min(left, 0.5))
                break
            except ChannelError as exc:
                if "in time" not in str(exc):
                    raise Invalid({"error": f"the solution's process stopped answering: {exc}"}) from None
                if not self.worker.alive():
                    raise Invalid({"error": f"the solution's process ended (exit status {self.worker.wait(0)})"}) from None
        for fd in fds:  # nothing is expected to come this way
            os.close(fd)
        if "error" in msg:
            raise Invalid({"error": str(msg.get("error"))[:2000], "results_match": False})
        return msg

    def batch(self, n: int, k: int, samples: int) -> tuple[float, object, object]:
        """One timed batch: (seconds from request to checked samples, the outputs, the expected)."""
        import torch

        x = torch.randint(LOW, HIGH, (k, n), dtype=torch.int32, device=self.device, generator=self.gen)
        expected = reference(x)
        pos = torch.randint(0, n, (k, samples), device=self.device, generator=self.gen)
        want = torch.gather(expected, 1, pos)
        if self.device == "cuda":
            if self.ipc == "torch":
                desc = arrays.share_cuda(x, reader_uid=self.worker.who.uid)
            else:
                buf = self._input_buffer(k, n)
                buf.tensor.copy_(x)  # expected came from this process's own x: what the worker does to buf changes nothing
                desc = buf.desc
                del x
            torch.cuda.synchronize()
            started = time.perf_counter()
            self.worker.channel.send({"op": "run", "k": k, "n": n, "input": desc})
            reply = self._recv()
            outputs = reply.get("outputs")
            if not isinstance(outputs, list) or len(outputs) != k:
                raise Invalid({"error": f"the solution's process handed back {type(outputs).__name__} instead of {k} outputs"})
            try:
                if self.ipc == "torch":
                    outs = [arrays.open_cuda(d, dtype="int32", shape=[n]) for d in outputs]
                else:
                    outs = [self.opener.open(d, dtype="int32", shape=[n]) for d in outputs]
            except (arrays.ShareError, cuda_ipc.ShareError, RuntimeError) as exc:
                raise Invalid({"error": f"an output could not be read as a 1-D int32 CUDA tensor of {n} elements "
                                        f"(prefix_sum must return a tensor of its own, not its input): {exc}",
                               "results_match": False}) from None
            out = outs  # the opened buffers themselves: nothing is copied
            got = lambda: torch.stack([torch.gather(o, 0, pos[i]) for i, o in enumerate(outs)])  # noqa: E731
        else:
            nbytes = k * n * 4
            in_fd, out_fd = arrays.memfd(nbytes, "input"), arrays.memfd(nbytes, "output")
            inp = arrays.tensor_on(arrays.map_fd(in_fd, nbytes, writable=True), "int32", [k, n])
            inp.copy_(x)
            out = arrays.tensor_on(arrays.map_fd(out_fd, nbytes, writable=True), "int32", [k, n])
            out.fill_(-1)
            ro = arrays.read_only_fd(in_fd)
            started = time.perf_counter()
            self.worker.channel.send({"op": "run", "k": k, "n": n, "input": {"kind": "memfd"}}, fds=[ro, out_fd])
            os.close(ro)
            self._recv()
            got = lambda: torch.gather(out, 1, pos)  # noqa: E731
        # Stop the clock only on values this process has read itself.
        polls = 0
        while True:
            sample = got()
            if torch.equal(sample, want):
                break
            polls += 1
            if polls > 200 or time.monotonic() > self.deadline:
                break  # wrong (or never finished): the full check below says where
            time.sleep(0.0005)
        elapsed = time.perf_counter() - started
        return elapsed, out, expected

    def _input_buffer(self, k: int, n: int):
        """The buffer the worker reads a batch's input from: one of its own (cuda_ipc.Buffer, so
        the worker's mapping shows nothing else of this process), made once per shape and kept
        (``driver``), or made afresh for every batch (``driver-fresh``: the worker learns of it
        only with the request, and opens it inside the clock)."""
        key = (k, n)
        buf = self.inputs.get(key)
        if buf is not None and self.ipc == "driver-fresh":
            buf.free()
            buf = None
        if buf is None:
            buf = self.inputs[key] = cuda_ipc.Buffer([k, n], "int32")
        return buf

    def release(self) -> None:
        """Both sides let go of the last batch's outputs, so the worker's allocator hands the same
        blocks out again next batch (with ``torch`` IPC a shared block stays held back until every
        side has let go; with ``driver`` IPC this side keeps its mappings and reuses them)."""
        if self.device == "cuda":
            import torch

            torch.cuda.synchronize()
            self.worker.channel.send({"op": "release"})
            self._recv()
            if self.ipc == "torch":
                torch.cuda.ipc_collect()

    def close(self) -> dict:
        if self.opener is not None:
            details = {"buffers_mapped": self.opener.opened, "distinct_outputs": len(self.opener.mapped)}
            self.opener.close()
            for buf in self.inputs.values():
                buf.free()
            self.inputs.clear()
            return details
        return {}


def check(outs, expected, n: int) -> None:
    for i in range(expected.shape[0]):
        bad = first_difference(outs[i], expected[i])
        if bad is not None:
            raise Invalid({"results_match": False, "first_different_index": bad, "checked_n": n})


def score(profile: str, cfg: dict, details: dict, worker_code: str) -> tuple[float, dict]:
    import torch

    device = "cuda" if profile == "gpu" else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise Invalid({"error": "the gpu profile needs a CUDA device and none is visible"})
    details.update({"profile": profile, "n": cfg["n"], "calls_per_batch": cfg["k"], "device": device,
                    "torch": torch.__version__, "harness": "separate process"})
    lib = os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib")
    worker = participant.start([sys.executable, "-c", worker_code], env={"REBENCH_SCORER_LIB": lib},
                               cwd=os.path.join(participant.account().home, "solution"))
    details["_worker"] = worker
    seed = int.from_bytes(os.urandom(8), "little")
    gen = torch.Generator(device=device).manual_seed(seed)
    h = Harness(worker, device, gen, time.monotonic() + cfg["import_s"], ipc=cfg.get("ipc", "torch"))
    details["ipc"] = cfg.get("ipc", "torch") if device == "cuda" else "memfd per batch"
    try:
        return timed(h, cfg, details)
    finally:
        details.update(h.close())


def timed(h: Harness, cfg: dict, details: dict) -> tuple[float, dict]:
    ready = h._recv()
    if not ready.get("ready"):
        raise Invalid({"error": "the solution's process did not say it was ready"})
    h.deadline = time.monotonic() + cfg["budget_s"]
    # 1) exactness on a small input (catches most bugs fast, and compile errors)
    _t, outs, expected = h.batch(CHECK_N, 1, min(cfg["samples"], CHECK_N))
    check(outs, expected, CHECK_N)
    h.release()
    # 2) full size: warm-up batches, then timed ones; every output checked
    per_call_ms: list[float] = []
    for b in range(cfg["warmup"] + cfg["timed"]):
        elapsed, outs, expected = h.batch(cfg["n"], cfg["k"], cfg["samples"])
        check(outs, expected, cfg["n"])
        del outs
        h.release()
        if b >= cfg["warmup"]:
            per_call_ms.append(elapsed * 1000 / cfg["k"])
    median = statistics.median(per_call_ms)
    details["per_call_ms"] = [round(t, 5) for t in per_call_ms]
    return math.log(median), {"time": median / 1000.0, "time_ms": round(median, 5), "results_match": True,
                              "first_different_index": None}


def gpu_broker() -> int:
    """The GPU side of a gpu-profile scoring (``score.py --broker``, started by the root scorer).

    The NVIDIA driver maps a CUDA IPC buffer only between processes of one user (checked on an
    H200: root <-> uid 1000 fails both ways with "mapping of buffer object failed"). So on a GPU
    the inputs, expected outputs, clock and checks live in this process, which runs as the
    participant's user but is made non-dumpable first: processes of that user can no longer read
    its memory or trace it (that takes CAP_SYS_PTRACE), only signal it, which can end a scoring
    (NaN), never shorten it. It starts the worker itself and hands its result to the root scorer
    over its control channel; the root scorer alone writes the result.

    Every other door a process of the participant's user could open into it is shut: it is made
    non-dumpable before it imports anything (top of this file); it runs isolated (``-I``: no
    current folder, script folder, user site directory, ``usercustomize`` or ``PYTHON*``
    variable), reads and writes no bytecode cache, in ``/``, with the scorer's environment
    (never the participant's), and a home, temporary folder and caches (CUDA's compiled kernels
    off, Triton's and Inductor's in its room) of its own (``rebench_scorer.room``)."""
    from rebench_scorer.channel import Channel

    ch = Channel.from_env()
    msg, _fds = ch.recv(60)
    profile = msg.get("profile") if msg.get("profile") in PROFILES else "gpu"
    import ctypes

    dumpable = ctypes.CDLL(None, use_errno=True).prctl(PR_GET_DUMPABLE, 0, 0, 0, 0)
    details: dict = {"gpu_broker": {"uid": os.getuid(), "dumpable": bool(dumpable), "isolated": bool(sys.flags.isolated),
                                    "cwd": os.getcwd(), "home": os.path.expanduser("~"), "path": sys.path}}
    cfg = {**PROFILES[profile], "ipc": msg.get("ipc") if msg.get("ipc") in IPC_MODES else PROFILES["gpu"]["ipc"]}
    try:
        value, message = score(profile, cfg, details, msg["worker_code"])
    except Invalid as exc:
        value, message = math.nan, exc.message
    except TimeoutError:
        value, message = math.nan, {"timeout": True}
    except Exception as exc:  # noqa: BLE001
        value, message = math.nan, {"error": f"the scorer failed: {type(exc).__name__}: {exc}"}
    end_worker(details)
    ch.send({"value": value if math.isfinite(value) else None, "message": message, "details": details})
    return 0


def end_worker(details: dict) -> None:
    worker = details.pop("_worker", None)
    if worker is None:
        return
    try:
        if worker.alive():
            worker.channel.send({"op": "exit"})
            worker.wait(2)
    except ChannelError:
        pass
    worker.kill()
    details.update(worker.report())


def through_broker(details: dict, worker_code: str, profile: str = "gpu") -> tuple[float, dict]:
    """Run :func:`gpu_broker` as the participant's user and take its result (checked for shape)."""
    with open(os.path.abspath(__file__), encoding="utf-8") as fh:
        own = fh.read()
    lib = os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib")
    # Isolated (-I: nothing of the home on sys.path, no user site), in no folder of the home, with a
    # home and caches of its own: it imports and reads only what the scorer means it to.
    broker = participant.start(room.python_argv(own, "--broker"), env={"REBENCH_SCORER_LIB": lib}, trusted=True)
    try:
        broker.channel.send({"worker_code": worker_code, "ipc": ipc_mode(), "profile": profile})
        msg, fds = broker.channel.recv(timeout=PROFILES[profile]["import_s"] + PROFILES[profile]["budget_s"] + 30)
        for fd in fds:
            os.close(fd)
    except ChannelError as exc:
        broker.kill()
        details.update({"broker_" + k: v for k, v in broker.report().items()})
        raise Invalid({"error": f"the scorer's GPU side ended before it answered ({exc})"}) from None
    broker.wait(5)
    broker.kill()
    value, message, got = msg.get("value"), msg.get("message"), msg.get("details")
    if not (value is None or isinstance(value, (int, float))) or not isinstance(message, dict) or not isinstance(got, dict):
        raise Invalid({"error": "the scorer's GPU side answered in an unexpected shape"})
    details.update(got)
    return (math.nan if value is None else float(value)), message


# How buffers cross between the GPU side and the worker:
# - torch: PyTorch's own IPC (share_cuda/open_cuda), a fresh input and K fresh output mappings
#   every batch. Measured on the H200 (2026-12-03): correct, ~0.35 ms of overhead a call.
# - driver / driver-fresh: rebench_scorer.cuda_ipc (driver handles, mappings reused across
#   batches; the input in a buffer of its own, kept, or made afresh each batch). Written to cut
#   that overhead; NOT yet run on a GPU (no device time was left), so not the default.
#   reference/harness_gpu.sh measures all three side by side.
IPC_MODES = ("torch", "driver", "driver-fresh")


def ipc_mode() -> str:
    """The gpu profile's IPC mode: the profile's, or REBENCH_TRITON_IPC (set by whoever runs the
    scorer, as harness_gpu.sh does; the participant cannot reach the scorer's environment)."""
    mode = os.environ.get("REBENCH_TRITON_IPC", PROFILES["gpu"]["ipc"])
    return mode if mode in IPC_MODES else PROFILES["gpu"]["ipc"]


def uses_broker(profile: str) -> bool:
    """A root scorer times on a GPU through the broker; REBENCH_TRITON_BROKER=1 (the scorer's own
    environment, out of the participant's reach) sends the smoke profile the same way, so the
    broker's path can be tried on a CPU."""
    wanted = profile == "gpu" or os.environ.get("REBENCH_TRITON_BROKER") == "1"
    return wanted and os.geteuid() == 0 and participant.account().uid != 0


def main() -> int:
    if "--broker" in sys.argv[1:]:
        return gpu_broker()
    profile = os.environ.get("REBENCH_PROFILE", "gpu")
    cfg = PROFILES.get(profile)
    details: dict = {}
    if cfg is None:
        result.emit(math.nan, {"error": f"unknown profile {profile!r}"})
        return 0
    with open(os.path.join(HERE, "worker.py"), encoding="utf-8") as fh:
        worker_code = fh.read()
    try:
        if uses_broker(profile):
            value, message = through_broker(details, worker_code, profile)
        else:
            value, message = score(profile, {**cfg, "ipc": ipc_mode()} if profile == "gpu" else cfg, details, worker_code)
    except Invalid as exc:
        value, message = math.nan, exc.message
    except TimeoutError:
        value, message = math.nan, {"timeout": True}
    except Exception as exc:  # noqa: BLE001 - a fault of the scorer's own: say so
        value, message = math.nan, {"error": f"the scorer failed: {type(exc).__name__}: {exc}"}
    end_worker(details)
    result.emit(value, message, details)
    return 0


if __name__ == "__main__":
    sys.exit(main())
