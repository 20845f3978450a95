"""The fixed shapes and FLOP budgets of this task, per profile.

Read-only in spirit: the task is to predict, not to change these. The scorer keeps its own copy
of the target budget, so editing this file changes nothing about how you are scored.

The profile is chosen by the environment variable SCALING_PROFILE (``gpu`` unless set; the CPU
``smoke`` profile sets it to ``smoke``). Both profiles count FLOPs with the same formula:

    FLOPs = n_layer * n_embd**2 * 12 * 6 * block_size * batch_size * max_iters
"""

from __future__ import annotations

import os

PROFILES = {
    # The real task: GPT-2 tokens (OpenWebText), 4 layers, 1024-token context, 64 sequences a step.
    "gpu": {
        "n_layer": 4,
        "block_size": 1024,
        "batch_size": 64,
        "vocab_size": 50304,  # GPT-2's 50,257 tokens, padded to a multiple of 64
        "target_flops": 5e17,  # the budget you predict for
        "cap_flops": 1e16,  # the most one of your experiments may use
        "answer_file": "answer.json",
        "lr": 6e-4,  # peak learning rate at n_embd <= lr_width, scaled by lr_width / n_embd above it
        "lr_width": 768,
        "head_dim": 64,  # n_head = n_embd // head_dim (at least 1; see train.n_heads)
        "eval_tokens": 1024 * 1024,  # the validation loss is the mean over the first this-many tokens of val.bin
        "eval_batch": 16,  # sequences per evaluation forward pass
    },
    # CPU smoke profile: the same code at toy sizes on a synthetic corpus (64-token vocabulary).
    # Its budgets keep the real ratio: an experiment may use 1/50 of the target.
    "smoke": {
        "n_layer": 4,
        "block_size": 32,
        "batch_size": 8,
        "vocab_size": 64,
        "target_flops": 1.5e11,
        "cap_flops": 3e9,
        "answer_file": "answer_smoke.json",
        "lr": 1e-2,
        "lr_width": 64,
        "head_dim": 16,
        "eval_tokens": 32 * 1024,
        "eval_batch": 256,
    },
}

WARMUP_FRACTION = 0.05  # linear warm-up over this fraction of max_iters (at least one step)
MIN_LR_FRACTION = 0.1  # cosine decay from the peak to this fraction of it at max_iters
WEIGHT_DECAY = 0.1
BETAS = (0.9, 0.95)
GRAD_CLIP = 1.0


def profile_name() -> str:
    name = os.environ.get("SCALING_PROFILE", "gpu")
    if name not in PROFILES:
        raise SystemExit(f"SCALING_PROFILE={name!r} is not a profile; use one of {sorted(PROFILES)}")
    return name


def constants(profile: str | None = None) -> dict:
    return PROFILES[profile or profile_name()]


def flops(n_embd: int, max_iters: int, profile: str | None = None) -> float:
    """Training FLOPs of one run, by the task's formula."""
    c = constants(profile)
    return float(c["n_layer"]) * n_embd**2 * 12 * 6 * c["block_size"] * c["batch_size"] * max_iters


def iters_for(n_embd: int, budget: float, profile: str | None = None) -> int:
    """The largest max_iters whose run at this width stays within ``budget`` FLOPs."""
    per_iter = flops(n_embd, 1, profile)
    return int(budget // per_iter)
