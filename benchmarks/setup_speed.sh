#!/usr/bin/env bash
# A fresh .venv made by scripts/setup with pip, then with uv, in one run, each in a temporary copy
# of this tree (the project's own .venv is not touched). Prints both times, the load the run
# started under and the cores.
#   benchmarks/setup_speed.sh          empty download caches for both (a newcomer's first run)
#   benchmarks/setup_speed.sh --warm   each installer's own cache, filled first (a second machine, CI
#                                      with a cache): uv's by an untimed run of its own before the timed
#                                      ones, pip's by whatever used it before (run once without --warm
#                                      on a machine where pip has not installed the project yet)
set -euo pipefail
cd "$(dirname "$0")/.."
warm=0
[ "${1:-}" = --warm ] && warm=1
read -r load _ < /proc/loadavg
echo "… $(nproc) cores, load average $load at the start; caches: $([ $warm = 1 ] && echo warm || echo empty)"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
copy() { mkdir -p "$1"; git ls-files -z | xargs -0 -I{} cp --parents {} "$1"; }
setup_in() {  # $1: folder, $2: installer; the caches as the mode says
  if [ $warm = 1 ]; then
    (cd "$1" && REBENCH_INSTALLER=$2 ./scripts/setup)
  else
    (cd "$1" && REBENCH_INSTALLER=$2 PIP_NO_CACHE_DIR=1 UV_CACHE_DIR="$work/uv-cache" ./scripts/setup)
  fi
}
if [ $warm = 1 ]; then
  echo "… filling uv's cache (untimed)"
  copy "$work/fill"
  (cd "$work/fill" && REBENCH_INSTALLER=uv ./scripts/setup) >"$work/fill.log" 2>&1 || { cat "$work/fill.log"; exit 1; }
  rm -rf "$work/fill"
fi
for installer in pip uv; do
  dir="$work/$installer"
  copy "$dir"
  start=$(date +%s.%N)
  setup_in "$dir" "$installer" > "$work/$installer.log" 2>&1 || { cat "$work/$installer.log"; exit 1; }
  took=$(echo "$(date +%s.%N) - $start" | bc)
  grep -E "^… (uv did not|installing)" "$work/$installer.log" || true
  printf '… %s: a fresh .venv in %.0f s (%s)\n' "$installer" "$took" "$(du -sh "$dir/.venv" | cut -f1)"
done
