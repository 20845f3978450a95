"""triton_cumsum's scorer measures its own hand-over with a trusted worker and takes it off: the
whole path, smoke size, on this machine (no container: the scorer and both workers run as you).
On a GPU the same code is on by default (reference/harness_timing.sh prints its figures)."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import pytest

from tests.conftest import ROOT

pytestmark = [pytest.mark.slow, pytest.mark.timed]
ENV = ROOT / "environments" / "triton_cumsum"


def scoring(home, solution: str, **env) -> dict:
    (home / "solution").mkdir(parents=True, exist_ok=True)
    (home / "solution" / "solution.py").write_text(solution)
    full = {**os.environ, "REBENCH_HOME": str(home), "REBENCH_PROFILE": "smoke", "TRITON_INTERPRET": "1",
            "REBENCH_SCORER_LIB": str(ROOT / "rebench_tui" / "runtime" / "lib"), **env}
    full.pop("REBENCH_RESULT_FD", None)
    done = subprocess.run([sys.executable, str(ENV / "protected" / "score.py")], env=full, capture_output=True,
                          text=True, timeout=240)
    return json.loads(done.stdout.strip().splitlines()[-1])  # by hand, the result is printed too


# the smoke reference, 4 ms a call slower: on a CPU the hand-over is as long as a fast kernel and
# noisy, and a line through two noisy figures could take off more than such a kernel's whole time
SLOW = "import time as _time\n" + (ENV / "reference" / "smoke_solution.py").read_text() + """
_fast = prefix_sum


def prefix_sum(x):
    _time.sleep(0.004)
    return _fast(x)
"""


def test_the_hand_over_is_measured_with_a_trusted_worker_and_taken_off(tmp_path):
    r = scoring(tmp_path, SLOW, REBENCH_TRITON_HANDOVER="3")
    m, d = r["message"], r["details"]
    assert math.isfinite(r["score"]) and m["results_match"] is True, r
    ho, k = d["handover"], d["calls_per_batch"]
    assert [p["calls"] for p in ho["points"]] == [k, k // 2]  # two batch lengths: 2 calls and 1
    for p in ho["points"]:
        assert len(p["in_process_each_ms"]) == len(p["through_harness_each_ms"]) == 3
        assert p["per_batch_ms"] == pytest.approx(max(0.0, p["through_harness_ms"] - p["in_process_ms"]) * p["calls"], abs=1e-3)
    fixed, slope, upto = ho["fixed_per_batch_ms"], ho["per_kernel_ms"], ho["level_from_kernel_ms"]
    assert fixed >= 0 and slope >= 0 and upto == max(p["kernel_per_batch_ms"] for p in ho["points"])
    # B + fixed + slope * min(B, upto) = the batch's time: B, the kernel time scored
    got = [t * k for t in d["per_call_ms"]]
    assert [b + fixed + slope * min(b, upto) for b in got] == pytest.approx([t * k for t in d["per_call_uncorrected_ms"]], abs=2e-3)
    assert m["handover_ms"] == ho["per_call_ms"] and m["time_uncorrected_ms"] >= m["time_ms"]
    assert r["score"] == pytest.approx(math.log(m["time_ms"]), abs=1e-4)


def test_a_wrong_solution_is_still_nan_after_the_trusted_worker(tmp_path):
    wrong = "import torch\n\ndef prefix_sum(x):\n    return torch.cumsum(x, 0).to(torch.int32)\n"
    r = scoring(tmp_path, wrong, REBENCH_TRITON_HANDOVER="2")
    assert r["score"] == "NaN" and r["message"]["results_match"] is False, r
