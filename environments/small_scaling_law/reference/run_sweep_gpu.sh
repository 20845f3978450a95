#!/bin/bash
# The ground-truth recipe's machinery on one GPU at a reduced budget (one device call of about
# 8 minutes on one H200; offline, so on the synthetic corpus in GPT-2 shapes, not OpenWebText).
# Run from the repository root. Steps, each with its own time limit:
#   1. the synthetic corpus (prepare.make_synthetic);
#   2. time TIME_STEPS steps at TIME_WIDTHS (default: every width of the recipe, TABLE_WIDTHS;
#      micro-batches as in the sweep, no compile, no evaluation): the rate behind the GPU-hours;
#   3. prepare.py's sweep with the recipe's options at RUN_FLOPS per point instead of 5e17:
#      SWEEP_WIDTHS x SWEEP_LRS (multipliers of train.py's rule) x SWEEP_SEEDS, WORKERS runs at a
#      time on the one GPU (their seconds are shared-GPU seconds, not rates);
#   4. the same timing with --compile (COMPILE_STEPS steps) at COMPILE_WIDTHS;
#   5. summaries: the projected GPU-hours of the recipe, and every run of step 3.
# Writes env.log, timing_plain.{json,log}, sweep.log (and sweep_runs.jsonl: every finished run's
# result), timing_compiled.{json,log}, summary.log under $OUT (default /tmp/out). A stage that
# runs out of its time keeps what it finished. An empty TIME_WIDTHS, SWEEP_WIDTHS or
# COMPILE_WIDTHS (set to "none") skips that stage.
# PROFILE=smoke runs the same steps on the CPU at toy sizes (a check of the script).
export PYTHONUNBUFFERED=1
PROFILE=${PROFILE:-gpu}
ENV_DIR=environments/small_scaling_law
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WORK=${WORK:-/tmp/ssl_sweep_$PROFILE}; rm -rf "$WORK"; mkdir -p "$WORK/corpus"
PY=${PYTHON:-python3}
if [ "$PROFILE" = gpu ]; then
  : "${RUN_FLOPS:=3e14}" "${SWEEP_WIDTHS:=256,384,512,768}" "${WORKERS:=6}" "${COMPILE_WIDTHS:=448,1280}"
  DEVICE=cuda:0; TIME_STEPS=${TIME_STEPS:-15}
else
  : "${RUN_FLOPS:=3e9}" "${SWEEP_WIDTHS:=16,32}" "${WORKERS:=2}" "${COMPILE_WIDTHS:=32}"
  DEVICE=cpu; TIME_STEPS=${TIME_STEPS:-12}; export SCALING_PROFILE=smoke
fi
SWEEP_LRS=${SWEEP_LRS:-0.5,1,2}; SWEEP_SEEDS=${SWEEP_SEEDS:-0,1}; COMPILE_STEPS=${COMPILE_STEPS:-30}
TIME_WIDTHS=${TIME_WIDTHS:-all}
DEVICES=$(for _ in $(seq "$WORKERS"); do printf '%s,' "$DEVICE"; done)
stage() { echo "== $* ($(date -u +%T))"; }
{
date -u
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
$PY -c "import sys,torch;print('python',sys.version.split()[0],'torch',torch.__version__,'cuda',torch.cuda.is_available())"
git log -1 --format='commit %H' 2>/dev/null
echo "PROFILE=$PROFILE RUN_FLOPS=$RUN_FLOPS SWEEP_WIDTHS=$SWEEP_WIDTHS SWEEP_LRS=$SWEEP_LRS SWEEP_SEEDS=$SWEEP_SEEDS WORKERS=$WORKERS"
} 2>&1 | tee "$OUT/env.log"

stage "1. synthetic corpus"
start=$(date +%s)
timeout 120 $PY -c "import sys; sys.path.insert(0, sys.argv[1]); import prepare; from pathlib import Path
prepare.make_synthetic(sys.argv[2], Path(sys.argv[3]))" $ENV_DIR "$PROFILE" "$WORK/corpus" | grep -v '^PROGRESS'
echo "corpus: $(( $(date +%s) - start )) s"

