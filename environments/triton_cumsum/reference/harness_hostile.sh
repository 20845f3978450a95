#!/bin/bash
# triton_cumsum on one GPU, hostile solutions (one device call, about 5 minutes): every file in
# reference/hostile/ (or those named in HOSTILE) through the separate-process scorer as the
# workstation runs it, beside the honest code they all end with (_honest.py) in the same run.
# fork_bomb and kill_scorer need a container's process limit and run in the CPU suite only.
# OLD=1 also runs each under the in-process scorer, to show what it would have let through; HOG=1
# (the default) ends with an honest scoring beside a GPU kept busy from outside (gpu_hog.py).
# All of it took 369 s on an H100 (2026-12-05); PART=1 or PART=2 runs every other file (the first,
# third, ... or the second, fourth, ...), the GPU kept busy only in part 2: 161 s and 165 s on an
# H100 (2026-12-06).
source environments/triton_cumsum/reference/harness_common.sh
home honest <(printf '%s\n\ndef prefix_sum(x):\n    return honest(x)\n' "from _honest import honest")
say "honest harness: $(new /tmp/tc_honest | short)"
i=0
for f in $E/reference/hostile/[a-z]*.py; do
  name=$(basename $f .py)
  case $name in fork_bomb|kill_scorer) continue;; esac
  [ -n "${HOSTILE:-}" ] && ! [[ " $HOSTILE " == *" $name "* ]] && continue
  i=$((i + 1))
  [ -n "${PART:-}" ] && [ $(( (i + PART) % 2 )) != 0 ] && continue
  if [ "${OLD:-0}" = 1 ]; then home h $f; say "hostile $name in-process: $(old /tmp/tc_h | short)"; fi
  home h $f
  say "hostile $name harness: $(new /tmp/tc_h | short)"
  left=$(ps -u 1000 -o pid=,args= | grep -v "ps -u" || true)
  [ -n "$left" ] && { say "  uid 1000 processes left: $left"; pkill -9 -u 1000; }
done
if [ "${HOG:-1}" = 1 ] && [ "${PART:-2}" = 2 ]; then
  # a GPU kept busy from outside the scoring (a participant's process from before the scoring):
  # for the first seconds only (the hand-over measurement), then for the whole scoring
  cp $E/reference/gpu_hog.py /tmp/tc_honest/ && chown 1000:1000 /tmp/tc_honest/gpu_hog.py
  for secs in ${HOG_SECONDS:-9 90}; do
    (cd /tmp && setpriv --reuid 1000 --regid 1000 --clear-groups $PY /tmp/tc_honest/gpu_hog.py $secs) &
    hog=$!; sleep 2
    say "honest harness, GPU busy from outside for its first ${secs}s: $(new /tmp/tc_honest | short)"
    kill $hog 2>/dev/null; wait $hog 2>/dev/null; pkill -9 -u 1000 2>/dev/null
  done
fi
say "honest harness (again): $(new /tmp/tc_honest | short)"
say done
