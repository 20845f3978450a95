"""Stage 1 (smoke profile): tokenize prompt/response rows into a finetuning split.

    python3 -m minifoundry.data_prep --data_files ROWS.jsonl --splits train --out_root DIR \
        --tokenizer BASE_MODEL_DIR --max_seq_len N

Each row of the JSON-lines file has "prompt" and "response". Prompt and response are tokenized
separately (like LLM Foundry's finetuning converter); an example is prompt + response + <eos>,
cut to max_seq_len by shortening the response. Writes DIR/<split>/samples.json.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from .tokenizer import Tokenizer


def tokenize_rows(rows: list[dict], tok: Tokenizer, max_seq_len: int) -> list[dict]:
    samples = []
    for n, row in enumerate(rows):
        if "prompt" not in row or "response" not in row:
            raise ValueError(f"row {n} has no 'prompt' and 'response' keys: {sorted(row)}")
        prompt = tok.encode(row["prompt"])
        response = tok.encode(row["response"]) + [tok.eos_id]
        if len(prompt) >= max_seq_len:
            raise ValueError(f"row {n}: the prompt alone has {len(prompt)} tokens (max_seq_len {max_seq_len})")
        response = response[: max_seq_len - len(prompt)]
        samples.append({"prompt": prompt, "response": response})
    return samples


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data_files", required=True, help="comma-separated, one per split")
    ap.add_argument("--splits", default="train", help="comma-separated split names")
    ap.add_argument("--out_root", required=True)
    ap.add_argument("--tokenizer", required=True, help="folder holding tokenizer.json")
    ap.add_argument("--max_seq_len", type=int, default=256)
    a = ap.parse_args(argv)
    files, splits = a.data_files.split(","), a.splits.split(",")
    if len(files) != len(splits):
        ap.error("--data_files and --splits must have the same number of entries")
    tok = Tokenizer.from_dir(a.tokenizer)
    for split, file in zip(splits, files):
        out = Path(a.out_root) / split
        if out.exists():
            print(f"{out} already exists: remove it first", file=sys.stderr)
            return 1
        t0 = time.time()
        rows = [json.loads(line) for line in Path(file).read_text().splitlines() if line.strip()]
        samples = tokenize_rows(rows, tok, a.max_seq_len)
        out.mkdir(parents=True)
        (out / "samples.json").write_text(json.dumps({"max_seq_len": a.max_seq_len, "samples": samples}))
        n_tokens = sum(len(s["prompt"]) + len(s["response"]) for s in samples)
        print(f"{split}: {len(samples)} samples, {n_tokens} tokens, {time.time() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
