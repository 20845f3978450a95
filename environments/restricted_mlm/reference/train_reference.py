"""Train the reference model (reference/model.py) and write checkpoint.pt next to it.

Uses the starting solution's train.py for the training loop. Two layouts work:

  * a solution folder holding this file, the reference model.py (as model.py) and train.py:
        cp reference/model.py reference/train_reference.py solution/train.py HOME/solution/
        python HOME/solution/train_reference.py            # reads HOME/assets/train.bin
  * the repository: python environments/restricted_mlm/reference/train_reference.py --data PATH/train.bin

The plan below is pinned so the reference score is reproducible: "tiny" (the smoke profile's
size) trains in about 20-40 s on two CPU cores.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

HERE = Path(__file__).absolute().parent
sys.path.insert(0, str(HERE))
import model as M  # noqa: E402 - the reference model next to this file (imported first, so train.py sees it too)

if not (HERE / "train.py").is_file():
    sys.path.insert(1, str(HERE.parent / "solution"))
import torch  # noqa: E402
import train as T  # noqa: E402

PLANS = {
    "tiny": {"steps": 400, "batch_size": 8, "lr": 1e-2},
    "full": {"steps": 20_000, "batch_size": 256, "lr": 3e-3},
}
SEED = 0


def main() -> None:
    ap = argparse.ArgumentParser(description="Train the reference model.")
    ap.add_argument("--data", default=str(HERE.parent / "assets" / "train.bin"))
    ap.add_argument("--config", default="auto", choices=("auto", "tiny", "full"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seconds", type=float, default=None, help="stop early after this many seconds")
    args = ap.parse_args()
    data = Path(args.data)
    config = args.config
    if config == "auto":
        info = data.parent / "data_info.json"
        config = "tiny" if info.is_file() and json.loads(info.read_text()).get("profile") == "smoke" else "full"
    plan = PLANS[config]
    if config == "tiny":
        torch.set_num_threads(min(2, torch.get_num_threads()))  # two at most; fewer where the process was given fewer (OMP_NUM_THREADS)
    tokens = T.load_tokens(data)
    train_part, held_out = T.split(tokens)
    torch.manual_seed(SEED)
    net = M.build(config)
    T.init_output_bias(net, train_part)
    print(f"reference {config}: {sum(p.numel() for p in net.parameters()):,} parameters, {plan}", flush=True)
    summary = T.train(net, train_part, steps=plan["steps"], batch_size=plan["batch_size"], lr=plan["lr"],
                      device=args.device, seed=SEED, seconds=args.seconds, log_every=100)
    held = T.evaluate(net, held_out, 10, 32, args.device)
    M.save_checkpoint(net.cpu(), M.CHECKPOINT)
    print(f"held-out loss {held:.4f} (score about {math.log(held - 1.5):.3f}); {summary['steps']} steps in "
          f"{summary['seconds']} s; saved {M.CHECKPOINT}", flush=True)


if __name__ == "__main__":
    main()
