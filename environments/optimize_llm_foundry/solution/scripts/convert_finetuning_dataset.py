"""Stage 1 (gpu profile): tokenize prompt/response rows into MDS shards with the llm-foundry package.

    python3 scripts/convert_finetuning_dataset.py --data_files ROWS.jsonl --splits train \
        --out_root finetuning_tokens --tokenizer BASE_MODEL_DIR --max_seq_len 4096

A thin command line over llmfoundry.command_utils.convert_finetuning_dataset_from_args (llm-foundry
0.22.0 from PyPI; the repository's scripts/ folder is not part of the package). The rows are
already {"prompt", "response"}, so no preprocessing function is applied. Only the response is a
training target (target_prompts=none, target_responses=last).
"""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data_files", required=True, help="comma-separated, one JSON-lines file per split")
    ap.add_argument("--splits", default="train", help="comma-separated split names")
    ap.add_argument("--out_root", required=True)
    ap.add_argument("--tokenizer", required=True, help="a Hugging Face tokenizer folder or hub name")
    ap.add_argument("--max_seq_len", type=int, default=4096)
    ap.add_argument("--num_workers", type=int, default=None)
    ap.add_argument("--compression", default=None)
    a = ap.parse_args(argv)

    try:  # shared memory left behind by an earlier, killed run would block the streaming writer
        from streaming.base.util import clean_stale_shared_memory

        clean_stale_shared_memory()
    except Exception as exc:  # noqa: BLE001 - nothing stale is the usual case
        print(f"(clean_stale_shared_memory: {exc})", file=sys.stderr)

    from llmfoundry.command_utils import convert_finetuning_dataset_from_args

    convert_finetuning_dataset_from_args(
        dataset="json",
        data_subset=None,
        splits=a.splits.split(","),
        preprocessor=None,
        data_files=a.data_files.split(","),
        skip_preprocessing=True,
        out_root=a.out_root,
        local=None,
        compression=a.compression,
        num_workers=a.num_workers,
        tokenizer=a.tokenizer,
        tokenizer_kwargs=None,
        max_seq_len=a.max_seq_len,
        target_prompts="none",
        target_responses="last",
        encoder_decoder=False,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
