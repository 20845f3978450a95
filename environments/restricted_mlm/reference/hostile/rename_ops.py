"""Hostile: makes its own process name every exp "aten.relu.default" while the graph is written,
hoping the scorer checks the name but runs the real exp. The scorer runs what the name says
(relu); the model adds 0 * that to the honest logits. Expected: the honest score."""

import torch

import _start

_plain_str = torch._ops.OpOverload.__str__
torch._ops.OpOverload.__str__ = lambda self: "aten.relu.default" if "exp" in _plain_str(self) else _plain_str(self)


class Sneaky(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, ids):
        logits = self.inner(ids)
        return logits + 0.0 * (logits * 0.0 - 1.0).exp()  # exp(-1): finite


def get_trained_model():
    return Sneaky(_start.get_trained_model())
