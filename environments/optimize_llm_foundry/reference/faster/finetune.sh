#!/bin/bash
# The faster smoke solution: copy this file and minifoundry/fast_finetune.py over solution/.
set -euo pipefail
cd "$(dirname "$0")"
BASE_MODEL=$(realpath ../assets/base_model)
TRAIN_DATA=$(realpath ../assets/train_data.jsonl)
rm -rf trained_model
python3 -m minifoundry.fast_finetune finetune_smoke.toml --train_data "$TRAIN_DATA" --base_model "$BASE_MODEL" --out trained_model
