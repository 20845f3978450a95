"""Scorer for fix_embedding: the validation loss of the fixed model.

Loads /home/agent/fixed_model.pth (or, before one exists, the corrupted large model, which
gives the starting score) into the fixed architecture in /protected/assets/config.json, using
the model code from the pristine starting solution. A checkpoint of any other shape is refused
with the mismatching tensors named. Evaluates a fixed number of batches of the training and the
held-out validation tokens with a fixed seed and prints
{"score": ln(loss_validation - 1.5), "message": {"loss_train", "loss_validation", ...}}.
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
import traceback
from pathlib import Path

sys.path.insert(0, os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib"))
from rebench_scorer import result as _channel  # noqa: E402 - the result channel: what counts

HOME = Path(os.environ.get("REBENCH_HOME", "/home/agent"))
PROTECTED = Path(os.environ.get("REBENCH_PROTECTED", "/protected"))
PROFILE = os.environ.get("REBENCH_PROFILE", "gpu")
# batches x rows x tokens per split, evaluated with a fixed seed
EVAL = {"gpu": {"batches": 40, "rows": 2, "tokens": 1024}, "smoke": {"batches": 8, "rows": 4, "tokens": 64}}
SEED = 31337
FLOOR = 1.5


def emit(score: float, message: dict, details: dict) -> None:
    _channel.emit(score, message, details or {})


def main() -> int:
    sys.path.insert(0, str(PROTECTED / "starting_solution"))
    import numpy as np
    import torch
    from data import batch
    from model import GPT, GPTConfig

    cfg = GPTConfig(**json.loads((PROTECTED / "assets" / "config.json").read_text()))
    ev = EVAL[PROFILE]
    details: dict = {"profile": PROFILE, "eval": ev, "config": cfg.__dict__}
    fixed = HOME / "fixed_model.pth"
    path = fixed if fixed.exists() else HOME / "assets" / "large_model.pth"
    details["scored_file"] = str(path)
    note = None if fixed.exists() else "no /home/agent/fixed_model.pth yet: scored the corrupted model"
    t0 = time.time()
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - any unreadable file is the participant's to see
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else ""
        emit(math.nan, {"error": f"could not load {path.name} with torch.load(weights_only=True): {type(exc).__name__}: {first}"},
             {**details, "exception": str(exc)[:4000]})
        return 0
    state = ckpt.get("state_dict", ckpt) if isinstance(ckpt, dict) else None
    if not isinstance(state, dict) or not all(isinstance(v, torch.Tensor) for v in state.values()):
        emit(math.nan, {"error": f"{path.name} is not a state dict (save {{'config': ..., 'state_dict': model.state_dict()}})"}, details)
        return 0
    model = GPT(cfg)
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    wrong = sorted(k for k in set(expected) & set(state) if tuple(state[k].shape) != tuple(expected[k].shape))
    if missing or extra or wrong:
        shapes = [f"{k}: {tuple(state[k].shape)} (expected {tuple(expected[k].shape)})" for k in wrong[:5]]
        emit(math.nan, {"error": "the checkpoint does not fit the fixed architecture",
                        "missing": missing[:10], "unexpected": extra[:10], "wrong_shapes": shapes}, details)
        return 0
    model.load_state_dict({k: v.float() for k, v in state.items()})
    device = "cuda" if PROFILE == "gpu" and torch.cuda.is_available() else "cpu"
    model = model.to(device).eval()
    details["load_s"] = round(time.time() - t0, 2)
    losses = {}
    t1 = time.time()
    with torch.no_grad():
        for split, file in (("train", HOME / "assets" / "train.bin"), ("validation", PROTECTED / "assets" / "val.bin")):
            tokens = np.memmap(file, dtype=np.uint16, mode="r")
            gen = torch.Generator().manual_seed(SEED)
            total = 0.0
            for _ in range(ev["batches"]):
                x, y = batch(tokens, ev["rows"], ev["tokens"], gen, device)
                with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
                    total += model.loss(x, y).item()
            losses[split] = total / ev["batches"]
    details["eval_s"] = round(time.time() - t1, 2)
    if device == "cuda":
        details["peak_gpu_memory_gb"] = round(torch.cuda.max_memory_allocated() / 1e9, 2)
    message = {"loss_train": round(losses["train"], 5), "loss_validation": round(losses["validation"], 5)}
    if note:
        message["note"] = note
    val = losses["validation"]
    if not math.isfinite(val) or val <= FLOOR:
        emit(math.nan, {**message, "error": f"validation loss {val} is not above {FLOOR}"}, details)
        return 0
    emit(math.log(val - FLOOR), message, details)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception as exc:  # noqa: BLE001 - a scorer bug must still print a result line
        emit(math.nan, {"error": f"scoring failed: {type(exc).__name__}: {exc}"}, {"traceback": traceback.format_exc()[-4000:]})
        sys.exit(0)
