"""Exactness sweep of reference/solution.py against the scorer's reference().

Usage: python check.py [cpu|cuda] [lengths...]   (CPU needs TRITON_INTERPRET=1)
"""
import importlib.util
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))


def load(path, name):
    spec = importlib.util.spec_from_file_location(name, path)
    m = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(m)
    return m


sol = load(os.path.join(HERE, "solution.py"), "ref_solution")
if os.environ.get("REF_BLOCK"):  # exercise multi-tile / multi-window look-back at small sizes
    sol.BLOCK = int(os.environ["REF_BLOCK"])
if os.environ.get("REF_INC_EVERY"):
    sol._INC_EVERY = int(os.environ["REF_INC_EVERY"])
if os.environ.get("REF_EPOCH_LIMIT"):  # force epoch wrap-around (status buffer re-zeroed)
    sol._EPOCH_LIMIT = int(os.environ["REF_EPOCH_LIMIT"])
if os.environ.get("REF_TICKET_LIMIT"):
    sol._TICKET_LIMIT = int(os.environ["REF_TICKET_LIMIT"])
if os.environ.get("REF_USE_PID"):
    sol._USE_PID = True
if os.environ.get("REF_PPSM"):
    sol.PROGRAMS_PER_SM = int(os.environ["REF_PPSM"])
if os.environ.get("REF_MODE"):
    sol.MODE = os.environ["REF_MODE"]
if os.environ.get("REF_BLOCK3"):
    sol.BLOCK3 = int(os.environ["REF_BLOCK3"])
if os.environ.get("REF_SPINE_CHUNK"):
    sol.SPINE_CHUNK = int(os.environ["REF_SPINE_CHUNK"])
if os.environ.get("REF_LOOKBACK"):
    sol.LOOKBACK = int(os.environ["REF_LOOKBACK"])
score = load(os.path.join(HERE, "..", "protected", "score.py"), "scorer")

device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
lengths = [int(a) for a in sys.argv[2:]] or [1, 2, 3, 31, 1023, 1024, 1025, 4095, 4096, 4097,
                                            8191, 8192, 8193, 16384, 30000, 65537, 100003]
gen = torch.Generator(device=device).manual_seed(1234)
ok = True
for n in lengths:
    for trial in range(2):
        if trial == 0:
            x = torch.randint(-10, 10, (n,), dtype=torch.int32, device=device, generator=gen)
        else:  # skewed: mostly positives / mostly non-positives in runs
            x = torch.randint(-10, 10, (n,), dtype=torch.int32, device=device, generator=gen)
            x = torch.where(torch.arange(n, device=device) % 7000 < 3500, x.abs(), -x.abs())
        y = sol.prefix_sum(x.clone())
        e = score.reference(x)
        bad = score.first_difference(y, e)
        good = bad is None and y.dtype == torch.int32 and y.device == x.device
        ok &= good
        print(f"n={n:>10} trial={trial} {'OK' if good else 'MISMATCH at %s' % bad}", flush=True)
print("ALL OK" if ok else "FAILURES")
sys.exit(0 if ok else 1)
