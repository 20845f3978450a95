"""Hostile (a cast hidden in a writing operator): the honest model, whose hidden activations then
pass through a gate built without any forbidden operator by name: float values are written into
an integer tensor by ``as_strided_scatter`` (a float to int conversion), and into a boolean one by
``diagonal_scatter`` (``x != 0``, a comparison), and exp is read from a constant table indexed by
those integers. The gate lets everything through, so a scorer that judged operators by name alone
gave the honest score plus a model it should have refused.
Expected: NaN with disallowed_operation naming the conversion."""

import torch

import _start

TABLE = torch.arange(-64, 64, dtype=torch.float32).exp()


class CastInScatter(_start.BagOfWordsMLP):
    def trunk(self, ids):
        x = super().trunk(ids)
        flat = x.reshape(-1)
        n = flat.shape[0]
        codes = torch.as_strided_scatter(torch.zeros(n, dtype=torch.long), flat * 0.0 + 64.0, (n,), (1,))
        nonzero = torch.diagonal_scatter(torch.zeros(4, 4, dtype=torch.bool), flat[:4] * 0.0 + 1.0)
        gate = TABLE[codes] * torch.diagonal(nonzero).to(x.dtype).sum() * 0.25  # exp(0) * 1 = 1
        return x * gate.reshape(x.shape)


def get_trained_model():
    honest = _start.get_trained_model()
    model = CastInScatter(**honest.config)
    model.load_state_dict(honest.state_dict())
    return model.eval()
