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

Timing: a batch of K calls on K different inputs, timed by this process's own clock from the
moment the batch's input starts to be written until this process has itself read the right values
at S secret random positions of every output (so a worker that says "done" before its kernels
have finished gains nothing: the check fails until they have). Then, outside the clock, every
element of every output is compared. The score is ln of the median over timed batches of (batch
time / K), in milliseconds. On a GPU the input's write is on the clock (see Harness for why) and
its least measured duration comes back off, and so does the harness's own hand-over, measured in
the same scoring with a trusted worker running the scorer's own kernel (see handover()). The
message gives the time with and without that correction; the details keep the raw figures beside
the scored ones, and where the clock's time went in each batch.
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
    # handover: batches of the scorer's own kernel through a trusted worker, each beside the same
    # kernel timed in this process, to measure the hand-over that comes off (see handover()), at K
    # calls a batch and at handover_k calls
    "gpu": {"n": 100_000_000, "k": 20, "warmup": 1, "timed": 5, "samples": 4096, "budget_s": 120, "import_s": 120,
            "ipc": "driver", "write_probes": 5, "handover": 5, "handover_k": 4},
    "smoke": {"n": 16_384, "k": 2, "warmup": 0, "timed": 3, "samples": 256, "budget_s": 150, "import_s": 90},
}
CHECK_N = 1024
SPIN_S = 2.0  # on a GPU, how long a wait for the worker spins before it sleeps
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
    """This side of the exchange with the worker.

    On a GPU (``driver`` IPC, the default) the input buffer and the output mappings are made once
    and reused batch after batch, and the clock covers, in order:

    1. writing this batch's input into the shared buffer (a random-number kernel replaying the
       generator state the expected output was computed from). The worker has that buffer mapped,
       so an input written before the clock could be watched and worked on before the request;
       written on the clock, any such work is on the clock too (two processes' kernels never run
       at once on one GPU: the driver time-slices their contexts). The write's own duration is
       then taken back out: the least write time this scorer measured with its own CUDA events
       (before the worker existed, and in every batch), never anything the worker says;
    2. the request, the worker's calls and its reply naming the K outputs;
    3. reading S secret random positions of every output through one view (one kernel) and
       finding them right.
    """

    def __init__(self, device: str, gen, deadline: float, ipc: str = "driver", share: "Harness | None" = None) -> None:
        self.worker: participant.Participant | None = None
        self.device = device
        self.gen = gen
        self.deadline = deadline
        self.ipc = ipc  # on a GPU: one of IPC_MODES (below)
        # ``share``: a harness whose input buffers and write times this one uses too (the trusted
        # worker's, measuring the hand-over, uses the participant's: same buffers, same figures)
        self.inputs: dict = {} if share is None else share.inputs  # (k, n) -> cuda_ipc.Buffer, the worker's input
        self.owns_inputs = share is None
        self.private: dict = {}  # (k, n) -> this process's own copy of a batch's input
        self.writes_ms: dict = {} if share is None else share.writes_ms  # (k, n) -> every event-timed input write
        self.phases: list[dict] = []  # per timed batch, where the clock's time went
        self.opener = cuda_ipc.Opener(device=0) if device == "cuda" and ipc == "driver" else None
        self._aim: tuple | None = None  # (output pointers, one view over them, their offsets in it)
        if self.opener is not None:
            import torch

            self.regen = torch.Generator(device="cuda")
            self.events = (torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))

    def _recv(self) -> dict:
        """The worker's next message. Its process ending is an answer too (children it left may
        still hold the socket open), looked at every half second. On a GPU the first
        :data:`SPIN_S` are spent spinning, not sleeping (see Channel.wait)."""
        if self.device == "cuda":
            self.worker.channel.wait(max(0.0, min(SPIN_S, self.deadline - time.monotonic())))
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

    def _outputs(self, reply: dict, k: int) -> list:
        outputs = reply.get("outputs")
        if not isinstance(outputs, list) or len(outputs) != k:
            raise Invalid({"error": f"the solution's process handed back {type(outputs).__name__} instead of {k} outputs"})
        return outputs

    @staticmethod
    def _unreadable(n: int, exc: Exception) -> Invalid:
        return Invalid({"error": f"an output could not be read as a 1-D int32 CUDA tensor of {n} elements "
                                 f"(prefix_sum must return a tensor of its own, not its input): {exc}",
                        "results_match": False})

    def batch(self, n: int, k: int, samples: int) -> tuple[float, object, object]:
        """One timed batch: (seconds from the clock's start to checked samples, the outputs, the
        expected outputs). On a GPU with ``driver`` IPC the seconds still include the input's
        write; :meth:`per_call_ms` takes it back out."""
        if self.opener is not None:
            return self._batch_driver(n, k, samples)
        import torch

        x = torch.randint(LOW, HIGH, (k, n), dtype=torch.int32, device=self.device, generator=self.gen)
        expected = reference(x)
        pos = torch.randint(0, n, (k, samples), device=self.device, generator=self.gen)
        want = torch.gather(expected, 1, pos)
        if self.device == "cuda":  # torch IPC: a fresh input and K fresh output mappings every batch
            desc = arrays.share_cuda(x, reader_uid=self.worker.who.uid)
            torch.cuda.synchronize()
            started = time.perf_counter()
            self.worker.channel.send({"op": "run", "k": k, "n": n, "input": desc})
            outputs = self._outputs(self._recv(), k)
            try:
                outs = [arrays.open_cuda(d, dtype="int32", shape=[n]) for d in outputs]
            except (arrays.ShareError, RuntimeError) as exc:
                raise self._unreadable(n, exc) from None
            out = outs
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
        self._until_right(got, want)
        return time.perf_counter() - started, out, expected

    def _until_right(self, got, want) -> int:
        """Stop the clock only on values this process has read itself (polls taken)."""
        import torch

        polls = 0
        while not torch.equal(got(), want):
            polls += 1
            if polls > 200 or time.monotonic() > self.deadline:
                break  # wrong (or never finished): the full check says where
            time.sleep(0.0005)
        return polls

    def _batch_driver(self, n: int, k: int, samples: int) -> tuple[float, object, object]:
        import torch

        key = (k, n)
        buf = self._input_buffer(k, n)
        x = self.private.get(key)
        if x is None:
            x = self.private[key] = torch.empty((k, n), dtype=torch.int32, device="cuda")
        state = self.gen.get_state()
        torch.randint(LOW, HIGH, (k, n), generator=self.gen, out=x)
        expected = torch.empty_like(x)
        for i in range(k):  # a row at a time: the reference's int64 steps stay small
            expected[i] = reference(x[i])
        pos = torch.randint(0, n, (k, samples), device="cuda", generator=self.gen)
        want = torch.gather(expected, 1, pos)
        self.regen.set_state(state)  # the write on the clock replays x exactly
        guess = self._aim[2][:, None] + pos if self._aim is not None and len(self._aim[0]) == k else None
        torch.cuda.synchronize()

        started = time.perf_counter()
        write_ms = self._write(buf, self.regen)
        sent = time.perf_counter()
        self.worker.channel.send({"op": "run", "k": k, "n": n, "input": buf.desc})
        outputs = self._outputs(self._recv(), k)
        answered = time.perf_counter()
        try:
            ptrs = tuple(self.opener.locate(d, dtype="int32", shape=[n]) for d in outputs)
        except (cuda_ipc.ShareError, RuntimeError) as exc:
            raise self._unreadable(n, exc) from None
        if self._aim is None or self._aim[0] != ptrs:
            self._aim_at(ptrs, n)
            guess = None
        index = guess if guess is not None else self._aim[2][:, None] + pos
        located = time.perf_counter()
        polls = self._until_right(lambda: torch.take(self._aim[1], index), want)
        ended = time.perf_counter()
        self.phases.append({"write_gpu": write_ms, "write": (sent - started) * 1e3, "request_to_reply": (answered - sent) * 1e3,
                            "locate": (located - answered) * 1e3, "sample_check": (ended - located) * 1e3, "polls": polls})
        outs = [cuda_ipc.view(p, [n], "int32", self.opener) for p in ptrs]
        return ended - started, outs, expected

    def _aim_at(self, ptrs: tuple, n: int) -> None:
        """One int32 view from the lowest output to the end of the highest, and each output's
        offset in it: a batch's samples are then one ``take`` (one kernel), whatever K is. Only
        positions inside the outputs (each checked by :meth:`cuda_ipc.Opener.locate` to lie in
        its mapping) are ever read through it."""
        import torch

        low = min(ptrs)
        if any((p - low) % 4 for p in ptrs):
            raise Invalid({"error": "an output is not aligned to int32", "results_match": False})
        span = (max(ptrs) - low) // 4 + n
        flat = cuda_ipc.view(low, [span], "int32", self.opener)
        offsets = torch.tensor([(p - low) // 4 for p in ptrs], dtype=torch.int64, device="cuda")
        self._aim = (ptrs, flat, offsets)

    def _write(self, buf, gen) -> float:
        """Fill ``buf`` from ``gen`` and wait for it: the write's GPU time in ms, by this
        process's own events (kept: the least of them is what the clock gives back)."""
        import torch

        begin, end = self.events
        begin.record()
        torch.randint(LOW, HIGH, tuple(buf.tensor.shape), generator=gen, out=buf.tensor)
        end.record()
        end.synchronize()
        ms = begin.elapsed_time(end)
        self.writes_ms.setdefault(tuple(buf.tensor.shape), []).append(ms)
        return ms

    def measure_writes(self, k: int, n: int, times: int) -> None:
        """Time the input write before the worker exists (no other context of this scoring on
        the GPU), so the least write time does not depend on the worker."""
        if self.opener is None:
            return
        import torch

        buf = self._input_buffer(k, n)
        gen = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(8), "little"))
        for _ in range(times):
            self._write(buf, gen)

    def per_call_ms(self, elapsed: float, k: int, n: int) -> tuple[float, float]:
        """(per-call ms as scored, per-call ms as the clock read): the least input write measured
        for this shape comes off a ``driver`` batch."""
        raw = elapsed * 1000 / k
        writes = self.writes_ms.get((k, n))
        return ((elapsed * 1000 - min(writes)) / k if writes else raw), raw

    def inprocess_ms(self, fn, n: int, k: int) -> float:
        """Per-call ms of ``fn`` run here, in this process, on a batch of K fresh inputs: K calls
        back to back, as the worker makes them, between two CUDA events (a CPU: the clock)."""
        import torch

        x = torch.randint(LOW, HIGH, (k, n), dtype=torch.int32, device=self.device, generator=self.gen)
        if self.device == "cuda":
            torch.cuda.synchronize()
            begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            begin.record()
            outs = [fn(x[i]) for i in range(k)]
            end.record()
            end.synchronize()
            ms = begin.elapsed_time(end)
        else:
            started = time.perf_counter()
            outs = [fn(x[i]) for i in range(k)]
            ms = (time.perf_counter() - started) * 1e3
        del outs, x
        return ms / k

    def _input_buffer(self, k: int, n: int):
        """The buffer the worker reads a batch's input from: one of its own (cuda_ipc.Buffer, so
        the worker's mapping shows nothing else of this process), made once per shape and kept."""
        key = (k, n)
        buf = self.inputs.get(key)
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
            self._aim = None
            self.private.clear()
            self.opener.close()
            if self.owns_inputs:
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
    seed = int.from_bytes(os.urandom(8), "little")
    gen = torch.Generator(device=device).manual_seed(seed)
    ipc = cfg.get("ipc", "driver")
    h = Harness(device, gen, time.monotonic() + cfg["import_s"], ipc=ipc)
    details["ipc"] = ipc if device == "cuda" else "memfd per batch"
    lib = os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib")
    try:
        for calls in handover_calls(cfg) if cfg.get("handover") else [cfg["k"]]:  # before the worker exists
            h.measure_writes(calls, cfg["n"], cfg.get("write_probes", 0))
        trusted = handover(h, cfg, worker_code, lib) if cfg.get("handover") else None
        h.worker = participant.start([sys.executable, "-c", worker_code], env={"REBENCH_SCORER_LIB": lib},
                                     cwd=os.path.join(participant.account().home, "solution"))
        details["_worker"] = h.worker
        return timed(h, cfg, details, trusted)
    finally:
        details.update(h.close())


