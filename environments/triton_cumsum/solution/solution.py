"""Starting solution: correct, written with plain PyTorch tensor operations, and slow.

Replace the body of ``prefix_sum`` with something faster (a Triton kernel is the intended
route). Keep the name and the signature: the scorer imports this file and calls it.
"""

import torch


def prefix_sum(x: torch.Tensor) -> torch.Tensor:
    """Conditional prefix sum of a 1-D int32 tensor.

    ``y[i] = sum of x[j] for j <= i such that the number of positive values in x[0:j]
    (strictly before j) is odd``. Returns an int32 tensor of the same length, on x's device.
    """
    positive = (x > 0).to(torch.int64)
    positives_before = torch.cumsum(positive, dim=0) - positive
    counts = torch.remainder(positives_before, 2) == 1
    kept = torch.where(counts, x.to(torch.int64), torch.zeros((), dtype=torch.int64, device=x.device))
    return torch.cumsum(kept, dim=0).to(torch.int32)
