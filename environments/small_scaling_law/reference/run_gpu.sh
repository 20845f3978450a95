#!/bin/bash
# One device call (about 4-5 minutes on one H200): run from the repository root on a machine with
# an NVIDIA GPU and PyTorch, offline. Steps:
#   1. prepare.py --profile gpu --mode synthetic: a synthetic corpus in GPT-2 shapes and the
#      PLACEHOLDER ground truth (every table width trained at 1e15 FLOPs instead of 5e17);
#   2. one timed gpu-profile training run at a legal budget (n_embd 1024, 50 steps = 9.9e14 FLOPs,
#      batch 64 x 1024, no micro-batching, no compile): tokens/s and achieved FLOP/s;
#   3. the gpu scorer on the starting solution/answer.json against that placeholder table.
# PROFILE=smoke runs the same three steps on the CPU with the smoke profile (a check of the path).
# TIME_COMPILE=1 adds a second timed run with --compile (about a minute more).
export PYTHONUNBUFFERED=1
PROFILE=${PROFILE:-gpu}
ENV_DIR=environments/small_scaling_law
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WORK=${WORK:-/tmp/ssl_$PROFILE}; rm -rf "$WORK"; mkdir -p "$WORK"
PY=${PYTHON:-python3}
{
date -u
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
$PY -c "import sys,torch;print('python',sys.version.split()[0],'torch',torch.__version__,'cuda',torch.cuda.is_available())"
} 2>&1 | tee "$OUT/env.log"

echo "== 1. prepare --profile $PROFILE --mode synthetic"
start=$(date +%s)
timeout ${PREPARE_TIMEOUT:-300} $PY $ENV_DIR/prepare.py --profile $PROFILE --mode synthetic --out "$WORK/assets" --work "$WORK/work" \
  2>&1 | grep -v '^PROGRESS' | tee "$OUT/prepare.log"
echo "prepare: exit ${PIPESTATUS[0]}, $(( $(date +%s) - start )) s" | tee -a "$OUT/prepare.log"
cp "$WORK/assets/protected/ground_truth.json" "$OUT/" 2>/dev/null

echo "== 2. timed training run"
if [ "$PROFILE" = gpu ]; then N=1024; ITERS=50; else N=16; ITERS=158; fi
time_run() {  # $1: label, then extra train.py options
  local label=$1; shift
  SCALING_PROFILE=$PROFILE timeout 240 $PY $ENV_DIR/solution/train.py --n_embd $N --max_iters $ITERS \
    --data_dir "$WORK/assets/workspace" --out "$OUT/timing_$label.json" --log_every 10 "$@" 2>&1 | tail -n 8
  [ -f "$OUT/timing_$label.json" ] && $PY - "$OUT/timing_$label.json" "$label" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
peak = 989e12  # H100/H200 dense bf16
print(f"[{sys.argv[2]}] n_embd={r['n_embd']} max_iters={r['max_iters']} flops={r['flops']:.4g} on {r['device']}: "
      f"{r['train_seconds']:.2f} s, {r['tokens_per_s']:.4g} tokens/s, {r['flops_per_s']:.4g} FLOP/s (formula); "
      f"steady state {r['steady_tokens_per_s']:.4g} tokens/s, {r['steady_flops_per_s']:.4g} FLOP/s "
      f"= {100 * r['steady_flops_per_s'] / peak:.2f}% of 989 TFLOP/s; val_loss {r['val_loss']:.4f}")
if r["profile"] == "gpu":
    print(f"[{sys.argv[2]}] at this rate one 5e17-FLOP table run at n_embd={r['n_embd']} takes "
          f"{5e17 / r['steady_flops_per_s'] / 3600:.2f} GPU-hours")
EOF
}
time_run plain | tee "$OUT/timing.log"
if [ "${TIME_COMPILE:-0}" = 1 ]; then time_run compiled --compile | tee -a "$OUT/timing.log"; fi

echo "== 3. scorer on the starting answer"
mkdir -p "$WORK/home/solution" "$WORK/protected"
cp $ENV_DIR/solution/answer.json $ENV_DIR/solution/answer_smoke.json "$WORK/home/solution/"
ln -sfn "$WORK/assets/protected" "$WORK/protected/assets"
TIMEFORMAT="scorer: %R s"
for i in 1 2; do
  time env REBENCH_HOME="$WORK/home" REBENCH_PROTECTED="$WORK/protected" REBENCH_SCORER_LIB="$(pwd)/rebench_tui/runtime/lib" \
    REBENCH_PROFILE=$PROFILE SCALING_PROFILE=$PROFILE timeout 60 $PY $ENV_DIR/protected/score.py
done 2>&1 | tee "$OUT/scorer.log"
date -u