def run_batches(h: Harness, cfg: dict, beside=None, ready: bool = True) -> tuple[list[float], list[float]]:
    """The exchange every worker goes through: (its "ready", unless already read) a small
    exactness check, then warm-up and timed full-size batches, every output checked in full.
    (seconds on the clock per timed batch, and ``beside()``'s figure taken just before each timed
    batch, if given)."""
    if ready and not h._recv().get("ready"):
        raise Invalid({"error": "the solution's process did not say it was ready"})
    h.deadline = time.monotonic() + cfg["budget_s"]
    # 1) exactness on a small input (catches most bugs fast, and compile errors)
    _t, outs, expected = h.batch(CHECK_N, 1, min(cfg["samples"], CHECK_N))
    check(outs, expected, CHECK_N)
    h.release()
    # 2) full size: warm-up batches, then timed ones; every output checked
    elapsed: list[float] = []
    besides: list[float] = []
    count = cfg["timed"] if beside is None else cfg["handover"]
    for b in range(cfg["warmup"] + count):
        figure = beside() if beside is not None else None
        seconds, outs, expected = h.batch(cfg["n"], cfg["k"], cfg["samples"])
        check(outs, expected, cfg["n"])
        del outs
        h.release()
        if b >= cfg["warmup"]:
            elapsed.append(seconds)
            if figure is not None:
                besides.append(figure)
    h.phases = h.phases[-count:]
    return elapsed, besides


