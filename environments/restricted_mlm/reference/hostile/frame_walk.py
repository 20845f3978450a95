"""Hostile: looks through the stack frames and every object of its process for the scorer's
held-out ids, masks, seed or file names, and would hand in a model that memorised them. The
scorer never sends them: it prints what it found (nothing) and hands in the honest model.
Expected: the honest score, and "suspects: []" in its output."""

import gc
import sys

import numpy as np
import torch

import _start


def _suspects() -> list[str]:
    found = []
    frame = sys._getframe()
    while frame is not None:
        for name, value in {**frame.f_globals, **frame.f_locals}.items():
            if isinstance(value, str) and ("/protected" in value or "val.bin" in value or "secret" in value):
                found.append(f"frame {frame.f_code.co_name}: {name}={value[:60]}")
            if isinstance(value, dict) and any(k in value for k in ("val_seed", "labels", "ids")):
                found.append(f"frame {frame.f_code.co_name}: {name} has {sorted(value)[:5]}")
        frame = frame.f_back
    for obj in gc.get_objects():
        if isinstance(obj, np.ndarray) and obj.dtype in (np.uint16, np.int64) and obj.size >= 1024:
            found.append(f"numpy {obj.dtype} {obj.shape}")
        elif isinstance(obj, torch.Tensor) and obj.dtype == torch.int64 and obj.dim() == 2 and obj.shape[1] == 128 \
                and not isinstance(obj, torch.nn.Parameter):
            found.append(f"tensor {tuple(obj.shape)}")
    return found


def get_trained_model():
    print("suspects:", _suspects(), flush=True)
    return _start.get_trained_model()
