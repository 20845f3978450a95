#!/bin/bash
# Measures fix_embedding's gpu-profile scorer at full size on one GPU, without Docker: assets from
# `prepare.py --profile gpu --mode synthetic` (GPT-2 XL and GPT-2 shapes, random weights, random
# tokens: the hub cannot be reached there), laid out as the container would see them. Prints the
# scorer's JSON line with its load/eval times and peak GPU memory, for the starting (corrupted)
# model and for a fixed_model.pth (a copy of it: the same loading path as any submission). The
# loader process runs as the owner of the home (here the current user). Run from the repository
# root. About 3 minutes.
set -euo pipefail
export PYTHONUNBUFFERED=1
E=environments/fix_embedding
W=${W:-/tmp/fe_gpu}
export REBENCH_SCORER_LIB=$(pwd)/rebench_tui/runtime/lib
rm -rf "$W"; mkdir -p "$W/out" "$W/work" "$W/home" "$W/prot"
date -u
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
python3 -c "import sys, torch; print('python', sys.version.split()[0], 'torch', torch.__version__)"
t0=$(date +%s)
python3 "$E/prepare.py" --profile gpu --mode synthetic --out "$W/out" --work "$W/work" | grep -v '^PROGRESS'
echo "prepare (synthetic, gpu shapes): $(( $(date +%s) - t0 )) s; sizes:"; du -sh "$W/out/workspace"/* "$W/out/protected"/*
cp -r "$E/solution" "$W/home/solution"; ln -s "$W/out/workspace" "$W/home/assets"
cp -r "$E/protected/." "$W/prot/"; cp -r "$E/solution" "$W/prot/starting_solution"; ln -s "$W/out/protected" "$W/prot/assets"
score() { REBENCH_HOME="$W/home" REBENCH_PROTECTED="$W/prot" REBENCH_PROFILE=gpu python3 "$W/prot/score.py"; }
ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
for i in 1 2; do t0=$(date +%s%N); echo "start run $i: $(score)"; echo "wall $(ms $t0) ms"; done
cp "$W/out/workspace/large_model.pth" "$W/home/fixed_model.pth"
t0=$(date +%s%N); echo "fixed-model run: $(score)"; echo "wall $(ms $t0) ms"
