#!/usr/bin/env bash
# Run every benchmark (medians of a few runs each) and keep the output in benchmarks/results/.
# Usage: benchmarks/run_all.sh [python]   (default: .venv/bin/python of this checkout)
# Needs a Docker engine with the base images built (./scripts/test does that) for bench_score and
# bench_start. Each benchmark stays under about two minutes on a 2-core machine.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(dirname "$here")"
py="${1:-$root/.venv/bin/python}"
mkdir -p "$here/results"
out="$here/results/$(date -u +%Y%m%d-%H%M%S).txt"
cd "$root"
{
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC') on $(hostname): $(nproc) cores, $(free -g | awk '/Mem:/{print $2}') GiB; $(uptime)"
  "$py" benchmarks/bench_audit.py --runs 3
  "$py" benchmarks/bench_files.py --runs 3
  "$py" benchmarks/bench_score.py --runs 3 -n 8
  "$py" benchmarks/bench_start.py --runs 5
  "$py" benchmarks/bench_export.py --runs 3
  "$py" benchmarks/bench_published_runs.py --runs 5
} 2>&1 | tee "$out"
echo "kept in $out"
