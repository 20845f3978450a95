#!/bin/bash
# triton_cumsum on one GPU, timing (one device call, about 5 minutes): where a batch's time goes
# (harness_profile.py, the participant's user, with torch.profiler on the reference kernel), then
# the separate-process scorer as the workstation runs it (protected/score.py under the supervisor,
# default settings: K=20, the hand-over measured with a trusted worker and taken off; each result
# line gives the corrected and the uncorrected figure) beside the in-process CUDA-event scorer
# (score_inprocess.py) on the starting solution and the reference kernel, RUNS times each, in the
# same run; EXTRA=1 adds K=10 and the old torch IPC mode once each. Run as root from the
# repository root.
source environments/triton_cumsum/reference/harness_common.sh
RUNS=${RUNS:-3}
home start $E/solution/solution.py
home ref $E/reference/solution.py
# the checkout may be root's alone: uid 1000 runs a copy of the scorer and the profiler
rm -rf /tmp/tc-env && mkdir -p /tmp/tc-env/reference && cp -r $E/protected /tmp/tc-env/ \
  && cp $E/reference/harness_profile.py /tmp/tc-env/reference/ && chmod -R a+rX /tmp/tc-env
for s in ref start; do
  say "profile $s"
  extra=(); [ $s = ref ] && [ "${PROFILE:-1}" = 1 ] && extra=(--profile)
  (cd /tmp && setpriv --reuid 1000 --regid 1000 --clear-groups env HOME=/tmp/tc_$s REBENCH_SCORER_LIB=$REBENCH_SCORER_LIB \
    REBENCH_HOME=/tmp/tc_$s timeout 200 $PY /tmp/tc-env/reference/harness_profile.py "${extra[@]}" 2>&1) | grep -v "^STAGE:" | sed 's/^/  /'
done
first=$(new /tmp/tc_ref | short); say "ref harness run 0 (a check before spending the rest): $first"
case "$first" in *"score NaN"*|*"score nan"*|*"no result"*) say "stopping: the harness failed on the reference kernel"; exit 1;; esac
for i in $(seq 1 $RUNS); do
  for s in start ref; do
    say "$s in-process run $i: $(old /tmp/tc_$s | short)"
    say "$s harness    run $i: $(new /tmp/tc_$s | short)"
  done
done
if [ "${EXTRA:-0}" = 1 ]; then
  for s in ref start; do
    say "$s harness K=10: $(REBENCH_TRITON_K=10 new /tmp/tc_$s | short)"
    say "$s harness torch IPC: $(REBENCH_TRITON_IPC=torch new /tmp/tc_$s | short)"
  done
fi
say done
