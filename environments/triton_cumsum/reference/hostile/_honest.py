# Shared honest body the hostile solutions call after their trick (plain PyTorch, correct).
import torch


def honest(x):
    positive = (x > 0).to(torch.int64)
    odd = torch.remainder(torch.cumsum(positive, 0) - positive, 2) == 1
    return torch.cumsum(torch.where(odd, x.to(torch.int64), 0), 0).to(torch.int32)
