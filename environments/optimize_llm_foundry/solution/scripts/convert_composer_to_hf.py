"""Stage 3 (gpu profile): a Composer checkpoint of an hf_causal_lm model -> a Hugging Face folder.

    python3 scripts/convert_composer_to_hf.py --composer_path ftout/latest-rank0.pt \
        --hf_output_path trained_model --base_model BASE_MODEL_DIR [--output_precision bf16]

Composer keeps the wrapped Hugging Face model under the attribute `model`, so its state dict's keys
are the Hugging Face ones with a leading "model." (model.model.layers.0..., model.lm_head.weight).
This script strips that prefix, loads the base model and replaces all of its weights (strictly:
every tensor must be there, with its shape) and writes them with save_pretrained (safetensors),
with the base model's tokenizer beside them.
"""

from __future__ import annotations

import argparse
import sys

PREFIX = "model."


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--composer_path", required=True)
    ap.add_argument("--hf_output_path", required=True)
    ap.add_argument("--base_model", required=True, help="the Hugging Face folder training started from")
    ap.add_argument("--output_precision", choices=["fp32", "bf16", "fp16"], default="bf16")
    a = ap.parse_args(argv)

    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}[a.output_precision]
    # a Composer checkpoint pickles more than tensors (timestamps, RNG states), hence weights_only=False;
    # it is this run's own file
    ckpt = torch.load(a.composer_path, map_location="cpu", weights_only=False, mmap=True)
    state = ckpt["state"]["model"]
    weights = {k[len(PREFIX):] if k.startswith(PREFIX) else k: v for k, v in state.items()}

    # the base model's own loading gives the architecture (and its buffers); every weight is then replaced
    model = AutoModelForCausalLM.from_pretrained(a.base_model, torch_dtype=dtype)
    model.load_state_dict({k: v.to(dtype) for k, v in weights.items()}, strict=True)
    model.save_pretrained(a.hf_output_path, safe_serialization=True)
    AutoTokenizer.from_pretrained(a.base_model).save_pretrained(a.hf_output_path)
    print(f"wrote {len(weights)} tensors ({a.output_precision}) to {a.hf_output_path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
