#!/bin/bash
# Finetunes ../assets/base_model on ../assets/train_data.jsonl and writes the finetuned weights to
# trained_model/ beside this script. REBENCH_PROFILE picks the stack:
#   gpu   (default) LLM Foundry 0.22 + Composer on all visible GPUs, config finetune.yaml; the three
#         stages are scripts/*.py, thin command lines over the llm-foundry package
#   smoke minifoundry/ (plain PyTorch on the CPU, a stand-in for LLM Foundry with the same three
#         stages), config finetune_smoke.toml
set -euo pipefail
cd "$(dirname "$0")"
BASE_MODEL=$(realpath ../assets/base_model)
TRAIN_DATA=$(realpath ../assets/train_data.jsonl)

if [ "${REBENCH_PROFILE:-gpu}" = smoke ]; then
  rm -rf finetuning_tokens
  time python3 -m minifoundry.data_prep \
    --data_files "$TRAIN_DATA" \
    --splits train \
    --out_root finetuning_tokens \
    --tokenizer "$BASE_MODEL" \
    --max_seq_len 128
  cp -r finetuning_tokens/train finetuning_tokens/valid

  rm -rf ftout
  time python3 -m minifoundry.train \
    finetune_smoke.toml \
    data_local=finetuning_tokens \
    model.pretrained_model_name_or_path="$BASE_MODEL" \
    save_folder=ftout

  rm -rf trained_model
  time python3 -m minifoundry.convert \
    --composer_path ftout/latest-rank0.pt \
    --hf_output_path trained_model \
    --base_model "$BASE_MODEL" \
    --output_precision fp32
else
  rm -rf finetuning_tokens
  time python3 scripts/convert_finetuning_dataset.py \
    --data_files "$TRAIN_DATA" \
    --splits train \
    --out_root finetuning_tokens \
    --tokenizer "$BASE_MODEL" \
    --max_seq_len 4096
  cp -r finetuning_tokens/train finetuning_tokens/valid

  rm -rf ftout
  time composer scripts/train.py \
    finetune.yaml \
    variables.data_local=finetuning_tokens \
    variables.model_name_or_path="$BASE_MODEL" \
    train_loader.dataset.split=train \
    eval_loader.dataset.split=valid \
    eval_interval=0 \
    save_folder=ftout

  rm -rf trained_model
  time python3 scripts/convert_composer_to_hf.py \
    --composer_path ftout/latest-rank0.pt \
    --hf_output_path trained_model \
    --base_model "$BASE_MODEL" \
    --output_precision bf16

  find . -type d -name "tokenizer-save-dir-*" -exec rm -r {} +
fi
