"""The smoke profile's reference: a leaner PyTorch formulation that is faster on the CPU.

Triton kernels run through the interpreter in the smoke profile and are slow there, so the
smoke profile's reference score comes from this version (int32 throughout, three passes instead
of five). Tests use it as the "faster solution" in a real container.
"""

import torch


def prefix_sum(x: torch.Tensor) -> torch.Tensor:
    positive = (x > 0).to(torch.int32)
    odd_before = (torch.cumsum(positive, 0, dtype=torch.int32) - positive) & 1
    return torch.cumsum(x * odd_before, 0, dtype=torch.int32)