def handover_calls(cfg: dict) -> list[int]:
    """Calls per trusted batch, longest first: the participant's K, and a shorter batch
    (``handover_k``, by default K/5) so the hand-over is known at two batch lengths."""
    k = cfg["k"]
    short = cfg.get("handover_k", max(1, k // 5))
    return [k] if short >= k else [k, short]


def handover(h: Harness, cfg: dict, worker_code: str, lib: str) -> list[dict]:
    """Measure this harness's own hand-over, before the participant's worker exists: a trusted
    worker (worker.py running a plain PyTorch kernel of the scorer's, started from this process's
    own copy of the code, non-dumpable) goes through exactly the exchange a solution does, and before
    each of its timed batches the same kernel runs here on a batch of the same shape between CUDA
    events. The difference is time the harness adds to a batch (the request, the worker waking, the
    reply, the sample check). It is measured at two batch lengths (K calls, and fewer), because it
    grows with the batch's length: a line through the two figures says what comes off a batch of
    any length (see corrected()). Nothing the participant controls runs while it is measured (their
    other processes are stopped during a scoring; their worker does not exist yet); a GPU busy with
    other work shows up in this scorer's own input writes, and such a measurement is refused rather
    than used. One entry per batch length: its calls, seconds per timed batch, in-process ms per
    call beside each, and where each batch's time went."""
    t = Harness(h.device, h.gen, time.monotonic() + cfg["import_s"], ipc=h.ipc, share=h)
    t.worker = participant.start(room.python_argv(worker_code), env={"REBENCH_SCORER_LIB": lib, "REBENCH_TRITON_TRUSTED": "1"},
                                 trusted=True)
    points = []
    try:
        kernel = trusted_kernel(worker_code)
        for i, calls in enumerate(handover_calls(cfg)):
            c = {**cfg, "k": calls}
            t.phases = []
            seconds, here = run_batches(t, c, beside=lambda c=c: t.inprocess_ms(kernel, c["n"], c["k"]), ready=i == 0)
            points.append({"calls": calls, "seconds": seconds, "inprocess_ms": here, "phases": t.phases})
    except (Invalid, TimeoutError) as exc:
        message = exc.message if isinstance(exc, Invalid) else {"timeout": True}
        raise Invalid({"error": f"the scorer could not measure its own hand-over (its trusted worker failed: {message}); "
                                "nothing of the solution's was run. Score again; if it repeats, the GPU or its driver "
                                "is at fault"}) from None
    finally:
        end_worker({"_worker": t.worker})
        t.close()
        if h.device == "cuda":
            import torch

            torch.cuda.empty_cache()  # the in-process batches' blocks: the participant's worker may need them
    return points


def trusted_kernel(worker_code: str):
    """The trusted worker's kernel, from the very code it runs (worker.py, whose main() runs
    only as ``__main__``), so the in-process figure is of the same function."""
    namespace = {"__name__": "rebench_trusted_worker"}
    exec(compile(worker_code, "worker.py", "exec"), namespace)  # noqa: S102 - the scorer's own file
    return namespace["trusted_prefix_sum"]


BUSY = 1.5  # a trusted batch whose input write took this many times the least write shared the GPU


def handover_point(h: Harness, cfg: dict, point: dict) -> dict:
    """One batch length's figures: the trusted kernel's per-call ms through the harness and
    in-process (medians), and the hand-over per batch they imply; refused if the GPU was busy."""
    k, n = point["calls"], cfg["n"]
    harness = statistics.median(h.per_call_ms(t, k, n)[0] for t in point["seconds"])
    here = statistics.median(point["inprocess_ms"])
    out = {"calls": k, "through_harness_ms": round(harness, 5), "in_process_ms": round(here, 5),
           "per_batch_ms": round(max(0.0, harness - here) * k, 4), "kernel_per_batch_ms": round(here * k, 4),
           "in_process_each_ms": [round(t, 5) for t in point["inprocess_ms"]],
           "through_harness_each_ms": [round(h.per_call_ms(t, k, n)[0], 5) for t in point["seconds"]]}
    if point["phases"] and h.opener is not None:
        out["batch_phases_ms"] = phase_medians(point["phases"])
        least = min(h.writes_ms[(k, n)])
        if statistics.median(p["write_gpu"] for p in point["phases"]) > BUSY * least:
            raise Invalid({"error": "the GPU was busy with other work while the scorer measured its own hand-over "
                                    f"(its input writes took over {BUSY}x their least time): no score was given; "
                                    "end whatever else runs on the GPU and score again", "handover": out})
    return out


def handover_line(points: list[dict]) -> tuple[float, float, float]:
    """(fixed ms, ms per ms of kernel, up to how many ms of kernel): the hand-over of a batch as a
    line in the batch's kernel time through the two measured lengths (one length: a constant),
    held level past the longer one (measured on an H100: a line carried past it takes too much off
    long batches; the hand-over is a few ms a batch whatever the kernel). The slope is never below
    zero and the line never below zero at a batch of no time; the shorter batch's figure is met
    exactly, since fast kernels (short batches) are where the hand-over matters most."""
    short = min(points, key=lambda p: p["kernel_per_batch_ms"])
    long_ = max(points, key=lambda p: p["kernel_per_batch_ms"])
    span = long_["kernel_per_batch_ms"] - short["kernel_per_batch_ms"]
    slope = max(0.0, (long_["per_batch_ms"] - short["per_batch_ms"]) / span) if span > 0 else 0.0
    fixed = short["per_batch_ms"] - slope * short["kernel_per_batch_ms"]
    if fixed < 0:  # the line through the two would cross zero: keep the short figure, proportional
        fixed, slope = 0.0, short["per_batch_ms"] / short["kernel_per_batch_ms"]
    return fixed, slope, long_["kernel_per_batch_ms"]


def kernel_ms(batch_ms: float, fixed: float, slope: float, upto: float) -> float:
    """The kernel time of a batch that took ``batch_ms`` (after its input write), by the hand-over
    line of handover_line(): B + fixed + slope * min(B, upto) = batch_ms, solved for B."""
    if batch_ms >= upto * (1 + slope) + fixed:
        return batch_ms - fixed - slope * upto
    return (batch_ms - fixed) / (1 + slope)


def corrected(h: Harness, cfg: dict, trusted: list[dict] | None, elapsed: list[float]) -> tuple[list[float], dict]:
    """Per-call ms of each timed batch as scored, and the figures behind them: the clock's, the
    input write taken off (driver IPC) and the hand-over taken off (when measured), by the line of
    handover_line() (see kernel_ms())."""
    k, n = cfg["k"], cfg["n"]
    scored, raw = map(list, zip(*(h.per_call_ms(t, k, n) for t in elapsed)))
    out: dict = {}
    if h.opener is not None:
        writes = h.writes_ms.get((k, n), [])
        out.update({"per_call_raw_ms": [round(t, 5) for t in raw], "input_write_ms": [round(t, 4) for t in writes],
                    "input_write_subtracted_ms": round(min(writes), 4), "batch_phases_ms": phase_medians(h.phases)})
    if trusted is None:
        return scored, out
    points = [handover_point(h, cfg, p) for p in trusted]
    fixed, slope, upto = handover_line(points)
    kept = [k * t for t in scored]
    kernel = [kernel_ms(m, fixed, slope, upto) for m in kept]
    per_call = (statistics.median(kept) - statistics.median(kernel)) / k
    full = next(p for p in points if p["calls"] == k)
    out["handover"] = {"per_call_ms": round(per_call, 5), "fixed_per_batch_ms": round(fixed, 4),
                       "per_kernel_ms": round(slope, 5), "level_from_kernel_ms": round(upto, 4), "points": points,
                       "kernel": "the scorer's own PyTorch kernel (worker.trusted_prefix_sum), in a trusted worker",
                       "through_harness_ms": full["through_harness_ms"], "in_process_ms": full["in_process_ms"],
                       "full_batches_per_call_ms": round(full["per_batch_ms"] / k, 5)}
    out["per_call_uncorrected_ms"] = [round(t, 5) for t in scored]
    scored = [b / k for b in kernel]
    if min(scored) <= 0:
        raise Invalid({"error": "the hand-over the scorer measured with its own kernel is longer than this solution's "
                                "whole time: the measurement cannot be trusted; score again", "handover": out["handover"]})
    return scored, out


def phase_medians(phases: list[dict]) -> dict:
    return {name: round(statistics.median(p[name] for p in phases), 4) for name in phases[0]}


def timed(h: Harness, cfg: dict, details: dict, trusted: list[dict] | None = None) -> tuple[float, dict]:
    elapsed, _ = run_batches(h, cfg)
    # the least input write (over every batch and the probes) is known only now
    scored, figures = corrected(h, cfg, trusted, elapsed)
    median = statistics.median(scored)
    details["per_call_ms"] = [round(t, 5) for t in scored]
    details.update(figures)
    message = {"time": median / 1000.0, "time_ms": round(median, 5), "results_match": True, "first_different_index": None}
    if "handover" in figures:
        message.update({"time_uncorrected_ms": round(statistics.median(figures["per_call_uncorrected_ms"]), 5),
                        "handover_ms": figures["handover"]["per_call_ms"]})
    return math.log(median), message


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
    cfg = {**PROFILES[profile], **checked_overrides(msg.get("overrides"))}
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
        broker.channel.send({"worker_code": worker_code, "overrides": overrides(), "profile": profile})
        phase = PROFILES[profile]["import_s"] + PROFILES[profile]["budget_s"]
        msg, fds = broker.channel.recv(timeout=2 * phase + 30)  # the trusted worker's turn, then the solution's
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
# - driver (the default): rebench_scorer.cuda_ipc driver handles; the input buffer and the output
#   mappings are made once and reused, the input is written on the clock (see Harness).
# - torch: PyTorch's own IPC (share_cuda/open_cuda), a fresh input and K fresh output mappings
#   every batch: about 0.35 ms a call of hand-over on an H200. Kept to measure against.
IPC_MODES = ("driver", "torch")


def overrides() -> dict:
    """The settings that whoever runs the scorer may change for a measurement (as the reference/
    scripts and the tests do): REBENCH_TRITON_IPC (an IPC mode), REBENCH_TRITON_K (calls per
    batch), REBENCH_TRITON_HANDOVER (trusted batches measuring the hand-over; 0: none) and
    REBENCH_TRITON_HANDOVER_K (calls in the shorter trusted batches; K or more: one length only).
    They live in the scorer's environment, out of the participant's reach."""
    names = ("ipc", "k", "handover", "handover_k")
    return checked_overrides({name: os.environ.get(f"REBENCH_TRITON_{name.upper()}") for name in names})


def checked_overrides(given: object) -> dict:
    out: dict = {}
    if not isinstance(given, dict):
        return out
    if given.get("ipc") in IPC_MODES:
        out["ipc"] = given["ipc"]
    for name, low, high in (("k", 1, 64), ("handover", 0, 20), ("handover_k", 1, 64)):
        value = given.get(name)
        if isinstance(value, (int, str)) and not isinstance(value, bool) and str(value).isdigit() and low <= int(value) <= high:
            out[name] = int(value)
    return out


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
            value, message = score(profile, {**cfg, **overrides()}, details, worker_code)
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
