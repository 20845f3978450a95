"""Where a batch's time goes in triton_cumsum's gpu harness, phase by phase, beside the in-process
CUDA-event figure of the same kernel in the same run.

Run on a GPU as the participant's user (not root: the worker must be the same user to map CUDA
IPC buffers), with REBENCH_SCORER_LIB pointing at rebench_tui/runtime/lib and REBENCH_HOME at a home
whose solution/solution.py is the kernel to look at:

    python3 harness_profile.py [--k 10] [--batches 5] [--profile]

It runs the scorer's own Harness (protected/score.py) with a copy of protected/worker.py that
also reports, per batch, when it received the request, launched, finished describing its outputs,
synchronized and replied (time.perf_counter is CLOCK_MONOTONIC, one clock for both processes),
and each call's GPU time by CUDA events. ``--profile`` adds a torch.profiler pass on both sides
(their busiest operations and CUDA API calls, as tables). Nothing here is used for scoring.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ENV = os.path.dirname(HERE)
sys.path.insert(0, os.environ["REBENCH_SCORER_LIB"])
_spec = importlib.util.spec_from_file_location("tc_score", os.path.join(ENV, "protected", "score.py"))
score = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(score)

from rebench_scorer import participant  # noqa: E402

DIAG_BRANCH = '''                t_open = time.perf_counter()
                x = inputs.open(msg["input"], dtype="int32", shape=[k, n])
                evs = [torch.cuda.Event(enable_timing=True) for _ in range(k + 1)]
                t_launch0 = time.perf_counter()
                evs[0].record()
                outs = []
                for i in range(k):
                    outs.append(prefix_sum(x[i]))
                    evs[i + 1].record()
                t_launched = time.perf_counter()
                held["outs"] = outs = [o.contiguous() for o in outs]
                descs = [cuda_ipc.describe(o) for o in outs]
                t_described = time.perf_counter()
                torch.cuda.synchronize()
                t_synced = time.perf_counter()
                diag = {"recv": _T["recv"], "open_ms": (t_launch0 - t_open) * 1e3, "launch0": t_launch0,
                        "launched": t_launched, "described": t_described, "synced": t_synced,
                        "calls_ms": [evs[i].elapsed_time(evs[i + 1]) for i in range(k)]}
                del x, outs
                diag["send"] = time.perf_counter()
                ch.send({"done": True, "outputs": descs, "diag": diag})
'''

PROFILED_MAIN = '''
if os.environ.get("TC_WORKER_PROFILE"):
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as _prof:
        main()
    with open(os.environ["TC_WORKER_PROFILE"], "w") as _fh:
        _fh.write(_prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=12))
        _fh.write(_prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))
else:
    main()
'''


def diagnostic_worker() -> str:
    """protected/worker.py with timestamps in its cuda-ipc branch (and an optional profiler)."""
    with open(os.path.join(ENV, "protected", "worker.py"), encoding="utf-8") as fh:
        code = fh.read()
    begin = code.index('                x = inputs.open(msg["input"]')
    end = code.index("\n", code.index('ch.send({"done": True, "outputs": descs})', begin)) + 1
    code = code[:begin] + DIAG_BRANCH + code[end:]
    code = code.replace("        msg, fds = ch.recv()\n", "        msg, fds = ch.recv()\n        _T['recv'] = time.perf_counter()\n", 1)
    code = code.replace("import traceback\n", "import time\nimport traceback\n_T = {}\n", 1)
    tail = 'if __name__ == "__main__":\n    main()'
    assert code.rstrip().endswith(tail), "worker.py no longer ends with its main guard"
    return code.rstrip()[: -len(tail)] + PROFILED_MAIN


def in_process_ms(home: str, calls: int = 10) -> list[float]:
    """The old scorer's way (reference/score_inprocess.py): each call on a fresh clone of one input,
    CUDA events around the call, in this process."""
    import torch

    sys.path.insert(0, os.path.join(home, "solution"))
    spec = importlib.util.spec_from_file_location("solution", os.path.join(home, "solution", "solution.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    x = torch.randint(-10, 10, (100_000_000,), dtype=torch.int32, device="cuda")
    for _ in range(3):
        module.prefix_sum(x.clone())
    times = []
    for _ in range(calls):
        inp = x.clone()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        module.prefix_sum(inp)
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return times


def run(home: str, k: int, batches: int, worker_profile: str | None) -> dict:
    import torch

    n = score.PROFILES["gpu"]["n"]
    gen = torch.Generator(device="cuda").manual_seed(int.from_bytes(os.urandom(8), "little"))
    h = score.Harness("cuda", gen, time.monotonic() + 300, ipc="driver")
    h.measure_writes(k, n, 5)
    env = {"REBENCH_SCORER_LIB": os.environ["REBENCH_SCORER_LIB"]}
    if worker_profile:
        env["TC_WORKER_PROFILE"] = worker_profile
    h.worker = participant.start([sys.executable, "-c", diagnostic_worker()], env=env, cwd=os.path.join(home, "solution"))
    last: dict = {}
    recv = h._recv

    def kept() -> dict:
        last["msg"] = msg = recv()
        last["at"] = time.perf_counter()
        return msg

    h._recv = kept
    rows = []
    try:
        assert h._recv().get("ready"), "the worker did not say it was ready"
        _t, outs, expected = h.batch(score.CHECK_N, 1, score.CHECK_N)
        score.check(outs, expected, score.CHECK_N)
        h.release()
        for b in range(1 + batches):
            seconds, outs, expected = h.batch(n, k, 4096)
            answered = last["at"]
            diag = last["msg"].get("diag", {})
            score.check(outs, expected, n)
            del outs
            h.release()
            if b == 0:
                continue
            p = h.phases[-1]
            sent = answered - p["request_to_reply"] / 1e3
            calls = diag["calls_ms"]
            rows.append({
                "clock": seconds * 1e3,
                "input write (GPU, events)": p["write_gpu"],
                "input write (wall, to request)": p["write"],
                "request -> worker has it": (diag["recv"] - sent) * 1e3,
                "worker: decode + open input": (diag["launch0"] - diag["recv"]) * 1e3,
                "worker: GPU, K calls (events)": sum(calls),
                "worker: launches done after": (diag["launched"] - diag["launch0"]) * 1e3,
                "worker: sync returns after launch0": (diag["synced"] - diag["launch0"]) * 1e3,
                "worker: sync -> reply sent": (diag["send"] - diag["synced"]) * 1e3,
                "reply sent -> scorer has it": (answered - diag["send"]) * 1e3,
                "scorer: locate K outputs": p["locate"],
                "scorer: read samples, check": p["sample_check"],
                "first call (GPU)": calls[0],
                "other calls (GPU, median)": statistics.median(calls[1:]) if len(calls) > 1 else calls[0],
            })
    finally:
        try:
            h.worker.channel.send({"op": "exit"})
            h.worker.wait(30)
        finally:
            h.worker.kill()
            h.close()
    writes = h.writes_ms[(k, n)]
    return {"rows": rows, "write_min": min(writes), "k": k}


def report(label: str, result: dict, inproc: list[float]) -> None:
    rows, k = result["rows"], result["k"]
    print(f"== {label}: K={k}, {len(rows)} timed batches (medians, ms per batch unless said) ==")
    for name in rows[0]:
        print(f"  {name:38s} {statistics.median(r[name] for r in rows):9.4f}")
    clock = statistics.median(r["clock"] for r in rows)
    gpu = statistics.median(r["worker: GPU, K calls (events)"] for r in rows)
    raw, scored = clock / k, (clock - result["write_min"]) / k
    ip = statistics.median(inproc)
    print(f"  per call: clock {raw:.4f}, scored (least write {result['write_min']:.4f} off) {scored:.4f}, "
          f"worker's own GPU time {gpu / k:.4f}; in-process CUDA events {ip:.4f} "
          f"({100 * (scored / ip - 1):+.1f}% scored vs in-process)")
    print(f"  hand-over per batch (scored clock - worker's GPU time): {clock - result['write_min'] - gpu:.4f} ms")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--k", type=int, default=score.PROFILES["gpu"]["k"])
    ap.add_argument("--batches", type=int, default=5)
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    home = os.environ["REBENCH_HOME"]
    label = os.path.basename(home.rstrip("/"))
    inproc = in_process_ms(home)
    result = run(home, args.k, args.batches, None)
    report(label, result, inproc)
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        out = tempfile.mktemp(prefix="tc-worker-profile-")
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            run(home, args.k, 3, out)
        print(f"== {label}: torch.profiler, scorer side (3 timed batches and the rest of a scoring) ==")
        print(prof.key_averages().table(sort_by="self_cuda_time_total", row_limit=10))
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))
        print(f"== {label}: torch.profiler, worker side ==")
        with open(out, encoding="utf-8") as fh:
            print(fh.read())
    return 0


if __name__ == "__main__":
    sys.exit(main())
