#!/usr/bin/env bash
# A fresh .venv made by scripts/setup with pip, then with uv, in one run, each in a temporary copy
# of this tree (the project's own .venv is not touched), each with an empty download cache (a
# newcomer's first run). Prints both times, the load the run started under and the cores.
#   benchmarks/setup_speed.sh            both
#   benchmarks/setup_speed.sh uv         one of them (pip | uv)
set -euo pipefail
cd "$(dirname "$0")/.."
which=("${@:-pip uv}")
read -r load _ < /proc/loadavg
echo "… $(nproc) cores, load average $load at the start"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for installer in ${which[*]}; do
  dir="$work/$installer"
  mkdir -p "$dir"
  git ls-files -z | xargs -0 -I{} cp --parents {} "$dir"
  start=$(date +%s.%N)
  (cd "$dir" && REBENCH_INSTALLER=$installer PIP_NO_CACHE_DIR=1 UV_CACHE_DIR="$work/uv-cache" ./scripts/setup) \
    > "$work/$installer.log" 2>&1 || { cat "$work/$installer.log"; exit 1; }
  took=$(echo "$(date +%s.%N) - $start" | bc)
  grep -E "^… (uv did not|installing)" "$work/$installer.log" || true
  printf '… %s: a fresh .venv in %.0f s (%s)\n' "$installer" "$took" "$(du -sh "$dir/.venv" | cut -f1)"
done
