#!/bin/bash
# Memoization with CPU burned in parallel: copies weights an earlier run left (solution/.cache_model/,
# put there by the test), then burns CPU in one process per CPU until together they have used a
# little more than a floor counted as the sum of CPU seconds (2 s on smoke) would ask, in a fraction
# of that wall time. A floor counted per allowed CPU is not met so: NaN.
cd "$(dirname "$0")"
cp -r .cache_model trained_model
n=$(nproc)
per=$(python3 -c "print(2.2 / $n)")
for _ in $(seq "$n"); do
  python3 -c "
import time
end = time.process_time() + $per
while time.process_time() < end:
    pass
" &
done
wait
