#!/bin/bash
# restricted_mlm on one GPU machine, in one go (about 3-4 minutes on an H200). Run from the repository root:
#
#     bash environments/restricted_mlm/reference/run_gpu.sh
#
# Needs python3 with torch (CUDA) and numpy; no internet, no docker. Steps:
#   1. prepare.py --profile gpu --mode synthetic into /tmp/rm_prep (full-size model shapes)
#   2. a home folder like the container's: /tmp/rm_home/solution (starting solution),
#      /tmp/rm_home/assets (participant assets); /tmp/rm_prot (protected/ + held-out assets/)
#   3. the gpu scorer on the starting solution, twice (JSON line, wall time, peak GPU memory in
#      the details: peak_gpu_memory_gib)
#   4. the gpu scorer on the reference architecture with untrained weights (checks that its
#      captured graph passes the checks and runs on CUDA; its score means nothing), on a model
#      that uses softmax (must be NaN with disallowed_operation) and on three hostile solutions
#      of reference/hostile/ (memoize: the start score; patch_enforcer and stateful_graph: NaN)
#   5. the graph checks' unit tests with the graphs run on CUDA, if pytest is installed
# Everything is also written to $OUT (default /tmp/rm_out). RMLM_PROFILE=smoke runs the same
# steps on the CPU with the smoke profile (how this script was checked without a GPU).
set -uo pipefail
export PYTHONUNBUFFERED=1
export REBENCH_SCORER_LIB=$PWD/rebench_tui/runtime/lib  # the scorer's helper package (in a container: /opt/rebench/lib)
PROFILE=${RMLM_PROFILE:-gpu}
PY=${PYTHON:-python3}
ENV_DIR=environments/restricted_mlm
OUT=${OUT:-/tmp/rm_out}
PREP=/tmp/rm_prep HOME_DIR=/tmp/rm_home PROT=/tmp/rm_prot
mkdir -p "$OUT"
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
rm -rf "$PREP" /tmp/rm_work "$HOME_DIR" "$PROT" /tmp/rm_ref_home /tmp/rm_bad_home /tmp/rm_hostile_*
T0=$(date +%s)
{
date -u
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
$PY -c "import sys, torch, numpy; print('python', sys.version.split()[0], 'torch', torch.__version__, 'numpy', numpy.__version__, 'cuda', torch.cuda.is_available())"
} 2>&1 | tee "$OUT/env.log"

echo "== 1. prepare ($PROFILE, synthetic)"
t=$(date +%s.%N)
$PY "$ENV_DIR/prepare.py" --profile "$PROFILE" --mode synthetic --out "$PREP" --work /tmp/rm_work 2>&1 \
  | grep -v '^PROGRESS' | tee "$OUT/prepare.log"
echo "prepare: exit ${PIPESTATUS[0]}, $(elapsed "$t") s" | tee -a "$OUT/prepare.log"
ls -l "$PREP"/workspace "$PREP"/protected

echo "== 2. layout"
mkdir -p "$HOME_DIR" "$PROT"
cp -r "$ENV_DIR/solution" "$HOME_DIR/solution"
cp -r "$PREP/workspace" "$HOME_DIR/assets"
cp -r "$ENV_DIR/protected/." "$PROT/"
cp -r "$PREP/protected" "$PROT/assets"
cp -r "$ENV_DIR/solution" "$PROT/starting_solution"

score() {  # score LABEL HOME
  local t=$(date +%s.%N)
  echo "-- $1"
  REBENCH_HOME="$2" REBENCH_PROTECTED="$PROT" REBENCH_PROFILE="$PROFILE" timeout 600 $PY "$PROT/score.py" 2>"$OUT/score_$1.stderr" | tail -n 1
  echo "$1: exit ${PIPESTATUS[0]}, wall $(elapsed "$t") s"
}

echo "== 3. starting solution"
{ score start_1 "$HOME_DIR"; score start_2 "$HOME_DIR"; } 2>&1 | tee "$OUT/scorer_start.log"

echo "== 4. reference architecture (untrained) and a forbidden-operation model"
mkdir -p /tmp/rm_ref_home/solution /tmp/rm_bad_home/solution
cp -r "$PREP/workspace" /tmp/rm_ref_home/assets
cp -r "$PREP/workspace" /tmp/rm_bad_home/assets
cp "$ENV_DIR/reference/model.py" /tmp/rm_ref_home/solution/model.py
CONFIG=$([ "$PROFILE" = smoke ] && echo tiny || echo full)
$PY -c "
import sys, torch; sys.path.insert(0, '/tmp/rm_ref_home/solution'); import model as M
torch.manual_seed(0); M.save_checkpoint(M.build('$CONFIG'), M.CHECKPOINT)"
cp -r "$ENV_DIR/solution/." /tmp/rm_bad_home/solution/
cat >> /tmp/rm_bad_home/solution/model.py <<'EOF'


_plain = get_trained_model


def get_trained_model():
    model = _plain()
    head = model.head
    model.head = torch.nn.Sequential(head, torch.nn.Softmax(dim=-1))  # forbidden: softmax
    return model
EOF
{ score reference_untrained /tmp/rm_ref_home; score softmax_model /tmp/rm_bad_home; } 2>&1 | tee "$OUT/scorer_other.log"
for name in memoize patch_enforcer stateful_graph; do
  mkdir -p /tmp/rm_hostile_$name/solution
  cp -r "$PREP/workspace" /tmp/rm_hostile_$name/assets
  cp "$ENV_DIR/solution/model.py" /tmp/rm_hostile_$name/solution/_start.py
  cp "$ENV_DIR/reference/hostile/$name.py" /tmp/rm_hostile_$name/solution/model.py
  score "hostile_$name" /tmp/rm_hostile_$name
done 2>&1 | tee "$OUT/scorer_hostile.log"

echo "== 5. graph unit tests on $([ "$PROFILE" = smoke ] && echo cpu || echo cuda)"
if $PY -c "import pytest" 2>/dev/null; then
  RMLM_TEST_DEVICE=$([ "$PROFILE" = smoke ] && echo cpu || echo cuda) timeout 300 $PY -m pytest -q -p no:cacheprovider \
    --noconftest tests/unit/test_env_restricted_mlm.py \
    -k "forbidden or permitted or crafted or uninitialised or pure or message or allow_list" 2>&1 | tail -n 15 \
    | tee "$OUT/graph_tests.log"
else
  echo "pytest is not installed: skipped" | tee "$OUT/graph_tests.log"
fi
date -u
echo "total: $(( $(date +%s) - T0 )) s"
