#!/bin/bash
# Measures how much the smoke profile's start and reference scores move between prepares (each
# prepare draws a fresh corpus, models, permutation and evaluation seed). For each of N prepares
# (run P at a time): prepare.py --profile smoke --mode synthetic; the scorer (no container, as
# the current user) on the corrupted model (start); reference/unpermute.py; the scorer on its
# output (reference); and whether the recovered permutation is the one prepare drew (read from
# protected/secret.json, the organiser's side). Prints one line per prepare, then the spread.
# Run from the repository root:  N=8 P=8 bash environments/fix_embedding/reference/spread.sh
set -euo pipefail
E=environments/fix_embedding
N=${N:-6}; P=${P:-6}; W=${W:-/tmp/fe_spread}; PY=${PY:-python3}
LIB=$(pwd)/rebench_tui/runtime/lib
rm -rf "$W"; mkdir -p "$W"
one() {
  local d="$W/$1"; mkdir -p "$d/home" "$d/prot"
  OMP_NUM_THREADS=1 $PY "$E/prepare.py" --profile smoke --mode synthetic --out "$d/out" --work "$d/work" > "$d/prepare.log" 2>&1
  cp -r "$E/solution" "$d/home/solution"; ln -s "$d/out/workspace" "$d/home/assets"
  cp -r "$E/protected/." "$d/prot/"; cp -r "$E/solution" "$d/prot/starting_solution"; ln -s "$d/out/protected" "$d/prot/assets"
  sc() { OMP_NUM_THREADS=1 REBENCH_SCORER_LIB="$LIB" REBENCH_HOME="$d/home" REBENCH_PROTECTED="$d/prot" REBENCH_PROFILE=smoke $PY "$d/prot/score.py" | tail -1; }
  local start ref t0 t1
  start=$(sc)
  t0=$(date +%s)
  OMP_NUM_THREADS=1 $PY "$E/reference/unpermute.py" "$d/out/workspace/large_model.pth" "$d/home/fixed_model.pth" > "$d/unpermute.log" 2>&1
  t1=$(date +%s)
  ref=$(sc)
  $PY - "$d" "$start" "$ref" $((t1 - t0)) <<'PYEOF'
import json, sys, torch
d, start, ref, secs = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
perm = torch.tensor(json.load(open(f"{d}/out/protected/secret.json"))["permutation"])
c = torch.load(f"{d}/out/workspace/large_model.pth", weights_only=True)["state_dict"]["wte.weight"]
f = torch.load(f"{d}/home/fixed_model.pth", weights_only=True)["state_dict"]["wte.weight"]
orig = torch.empty_like(c); orig[perm] = c
right = (f == orig).all(1).float().mean().item()
print(json.dumps({"run": d.rsplit("/", 1)[1], "start": start["score"], "start_loss": start["message"].get("loss_validation"),
                  "reference": ref["score"], "reference_loss": ref["message"].get("loss_validation"),
                  "rows_recovered": right, "unpermute_s": int(secs)}))
PYEOF
}
export -f one; export E W PY LIB
seq 1 "$N" | xargs -P "$P" -I{} bash -c 'one {}' | tee "$W/runs.jsonl"
$PY - "$W/runs.jsonl" <<'PYEOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
for key in ("start", "reference"):
    v = [r[key] for r in runs if isinstance(r[key], float)]
    print(f"{key}: n={len(v)} mean {statistics.mean(v):.4f} sd {statistics.pstdev(v):.4f} min {min(v):.4f} max {max(v):.4f}")
print("all rows recovered in", sum(r["rows_recovered"] == 1.0 for r in runs), "of", len(runs), "prepares")
PYEOF
