#!/bin/bash
# triton_cumsum on one GPU, no container: the separate-process scorer (protected/score.py, in each
# of its IPC modes: torch, driver, driver-fresh) beside the old in-process one
# (reference/score_inprocess.py) on the same kernels in the same run, then every hostile solution
# in reference/hostile/ under both. First, reference/ipc_probe.py. Run as root from the repository root
# (the new scorer runs the solution as uid 1000). RUNS=3 by default. Prints one line per scoring.
set -uo pipefail
export PYTHONUNBUFFERED=1
E=environments/triton_cumsum
RUNS=${RUNS:-3}
PY=${PY:-python3}
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$PY -c "import sys,torch,triton;print('python',sys.version.split()[0],'torch',torch.__version__,'triton',triton.__version__)"
# the helpers must be readable by uid 1000: a copy outside the (root-only) checkout
rm -rf /tmp/rebench-lib && cp -r rebench_tui/runtime/lib /tmp/rebench-lib && chmod -R a+rX /tmp/rebench-lib
export REBENCH_SCORER_LIB=/tmp/rebench-lib REBENCH_PROFILE=gpu
echo "ipc probe:"; $PY $E/reference/ipc_probe.py 2>&1 | sed 's/^/  /'
home() {  # home NAME SOLUTION [EXTRA...]: a participant home owned by uid 1000
  rm -rf /tmp/tc_$1; mkdir -p /tmp/tc_$1/solution; cp "$2" /tmp/tc_$1/solution/solution.py
  cp $E/reference/hostile/_honest.py /tmp/tc_$1/solution/; chown -R 1000:1000 /tmp/tc_$1; chmod 755 /tmp/tc_$1
}
# the new scorer runs under the supervisor, as the workstation runs it: its result is read from the
# result channel (the status line's "result"), never from stdout
new() { REBENCH_HOME=$1 timeout 240 $PY -I -S rebench_tui/runtime/supervise.py run --token gpu --state-dir /tmp/rebench-sv \
          --user root --timeout 200 -- $PY $E/protected/score.py 2>&1 >/dev/null | tr -d '\036' | grep '^rebench-exec ' | sed 's/^rebench-exec //'; }
short() { $PY -c 'import json,sys
text=sys.stdin.read()
lines=[l for l in text.splitlines() if l.startswith("{")]
if lines and "returncode" in lines[-1]:  # a supervisor status: the result channel is what counts
    st=json.loads(lines[-1]); lines=[l for l in (st.get("result") or "").splitlines() if l.startswith("{")]
    print("[channel, exit %s, stragglers killed %s]" % (st.get("returncode"), st.get("stragglers_killed")), end=" ")
if not lines: print("no result"); sys.exit()
r=json.loads(lines[-1]); m=r["message"]; d=r.get("details",{})
print("score", r["score"], "time_ms", m.get("time_ms"), "error", m.get("error") or m.get("results_match"), "calls_ms", d.get("per_call_ms") or d.get("times_ms"),
      *(["mapped", d["buffers_mapped"], "distinct", d["distinct_outputs"], "ipc", d.get("ipc")] if "buffers_mapped" in d else []))'; }
home start $E/solution/solution.py
home ref $E/reference/solution.py
for i in $(seq 1 $RUNS); do
  for s in start ref; do
    echo "$s in-process run $i: $(REBENCH_HOME=/tmp/tc_$s timeout 120 $PY $E/reference/score_inprocess.py 2>/dev/null | short)"
    for ipc in torch driver driver-fresh; do
      echo "$s harness    run $i (ipc $ipc): $(REBENCH_TRITON_IPC=$ipc new /tmp/tc_$s | short)"
    done
  done
done
# The hostile solutions (fork_bomb and kill_scorer only run in a container: no process limit here)
for f in $E/reference/hostile/[a-z]*.py; do
  name=$(basename $f .py)
  case $name in fork_bomb|kill_scorer) continue;; esac
  [ -n "${HOSTILE:-}" ] && ! [[ " $HOSTILE " == *" $name "* ]] && continue
  home h $f
  echo "hostile $name in-process: $(REBENCH_HOME=/tmp/tc_h timeout 120 $PY $E/reference/score_inprocess.py 2>/dev/null | short)"
  home h $f
  echo "hostile $name harness:    $(new /tmp/tc_h | short)"
  home h $f
  echo "hostile $name harness (ipc driver): $(REBENCH_TRITON_IPC=driver new /tmp/tc_h | short)"
  left=$(ps -u 1000 -o pid=,args= | grep -v "ps -u" || true)
  [ -n "$left" ] && { echo "  uid 1000 processes left: $left"; pkill -9 -u 1000; }
done
date -u; echo done
