#!/bin/bash
# nanogpt_chat_rl on one GPU machine, in one go (a few minutes on an H200). From the repository root:
#
#     bash environments/nanogpt_chat_rl/reference/run_gpu.sh
#
# Needs python3 with torch (CUDA); no internet, no docker, no transformers. Steps:
#   1. prepare.py --profile gpu --mode synthetic into /tmp/ncr_prep: GPT-2 small shape with random
#      weights, a byte tokenizer, 200 held-out messages, the sft baseline (random weights: its
#      answers are noise; this measures the code paths and times)
#   2. the stand-in judge and the judge proxy on loopback (made-up key), as the smoke profile has them
#   3. a home and a protected folder like the container's; the gpu scorer on the base model, twice
#      (JSON line: generation_seconds, judge_seconds, peak_gpu_memory_gib in the details); the
#      scorer reaches the stand-in through a private proxy of its own, given the JUDGE_* settings
#   4. the starting solution's train_rl.py for 3 steps on the GPU (seconds a step)
#   5. reference/bench_gpu.py: generation of 60 new tokens for 256 prompts at batch sizes 32-256,
#      float32 and bfloat16, time and peak memory; judge round trips through the proxy
# Everything is also written to $OUT (default /tmp/ncr_out).
set -uo pipefail
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
PY=${PYTHON:-python3}
ENV_DIR=environments/nanogpt_chat_rl
OUT=${OUT:-/tmp/ncr_out}
PREP=/tmp/ncr_prep HOME_DIR=/tmp/ncr_home PROT=/tmp/ncr_prot
KEY=sk-made-up-run-gpu-key
mkdir -p "$OUT"
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
rm -rf "$PREP" /tmp/ncr_work "$HOME_DIR" "$PROT"
T0=$(date +%s)
{
date -u
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
$PY -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.cuda.is_available())"
} 2>&1 | tee "$OUT/env.log"

echo "== 1. prepare (gpu, synthetic)"
t=$(date +%s.%N)
timeout 300 $PY "$ENV_DIR/prepare.py" --profile gpu --mode synthetic --out "$PREP" --work /tmp/ncr_work 2>&1 \
  | grep -v '^PROGRESS' | tee "$OUT/prepare.log"
echo "prepare: exit ${PIPESTATUS[0]}, $(elapsed "$t") s" | tee -a "$OUT/prepare.log"

echo "== 2. stand-in judge and proxy"
mkdir -p "$HOME_DIR" "$PROT"
JUDGE_API_KEY=$KEY $PY "$ENV_DIR/protected/judge_standin.py" --port 18701 > "$OUT/standin.log" 2>&1 &
STANDIN=$!
JUDGE_API_KEY=$KEY REBENCH_PROTECTED=$PROT $PY "$ENV_DIR/protected/judge_proxy.py" --port 18700 \
  --default-base-url http://127.0.0.1:18701/v1 --default-model standin-judge --rate 1000 --burst 1000 \
  --scorer-rate 1000 --scorer-burst 1000 --max-inflight 64 > "$OUT/proxy.log" 2>&1 &
PROXY=$!
trap 'kill $STANDIN $PROXY 2>/dev/null' EXIT
sleep 2
head -n 1 "$OUT/standin.log" "$OUT/proxy.log"
export JUDGE_PROXY_URL=http://127.0.0.1:18700/v1

echo "== 3. scorer (gpu profile) on the base model"
cp -r "$ENV_DIR/solution" "$HOME_DIR/solution"
cp -r "$PREP/workspace" "$HOME_DIR/assets"
cp -r "$ENV_DIR/protected/." "$PROT/"
cp -r "$PREP/protected" "$PROT/assets"
cp -r "$ENV_DIR/solution" "$PROT/starting_solution"
cp -r "$HOME_DIR/assets/base_model" "$HOME_DIR/finetuned_model"
for i in 1 2; do
  t=$(date +%s.%N)
  # the scorer runs its own private proxy (never the service port), configured like the service
  REBENCH_HOME=$HOME_DIR REBENCH_PROTECTED=$PROT REBENCH_PROFILE=gpu REBENCH_SCORER_LIB=$PWD/rebench_tui/runtime/lib \
    JUDGE_BASE_URL=http://127.0.0.1:18701/v1 JUDGE_MODEL=standin-judge JUDGE_API_KEY=$KEY timeout 600 $PY "$PROT/score.py" \
    2>"$OUT/score_$i.stderr" | tail -n 1 | tee "$OUT/score_$i.json"
  echo "score $i: wall $(elapsed "$t") s"
done 2>&1 | tee "$OUT/scorer.log"

echo "== 4. train_rl.py, 3 steps (batch 16 x 4 samples)"
t=$(date +%s.%N)
(cd "$HOME_DIR/solution" && HOME=$HOME_DIR REBENCH_PROFILE=gpu timeout 300 $PY train_rl.py --steps 3 --batch 16 --samples 4 \
  --out "$HOME_DIR/rl_model") 2>&1 | tail -n 5 | tee "$OUT/train_rl.log"
echo "train_rl: $(elapsed "$t") s (including loading and the opponent's answers)" | tee -a "$OUT/train_rl.log"

echo "== 5. generation and judge round trips"
timeout 300 $PY "$ENV_DIR/reference/bench_gpu.py" --judge-url "$JUDGE_PROXY_URL" 2>&1 | tee "$OUT/bench.log"
date -u
echo "total: $(( $(date +%s) - T0 )) s"