stage "2. timing widths $TIME_WIDTHS, $TIME_STEPS steps, plain"
if [ "$TIME_WIDTHS" != none ]; then
  [ "$TIME_WIDTHS" = all ] && W= || W="--widths $TIME_WIDTHS"
  timeout ${TIME_TIMEOUT:-170} $PY $ENV_DIR/reference/time_widths.py --profile $PROFILE --data "$WORK/corpus" $W \
    --out "$OUT/timing_plain.json" --steps "$TIME_STEPS" --deadline ${TIME_DEADLINE:-140} 2>&1 | grep -v '^W[0-9]' | tee "$OUT/timing_plain.log"
fi

stage "3. reduced sweep: widths $SWEEP_WIDTHS x lrs $SWEEP_LRS x seeds $SWEEP_SEEDS at $RUN_FLOPS FLOPs"
start=$(date +%s)
[ "$SWEEP_WIDTHS" != none ] && SCALING_PREPARE_DEVICES=$DEVICES timeout ${SWEEP_TIMEOUT:-190} $PY $ENV_DIR/prepare.py --profile $PROFILE --mode from \
  --source "$WORK/corpus" --out "$WORK/assets" --work "$WORK/work" --run-flops "$RUN_FLOPS" --widths "$SWEEP_WIDTHS" \
  --lrs "$SWEEP_LRS" --seeds "$SWEEP_SEEDS" --compile off 2>&1 | grep -v '^PROGRESS' | tee "$OUT/sweep.log"
echo "sweep: exit ${PIPESTATUS[0]}, $(( $(date +%s) - start )) s" | tee -a "$OUT/sweep.log"
mkdir -p "$WORK/runs"; cp "$WORK"/work/sweep/*/*.json "$WORK/runs/" 2>/dev/null
for f in "$WORK"/runs/*.json; do [ -f "$f" ] && tr -d '\n' < "$f" && echo; done > "$OUT/sweep_runs.jsonl"

stage "4. timing widths $COMPILE_WIDTHS with --compile"
[ "$COMPILE_WIDTHS" != none ] && timeout ${COMPILE_TIMEOUT:-120} $PY $ENV_DIR/reference/time_widths.py --profile $PROFILE \
  --data "$WORK/corpus" --out "$OUT/timing_compiled.json" --steps "$COMPILE_STEPS" --compile --widths "$COMPILE_WIDTHS" \
  --deadline ${COMPILE_DEADLINE:-60} 2>&1 | grep -v '^W[0-9]' | tee "$OUT/timing_compiled.log"

stage "5. summaries"
{
echo "-- projected cost of the recipe at the target budget (one run per width; then x 3 lrs x 2 seeds)"
ls "$OUT"/timing_*.json >/dev/null 2>&1 && $PY $ENV_DIR/reference/time_widths.py --summary "$OUT"/timing_*.json --lrs 3 --seeds 2
echo "-- reduced-budget runs (RUN_FLOPS=$RUN_FLOPS each; synthetic corpus; $WORKERS runs sharing the device)"
$PY - "$WORK/runs" <<'EOF'
import json, statistics, sys
from pathlib import Path
runs = [json.loads(p.read_text()) for p in sorted(Path(sys.argv[1]).glob("*.json"))]
runs.sort(key=lambda r: (r["n_embd"], r.get("lr_scale", 1.0), r["seed"]))
print("| n_embd | max_iters | FLOPs | lr x | peak lr | seed | val loss | train s (shared) |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in runs:
    print(f"| {r['n_embd']} | {r['max_iters']} | {r['flops']:.3g} | {r.get('lr_scale', 1.0):g} | {r['peak_lr']:.3g} | "
          f"{r['seed']} | {r['val_loss']:.4f} | {r['train_seconds']:.1f} |")
groups = {}
for r in runs:
    groups.setdefault((r["n_embd"], r.get("lr_scale", 1.0)), []).append(r["val_loss"])
print("mean over seeds (spread):")
for (n, lr), v in sorted(groups.items()):
    print(f"  n_embd {n} lr x{lr:g}: {statistics.mean(v):.4f} ({max(v) - min(v):.4f}, {len(v)} seeds)")
print(f"{len(runs)} runs, {sum(r['train_seconds'] for r in runs):.1f} s of (shared) training")
EOF
} 2>&1 | tee "$OUT/summary.log"
date -u
