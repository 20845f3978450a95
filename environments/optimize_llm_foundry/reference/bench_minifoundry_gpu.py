"""Times minifoundry's model at the gpu profile's size: a 1.3B LLaMA shape (deepseek-coder-1.3b-base:
24 layers, d=2048, 16 heads, MLP 5504, vocabulary 32256) with random weights, one GPU.

    python3 environments/optimize_llm_foundry/reference/bench_minifoundry_gpu.py [--small] [--steps N]

For each setting, a few optimizer steps of one global batch of 16 sequences (the gpu config's
global_train_batch_size), as the starting minifoundry loop does them (fp32 master weights, bf16
autocast, summed cross-entropy over response tokens, clipping, AdamW), and prints one line with
the median seconds per step, tokens per second and the peak GPU memory. Settings: microbatches of
4 vs one of 16, activation checkpointing on vs off, padded to 4096 (LLM Foundry's max_seq_len in
finetune.yaml) vs 512 (about the longest CodeAlpaca row). This needs only torch; it says what one
GPU does per step, which bounds what a 4-GPU LLM Foundry run can gain from the same changes.
--small runs a tiny shape on the CPU (how this script was checked without a GPU).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "solution"))
from minifoundry.model import CausalLM, ModelConfig  # noqa: E402

FULL = ModelConfig(vocab_size=32256, hidden_size=2048, intermediate_size=5504, num_hidden_layers=24,
                   num_attention_heads=16, max_position_embeddings=4096, rope_theta=100000.0)
SMALL = ModelConfig(vocab_size=512, hidden_size=64, intermediate_size=160, num_hidden_layers=2,
                    num_attention_heads=4, max_position_embeddings=512)


def step(model, opt, batch_ids, targets, micro: int, device: str) -> None:
    n_targets = int((targets != -100).sum())
    for m in range(0, batch_ids.shape[0], micro):
        with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
            logits = model(batch_ids[m:m + micro])
        loss = F.cross_entropy(logits.float().flatten(0, 1), targets[m:m + micro].flatten(), ignore_index=-100,
                               reduction="sum") / n_targets
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--steps", type=int, default=4)
    a = ap.parse_args()
    device = "cpu" if a.small or not torch.cuda.is_available() else "cuda"
    cfg = SMALL if a.small else FULL
    seq_lens = (256, 512) if a.small else (512, 4096)
    torch.manual_seed(0)
    model = CausalLM(cfg)
    model.init_weights(torch.Generator().manual_seed(0))
    model.to(device).train()
    n_params = sum(p.numel() for p in model.parameters())
    print(f"device {device} ({torch.cuda.get_device_name() if device == 'cuda' else 'cpu'}), torch {torch.__version__}, "
          f"{n_params / 1e6:.1f}M parameters", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.0,
                            fused=device == "cuda")
    g = torch.Generator().manual_seed(1)
    for seq in seq_lens:
        # rows of about 200 tokens (prompt 60, response 140), padded to seq; only responses are targets
        ids = torch.randint(2, cfg.vocab_size, (16, seq), generator=g)
        targets = torch.full((16, seq), -100)
        targets[:, 59:199] = ids[:, 60:200]
        ids[:, 200:] = 0
        ids, targets = ids.to(device), targets.to(device)
        for micro in (4, 16):
            for ckpt in (True, False):
                model.activation_checkpointing = ckpt
                if device == "cuda":
                    torch.cuda.empty_cache()
                    torch.cuda.reset_peak_memory_stats()
                times = []
                try:
                    for i in range(a.steps + 1):
                        if device == "cuda":
                            torch.cuda.synchronize()
                        t0 = time.perf_counter()
                        step(model, opt, ids, targets, micro, device)
                        if device == "cuda":
                            torch.cuda.synchronize()
                        if i:  # the first step warms up (allocator, kernels, optimizer state)
                            times.append(time.perf_counter() - t0)
                except torch.OutOfMemoryError:
                    print(f"seq {seq:5d} microbatch {micro:2d} checkpointing {str(ckpt):5s}: out of memory", flush=True)
                    opt.zero_grad(set_to_none=True)
                    continue
                med = statistics.median(times)
                peak = torch.cuda.max_memory_allocated() / 2**30 if device == "cuda" else float("nan")
                print(f"seq {seq:5d} microbatch {micro:2d} checkpointing {str(ckpt):5s}: {med:.3f} s/step "
                      f"(min {min(times):.3f}), {16 * seq / med:,.0f} padded tokens/s, peak GPU memory {peak:.1f} GiB",
                      flush=True)
    steps_per_epoch = 1000 // 16
    print(f"(the gpu config trains 1 epoch of 1000 rows = {steps_per_epoch} steps of 16)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
