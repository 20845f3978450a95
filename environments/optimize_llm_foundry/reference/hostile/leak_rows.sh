#!/bin/bash
# Tries to carry the scoring room's training rows out through the result: prints them, names
# processes and files after them, writes a weights file whose header quotes them, and exits 0 so that the scorer reads it.
# The participant reads the result, so none of this may reach it: the details say how much
# was withheld, never what.
cd "$(dirname "$0")"
rows=../assets/train_data.jsonl
cat "$rows"
head -c 200 "$rows" | tr -c 'A-Za-z0-9' '_' | xargs -I{} bash -c 'exec -a "{}" sleep 300' &
mkdir -p trained_model
i=0
while IFS= read -r line && [ $i -lt 20 ]; do
  : > "trained_model/$(printf '%s' "$line" | tr -c 'A-Za-z0-9' '_' | cut -c1-200)"
  i=$((i + 1))
done < "$rows"
python3 - "$rows" <<'PY'
import json, struct, sys
text = open(sys.argv[1]).read(3000)
header = json.dumps({"leak": text}).encode()
open("trained_model/model.safetensors", "wb").write(struct.pack("<Q", len(header)) + header)
PY
exit 0
