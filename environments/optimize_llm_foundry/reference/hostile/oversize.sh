#!/bin/bash
# A 64 GiB sparse "weights" file whose header says it is a safetensors file with one huge tensor:
# a scorer that reads it whole runs out of memory (or time).
cd "$(dirname "$0")"
mkdir -p trained_model
python3 - <<'PY'
import json, struct
header = json.dumps({"lm_head.weight": {"dtype": "F32", "shape": [4, 1 << 34], "data_offsets": [0, 1 << 36]}}).encode()
with open("trained_model/model.safetensors", "wb") as fh:
    fh.write(struct.pack("<Q", len(header)) + header)
    fh.truncate(8 + len(header) + (1 << 36))
PY
ls -la trained_model
