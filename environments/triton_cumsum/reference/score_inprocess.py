"""Scorer for triton_cumsum: exactness first, then speed.

Run by the workstation as root inside the container (or by the local runtime), with
REBENCH_HOME (the participant's home) and REBENCH_PROFILE (gpu or smoke) set. Prints one JSON
line last: {"score": ln(milliseconds) or NaN, "message": {...}, "details": {...}}.

Every scoring draws a fresh random input (int32 in [-10, 10)), so no answer can be cached.
Steps: import the participant's solution (an import error is NaN); a small exactness check on
1,024 elements; warm-up calls at full size; timed calls at full size, each checked for exact
equality with a PyTorch reference. The score is the log of the median timed call in
milliseconds. Timed calls run under an alarm; running past it gives NaN with {"timeout": true}.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import signal
import statistics
import sys
import time
import traceback

PROFILES = {
    # elements, warm-up calls, timed calls, alarm for warm-ups + timed calls (seconds)
    "gpu": {"n": 100_000_000, "warmups": 3, "runs": 10, "alarm_s": 20},
    "smoke": {"n": 16_384, "warmups": 1, "runs": 3, "alarm_s": 120},
}
CHECK_N = 1024
LOW, HIGH = -10, 10


def emit(score: float, message: dict, details: dict | None = None) -> None:
    print(json.dumps({"score": score if math.isfinite(score) else "NaN", "message": message, "details": details or {}}))
    sys.stdout.flush()


class Alarm(Exception):
    pass


def on_alarm(_signum, _frame):
    raise Alarm()


def reference(x):
    import torch

    positive = (x > 0).to(torch.int64)
    odd_before = torch.remainder(torch.cumsum(positive, 0) - positive, 2).bool()
    return torch.cumsum(torch.where(odd_before, x.to(torch.int64), 0), 0).to(torch.int32)


def first_difference(out, expected) -> int | None:
    import torch

    if out.shape != expected.shape:
        return 0
    diff = torch.nonzero(out.to(torch.int64) != expected.to(torch.int64))
    return int(diff[0, 0]) if diff.numel() else None


def load_solution(home: str):
    path = os.path.join(home, "solution", "solution.py")
    sys.path.insert(0, os.path.dirname(path))
    spec = importlib.util.spec_from_file_location("solution", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.prefix_sum


def main() -> int:
    profile = os.environ.get("REBENCH_PROFILE", "gpu")
    cfg = PROFILES.get(profile)
    if cfg is None:
        emit(math.nan, {"error": f"unknown profile {profile!r}"})
        return 0
    import torch

    device = "cuda" if profile == "gpu" else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        emit(math.nan, {"error": "the gpu profile needs a CUDA device and none is visible"})
        return 0
    details = {"profile": profile, "n": cfg["n"], "device": device, "torch": torch.__version__}
    try:
        prefix_sum = load_solution(os.environ.get("REBENCH_HOME", "/home/agent"))
    except Exception as exc:  # noqa: BLE001 - any failure to import is the participant's to see
        emit(math.nan, {"error": f"could not import solution.py: {type(exc).__name__}: {exc}"},
             {**details, "traceback": traceback.format_exc()[-4000:]})
        return 0

    seed = int.from_bytes(os.urandom(8), "little")
    gen = torch.Generator(device=device).manual_seed(seed)
    details["seed"] = seed

    def sync():
        if device == "cuda":
            torch.cuda.synchronize()

    def call(x):
        out = prefix_sum(x.clone())
        sync()
        return out

    # 1) exactness on a small input (catches most bugs fast, and compile errors)
    small = torch.randint(LOW, HIGH, (CHECK_N,), dtype=torch.int32, device=device, generator=gen)
    try:
        out = call(small)
    except Exception as exc:  # noqa: BLE001
        emit(math.nan, {"error": f"prefix_sum raised {type(exc).__name__}: {exc}", "results_match": False},
             {**details, "traceback": traceback.format_exc()[-4000:]})
        return 0
    bad = first_difference(out, reference(small))
    if bad is not None:
        emit(math.nan, {"results_match": False, "first_different_index": bad, "checked_n": CHECK_N}, details)
        return 0

    # 2) full size: warm-ups, then timed calls, all under one alarm
    x = torch.randint(LOW, HIGH, (cfg["n"],), dtype=torch.int32, device=device, generator=gen)
    expected = reference(x)
    sync()
    signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(cfg["alarm_s"])
    times_ms: list[float] = []
    try:
        for _ in range(cfg["warmups"]):
            call(x)
        for _ in range(cfg["runs"]):
            inp = x.clone()
            sync()
            if device == "cuda":
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                out = prefix_sum(inp)
                end.record()
                torch.cuda.synchronize()
                times_ms.append(start.elapsed_time(end))
            else:
                t0 = time.perf_counter()
                out = prefix_sum(inp)
                times_ms.append((time.perf_counter() - t0) * 1000)
            bad = first_difference(out, expected)
            if bad is not None:
                signal.alarm(0)
                emit(math.nan, {"results_match": False, "first_different_index": bad}, {**details, "times_ms": times_ms})
                return 0
    except Alarm:
        emit(math.nan, {"timeout": True}, {**details, "alarm_s": cfg["alarm_s"], "times_ms": times_ms})
        return 0
    except Exception as exc:  # noqa: BLE001
        signal.alarm(0)
        emit(math.nan, {"error": f"prefix_sum raised {type(exc).__name__}: {exc}", "results_match": False},
             {**details, "traceback": traceback.format_exc()[-4000:]})
        return 0
    signal.alarm(0)
    median = statistics.median(times_ms)
    details["times_ms"] = [round(t, 5) for t in times_ms]
    emit(math.log(median), {"time": median / 1000.0, "time_ms": round(median, 5), "results_match": True,
                            "first_different_index": None}, details)
    return 0


if __name__ == "__main__":
    sys.exit(main())
