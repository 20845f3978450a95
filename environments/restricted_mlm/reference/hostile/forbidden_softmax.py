"""Hostile (plain rule break): the honest model with a softmax over its hidden vectors.
Expected: NaN with disallowed_operation naming softmax and this file's line."""

import torch.nn.functional as F

import _start


class Soft(_start.BagOfWordsMLP):
    def forward(self, ids):
        return self.head(F.softmax(self.trunk(ids), dim=-1))


def get_trained_model():
    honest = _start.get_trained_model()
    model = Soft(**honest.config)
    model.load_state_dict(honest.state_dict())
    return model.eval()
