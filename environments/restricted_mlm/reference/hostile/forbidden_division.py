"""Hostile (plain rule break): the honest model's average computed with a division.
Expected: NaN with disallowed_operation naming aten.div."""

import _start


class Divides(_start.BagOfWordsMLP):
    def trunk(self, ids):
        h = self.tok(ids) + self.pos(self.positions[: ids.shape[1]])
        x = h + self.context(h.sum(dim=1, keepdim=True) / ids.shape[1])  # forbidden: division
        for block in self.blocks:
            x = block(x)
        return x


def get_trained_model():
    honest = _start.get_trained_model()
    model = Divides(**honest.config)
    model.load_state_dict(honest.state_dict())
    return model.eval()
