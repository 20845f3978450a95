"""Hostile: a model that remembers every token it was shown (a buffer updated in place in the
forward pass) and favours them in later batches: windows of the held-out data overlap, so tokens
masked in one batch may be visible in another. The captured graph is functional and the scorer
refuses in-place writes, so nothing carries over: the memory stays zero.
Expected: the honest score."""

import torch

import _start


class Memo(torch.nn.Module):
    def __init__(self, inner):
        super().__init__()
        self.inner = inner
        self.register_buffer("memory", torch.zeros(50257))

    def forward(self, ids):
        remembered = self.memory.clone()  # what earlier batches left (if anything survived them)
        seen = torch.zeros(50257).index_add(0, ids.reshape(-1), torch.ones(ids.numel()))
        self.memory.add_(seen)  # dropped: the forward pass is captured as a pure function
        return self.inner(ids) + 2.0 * remembered


def get_trained_model():
    return Memo(_start.get_trained_model())
