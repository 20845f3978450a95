"""Stage 3 (smoke profile): turn the training checkpoint into a Hugging-Face-style model folder.

    python3 -m minifoundry.convert --composer_path ftout/latest-rank0.pt --hf_output_path trained_model \
        --base_model BASE_MODEL_DIR [--output_precision fp32|bf16]

Writes HF_OUTPUT_PATH/config.json (the base model's), model.safetensors and tokenizer.json.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

import torch

from .safetensors_io import save_file

PRECISIONS = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--composer_path", required=True)
    ap.add_argument("--hf_output_path", required=True)
    ap.add_argument("--base_model", required=True, help="folder with the base model's config.json and tokenizer.json")
    ap.add_argument("--output_precision", choices=sorted(PRECISIONS), default="fp32")
    a = ap.parse_args(argv)
    ckpt = torch.load(a.composer_path, map_location="cpu", weights_only=True)
    state = ckpt["state"]["model"]
    dtype = PRECISIONS[a.output_precision]
    out = Path(a.hf_output_path)
    out.mkdir(parents=True, exist_ok=True)
    save_file({k: v.to(dtype) for k, v in state.items()}, out / "model.safetensors")
    for name in ("config.json", "tokenizer.json"):
        shutil.copy(Path(a.base_model) / name, out / name)
    print(f"wrote {len(state)} tensors ({sum(v.numel() for v in state.values())} parameters, {a.output_precision}) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
