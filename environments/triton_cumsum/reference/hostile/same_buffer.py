"""Hand back one buffer of its own for every call: each call overwrites the last one's answer, so
at most one of a batch's outputs can be right when the scorer reads them."""
import torch

from _honest import honest

held = {}


def prefix_sum(x):
    out = held.get(x.numel())
    if out is None:
        out = held[x.numel()] = torch.empty_like(x)
    out.copy_(honest(x))
    return out
