#!/bin/bash
# Measures triton_cumsum's gpu profile on one GPU without Docker: the copy-bandwidth baseline
# (torch.clone of 10^8 int32, CUDA events, same run), then the scorer 3 times on the starting
# solution and 3 times on reference/solution.py as committed. About 1 minute. Run from the
# repository root. BENCH=1 first runs bench.py's exactness sweep and tuning table (minutes).
set -uo pipefail
export PYTHONUNBUFFERED=1
E=environments/triton_cumsum
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
python3 -c "import sys,torch,triton;print('python',sys.version.split()[0],'torch',torch.__version__,'triton',triton.__version__)"
python3 - <<'PY'
import statistics, torch
x = torch.randint(-10, 10, (10**8,), dtype=torch.int32, device="cuda")
for _ in range(3):
    x.clone()
ts = []
for _ in range(20):
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize(); s.record(); y = x.clone(); e.record(); torch.cuda.synchronize()
    ts.append(s.elapsed_time(e))
print(f"copy baseline: torch.clone of 10^8 int32, median of 20: {statistics.median(ts):.4f} ms "
      f"({0.8e9 / (statistics.median(ts) / 1000) / 1e12:.2f} TB/s)")
PY
[ "${BENCH:-0}" = 1 ] && BENCH_BUDGET_S=${BENCH_BUDGET_S:-170} timeout 260 python3 $E/reference/bench.py
for s in start ref; do rm -rf /tmp/tc_$s; mkdir -p /tmp/tc_$s/solution; done
cp $E/solution/solution.py /tmp/tc_start/solution/
cp $E/reference/solution.py /tmp/tc_ref/solution/
for i in 1 2 3; do
  echo "start run $i: $(REBENCH_HOME=/tmp/tc_start REBENCH_PROFILE=gpu timeout 90 python3 $E/protected/score.py)"
  echo "ref run $i: $(REBENCH_HOME=/tmp/tc_ref REBENCH_PROFILE=gpu timeout 90 python3 $E/protected/score.py)"
done
