"""The reference fix: undo the permutation (its seed is in prepare.py) and save fixed_model.pth.

Measures the best score a fix can reach: the uncorrupted model's. Run from the environment
folder:  python reference/unpermute.py ASSETS/workspace/large_model.pth OUT.pth
"""

import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE / "solution"))
sys.path.insert(0, str(HERE))
from model import load_checkpoint, save_checkpoint  # noqa: E402
from prepare import PERMUTATION_SEED  # noqa: E402

model = load_checkpoint(sys.argv[1])
perm = torch.randperm(model.cfg.vocab_size, generator=torch.Generator().manual_seed(PERMUTATION_SEED))
with torch.no_grad():
    restored = torch.empty_like(model.wte.weight)
    restored[perm] = model.wte.weight  # the corrupted row i holds the original row perm[i]
    model.wte.weight.copy_(restored)
save_checkpoint(model, sys.argv[2])
print(f"wrote {sys.argv[2]}")
