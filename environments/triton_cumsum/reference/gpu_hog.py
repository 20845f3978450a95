"""Keep the GPU busy for SECONDS (matrix products, back to back) from a process outside the
scoring: what a participant's process launched just before pressing score could leave running on
the GPU. harness_hostile.sh runs it beside an honest scoring: the scorer must then give no score
better than honest, and refuse one whose hand-over measurement shared the GPU."""
import sys
import time

import torch

x = torch.randn(8192, 8192, device="cuda")
until = time.monotonic() + float(sys.argv[1])
while time.monotonic() < until:
    for _ in range(4):
        x = (x @ x).clamp_(-1, 1)
    torch.cuda.synchronize()
