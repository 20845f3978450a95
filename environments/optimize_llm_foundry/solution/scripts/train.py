"""Stage 2 (gpu profile): LLM Foundry training from a YAML file, launched by Composer.

    composer scripts/train.py finetune.yaml [dotted.key=value ...]

`composer` (the launcher from the mosaicml package, a dependency of llm-foundry) starts one process
per visible GPU; each runs llmfoundry.command_utils.train_from_yaml with the overrides, merged into
the YAML by OmegaConf. The checkpoint goes to save_folder (latest-rank0.pt).
"""

from __future__ import annotations

import sys


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    from llmfoundry.command_utils import train_from_yaml

    train_from_yaml(argv[0], argv[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
