# Sourced by harness_timing.sh and harness_hostile.sh (run as root from the repository root, one
# GPU, no container): the header, a copy of the scorer's helpers uid 1000 can read, participant
# homes, and the functions that run the scorers and shorten their result lines.
set -uo pipefail
export PYTHONUNBUFFERED=1
E=environments/triton_cumsum
PY=${PY:-python3}
T0=$(date +%s)
say() { echo "[$(( $(date +%s) - T0 ))s] $*"; }
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$PY -c "import sys,torch,triton;print('python',sys.version.split()[0],'torch',torch.__version__,'triton',triton.__version__)"
echo "scorer: $(sha256sum $E/protected/score.py | cut -c1-16) worker: $(sha256sum $E/protected/worker.py | cut -c1-16) commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
rm -rf /tmp/rebench-lib && cp -r rebench_tui/runtime/lib /tmp/rebench-lib && chmod -R a+rX /tmp/rebench-lib
export REBENCH_SCORER_LIB=/tmp/rebench-lib REBENCH_PROFILE=gpu
home() {  # home NAME SOLUTION: a participant home owned by uid 1000
  rm -rf /tmp/tc_$1; mkdir -p /tmp/tc_$1/solution; cp "$2" /tmp/tc_$1/solution/solution.py
  cp $E/reference/hostile/_honest.py /tmp/tc_$1/solution/; chown -R 1000:1000 /tmp/tc_$1; chmod 755 /tmp/tc_$1
}
# the scorer as the workstation runs it: under the supervisor, as root; its result is read from the
# result channel (the status line's "result"), never from stdout
new() { REBENCH_HOME=$1 timeout 240 $PY -I -S rebench_tui/runtime/supervise.py run --token gpu --state-dir /tmp/rebench-sv \
          --user root --timeout 200 -- $PY $E/protected/score.py 2>&1 >/dev/null | tr -d '\036' | grep '^rebench-exec ' | sed 's/^rebench-exec //'; }
old() { REBENCH_HOME=$1 timeout 120 $PY $E/reference/score_inprocess.py 2>/dev/null; }
short() { $PY -c 'import json,sys
text=sys.stdin.read()
lines=[l for l in text.splitlines() if l.startswith("{")]
if lines and "returncode" in lines[-1]:  # a supervisor status: the result channel is what counts
    st=json.loads(lines[-1]); lines=[l for l in (st.get("result") or "").splitlines() if l.startswith("{")]
    print("[channel, exit %s, stragglers killed %s]" % (st.get("returncode"), st.get("stragglers_killed")), end=" ")
if not lines: print("no result"); sys.exit()
r=json.loads(lines[-1]); m=r["message"]; d=r.get("details",{})
err=m.get("error") or m.get("results_match")
print("score", r["score"], "time_ms", m.get("time_ms"), "error", str(err)[:300], "calls_ms", d.get("per_call_ms") or d.get("times_ms"),
      *(["uncorrected", m.get("time_uncorrected_ms"), "handover", m.get("handover_ms"), "(full-length batches alone",
         d["handover"].get("full_batches_per_call_ms"), ") line: fixed ms", d["handover"].get("fixed_per_batch_ms"),
         "per ms of kernel", d["handover"].get("per_kernel_ms"), "trusted [calls in-process harness phases]",
         [[p["calls"], p["in_process_ms"], p["through_harness_ms"], p.get("batch_phases_ms")] for p in d["handover"].get("points", [])]]
        if "handover" in d else []),
      *(["raw", d["per_call_raw_ms"], "write_off", d.get("input_write_subtracted_ms"), "phases", d.get("batch_phases_ms")] if "per_call_raw_ms" in d else []),
      *(["mapped", d["buffers_mapped"], "distinct", d["distinct_outputs"], "ipc", d.get("ipc"), "k", d.get("calls_per_batch")] if "buffers_mapped" in d else []))'; }
