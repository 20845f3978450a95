#!/bin/bash
# triton_cumsum's gpu anchors on one GPU, no container (one device call, about 3 minutes):
# `rebench-tui calibrate triton_cumsum --profile gpu --runtime local`, the starting solution and the
# reference kernel RUNS times each through the scorer exactly as a session scores them (as root,
# the solution run as uid 1000), with the header harness_timing.sh prints. The calibration file
# goes to $OUT/config/rebench-tui/calibration/triton_cumsum/gpu.json. A machine whose python
# lacks the app's packages gets them from .device/site-py312.tar.xz (scripts/gpu-e2e carry),
# through a .pth file, so its own PyTorch stays first. Run as root from the repository root.
set -uo pipefail
export PYTHONUNBUFFERED=1
PY=${PY:-python3}
OUT=${OUT:-/tmp/rebench-calibrate}
date -u
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
$PY -c "import sys,torch,triton;print('python',sys.version.split()[0],'torch',torch.__version__,'triton',triton.__version__)"
echo "scorer: $(sha256sum environments/triton_cumsum/protected/score.py | cut -c1-16) worker: $(sha256sum environments/triton_cumsum/protected/worker.py | cut -c1-16) commit: $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
if ! $PY -c 'import textual, click, sqlite_utils, pydantic' 2>/dev/null; then
  [ -f .device/site-py312.tar.xz ] || { echo "no app packages for $PY and no .device/site-py312.tar.xz (scripts/gpu-e2e carry)"; exit 1; }
  mkdir -p /tmp/rebench-site && tar -C /tmp/rebench-site -xJf .device/site-py312.tar.xz
  echo /tmp/rebench-site > "$($PY -c 'import site; print(site.getsitepackages()[0])')/zz-rebench-calibrate.pth"
fi
export XDG_CONFIG_HOME=$OUT/config XDG_CACHE_HOME=/var/tmp/rebench-cache  # a cache under /root is closed to uid 1000
mkdir -p "$XDG_CACHE_HOME" && chmod 755 "$XDG_CACHE_HOME"
start=$(date +%s)
$PY -c 'import sys; from rebench_tui.cli import main; sys.argv[0] = "rebench-tui"; main()' \
  calibrate triton_cumsum --profile gpu --runs "${RUNS:-3}" --runtime local --participant-uid 1000
echo "calibrate: exit $? after $(( $(date +%s) - start )) s"
