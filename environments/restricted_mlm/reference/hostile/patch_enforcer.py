"""Hostile: switches off everything in its own process that could be an enforcer (a module named
enforcer, the old enforcer's profile hook), replaces the
loss function and the finiteness check the scorer might use, then uses exp (forbidden) in its
forward pass. Expected: NaN with disallowed_operation naming aten.exp: the checks run in the
scorer, on the graph. (Patching torch's mode classes themselves only breaks torch.export here:
NaN with an error, also no score.)"""

import sys
import types

import torch
import torch.nn.functional as F

import _start

fake = types.ModuleType("enforcer")
fake.Enforcer = type("Enforcer", (), {"__enter__": lambda s: s, "__exit__": lambda s, *a: False})
fake.check_aten = fake.check_name = lambda *a, **k: None
sys.modules["enforcer"] = fake
sys.setprofile(None)
F.cross_entropy = lambda *a, **k: torch.zeros(())
torch.isfinite = lambda x: torch.ones_like(x, dtype=torch.bool)


class WithExp(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, ids):
        return self.inner(ids).exp()  # forbidden


def get_trained_model():
    return WithExp(_start.get_trained_model())
