"""Scorer for restricted_mlm: masked-token loss on held-out data of a model the scorer runs itself.

Run by the workstation as root inside the container (or by the local runtime) with REBENCH_HOME
(the participant's home), REBENCH_PROTECTED (where this file and assets/ are) and
REBENCH_PROFILE (gpu or smoke). The result goes out through rebench_scorer.result (the result
channel; also one JSON line on stdout): score ln(loss - 1.5) or NaN, message, details.

The participant's code never runs in this process, and never sees held-out data:

1. Read $REBENCH_PROTECTED/assets/secret.json (the validation seed, drawn at prepare time) and
   assets/val.bin (uint16 GPT-2 ids); build the batches: random 128-token windows of val.bin, 19
   positions of each (15%) replaced by the mask id 50256.
2. Start worker.py as the participant, in a process of its own (rebench_scorer.participant). It
   imports ~/solution/model.py, calls get_trained_model(), captures the forward pass on a
   (batch, 128) int64 input with torch.export and hands back a graph of ATen operators plus the
   weights as plain data (JSON and raw bytes in a memfd). It is sent only the input's shape:
   no held-out ids, masked or not. An import error, an exception, a model torch.export cannot
   capture, or a process that ends without answering gives NaN with `error`.
3. Check the graph (graph.py): every operator against the allow-list (enforcer.py) before
   anything runs, then run it HERE, on this process's device, under a dispatch-level checker that
   sees every ATen operator that actually executes. An operator outside the rules gives NaN with
   `disallowed_operation` naming it (and the line of model.py it came from).
4. The output must be a plain tensor of shape (batch, 128, 50257) with a float dtype, finite at
   the masked positions. Cross-entropy (float32) at the masked positions, summed over all
   batches and divided by the number of masked tokens. Score = ln(loss - 1.5), lower is better.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib"))
from rebench_scorer import participant, result  # noqa: E402 - first: it takes the result channel

import json  # noqa: E402
import math  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

PROFILES = {
    "gpu": {"batches": 2000, "batch_size": 8, "device": "cuda", "export_s": 420, "max_bytes": 24 << 30},
    "smoke": {"batches": 8, "batch_size": 8, "device": "cpu", "export_s": 80, "max_bytes": 1 << 30},
}
SEQ_LEN = 128
VOCAB_SIZE = 50257
MASK_ID = 50256
MASKED_PER_SEQ = round(0.15 * SEQ_LEN)  # 19
LOSS_FLOOR = 1.5
STAGES = {"import": "could not import model.py", "load": "get_trained_model() failed",
          "export": "torch.export could not capture the forward pass (see the instructions: no data-dependent "
                    "Python control flow, no reading tensor values)",
          "serialize": "the captured forward pass could not be handed to the scorer"}


class Stop(Exception):
    def __init__(self, message: dict) -> None:
        super().__init__(json.dumps(message))
        self.message = message


def validation_batches(tokens, batches: int, batch_size: int, seed: int):
    """(masked ids, mask) numpy pairs; the same at every scoring (the seed is prepare's secret)."""
    import numpy as np

    rng = np.random.default_rng(seed)
    out = []
    for _ in range(batches):
        starts = rng.integers(0, len(tokens) - SEQ_LEN, size=batch_size)
        ids = tokens[starts[:, None] + np.arange(SEQ_LEN)].astype(np.int64)
        order = np.argsort(rng.random((batch_size, SEQ_LEN)), axis=1)[:, :MASKED_PER_SEQ]
        mask = np.zeros((batch_size, SEQ_LEN), dtype=bool)
        np.put_along_axis(mask, order, True, axis=1)
        out.append((ids, mask))
    return out


def read_secret(protected: str) -> int:
    path = os.path.join(protected, "assets", "secret.json")
    try:
        with open(path, encoding="utf-8") as fh:
            seed = json.load(fh)["val_seed"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise Stop({"error": "the held-out assets are missing or out of date (no validation seed): prepare the "
                             "environment again (rebench-tui prepare restricted_mlm --force)"}) from exc
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise Stop({"error": f"{path} holds no usable validation seed"})
    return seed


def receive_graph(worker, deadline: float, details: dict):
    """The worker's answer: (header, fds). Its process ending, or silence, is an answer too."""
    from rebench_scorer.channel import ChannelError

    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            raise Stop({"error": f"the model was not loaded and captured within {details['export_limit_s']} s"})
        try:
            return worker.channel.recv(timeout=min(left, 1.0))
        except ChannelError as exc:
            if worker.alive() and "in time" in str(exc):
                continue
            code = worker.wait(2)
            if code is None:
                raise Stop({"error": f"the model's process broke off the exchange with the scorer ({exc})"}) from None
            raise Stop({"error": f"the model's process ended (exit status {code}) without handing in its graph"}) from None


def score(cfg: dict, profile: str, details: dict) -> tuple[float, dict]:
    import numpy as np
    import torch
    import torch.nn.functional as F

    from graph import Graph, Invalid

    device = cfg["device"]
    details.update({"profile": profile, "device": device, "batches": cfg["batches"], "batch_size": cfg["batch_size"],
                    "torch": torch.__version__})
    if device == "cuda" and not torch.cuda.is_available():
        raise Stop({"error": "the gpu profile needs a CUDA device and none is visible"})
    protected = os.environ.get("REBENCH_PROTECTED", "/protected")
    seed = read_secret(protected)
    val_path = os.path.join(protected, "assets", "val.bin")
    if not os.path.isfile(val_path):
        raise Stop({"error": "the held-out data is missing: prepare the environment's assets "
                             "(rebench-tui prepare restricted_mlm)"})
    tokens = np.fromfile(val_path, dtype=np.uint16)
    if len(tokens) <= SEQ_LEN:
        raise Stop({"error": f"{val_path} holds only {len(tokens)} tokens"})
    details["val_tokens"] = int(len(tokens))
    batches = []
    for ids, mask in validation_batches(tokens, cfg["batches"], cfg["batch_size"], seed):
        inputs = np.where(mask, MASK_ID, ids)  # a fresh array per batch: the graph's input shares no memory
        batches.append((torch.from_numpy(inputs), torch.from_numpy(mask), torch.from_numpy(ids[mask])))
    del tokens

    # The participant's process: it gets the input's shape, never the ids.
    lib = os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib")
    with open(os.path.join(HERE, "worker.py"), encoding="utf-8") as fh:
        code = fh.read()
    home = participant.account().home
    solution = os.path.join(home, "solution")
    started = time.monotonic()
    worker = participant.start([sys.executable, "-c", code], cwd=solution if os.path.isdir(solution) else home,
                               env={"REBENCH_SCORER_LIB": lib})
    details["_worker"] = worker
    details["export_limit_s"] = cfg["export_s"]
    fds: list[int] = []
    try:
        from rebench_scorer.channel import ChannelError

        try:
            worker.channel.send({"op": "export", "batch_size": cfg["batch_size"], "seq_len": SEQ_LEN,
                                 "vocab_size": VOCAB_SIZE, "mask_id": MASK_ID})
        except ChannelError:
            pass  # it ended already: receive_graph says so
        header, fds = receive_graph(worker, started + cfg["export_s"], details)
        worker.kill()  # done with it before anything it sent is read
        details["export_seconds"] = round(time.monotonic() - started, 3)
        if isinstance(header.get("error"), str):
            stage = header.get("stage") if header.get("stage") in STAGES else "load"
            tb = header.get("traceback")
            if isinstance(tb, str):
                details["participant_traceback"] = tb[-4000:]
            raise Stop({"error": f"{STAGES[stage]}: {header['error'][:2000]}"})
        if header.get("ok") is not True:
            raise Stop({"error": "the model's process answered something other than a graph"})
        try:
            graph = Graph(header, fds, device=device, max_bytes=cfg["max_bytes"])
        except Invalid as exc:
            raise Stop(exc.message) from None
    finally:
        for fd in fds:
            os.close(fd)
    details.update({"graph_nodes": len(graph.nodes), "weight_bytes": graph.weight_bytes,
                    "parameters": int(sum(t.numel() for t in graph.base if isinstance(t, torch.Tensor)))})

    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    expected = (cfg["batch_size"], SEQ_LEN, VOCAB_SIZE)
    total, count, forward_s = 0.0, 0, 0.0
    for i, (inputs, mask, labels) in enumerate(batches):
        inputs, mask, labels = inputs.to(device), mask.to(device), labels.to(device)
        t0 = time.perf_counter()
        try:
            out = graph.run(inputs)
        except Invalid as exc:
            details["batch"] = i
            raise Stop(exc.message) from None
        if device == "cuda":
            torch.cuda.synchronize()
        forward_s += time.perf_counter() - t0
        if type(out) is not torch.Tensor:
            raise Stop({"error": f"the forward pass returned {type(out).__name__}, not a plain torch.Tensor of shape "
                                 f"{expected}"})
        if tuple(out.shape) != expected:
            raise Stop({"error": f"the forward pass returned shape {tuple(out.shape)}; expected (batch, 128, 50257) = "
                                 f"{expected}"})
        if out.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            raise Stop({"error": f"the logits have dtype {out.dtype}; expected a float dtype"})
        logits = out[mask].float()
        if not bool(torch.isfinite(logits).all()):
            raise Stop({"error": f"the logits at masked positions contain NaN or inf (batch {i})"})
        total += float(F.cross_entropy(logits, labels, reduction="sum"))
        count += int(labels.numel())
        del out, logits

    loss = total / count
    details.update({"masked_tokens": count, "forward_seconds": round(forward_s, 3), "aten_ops": graph.ops_seen})
    if device == "cuda":
        details["peak_gpu_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
        details["gpu"] = torch.cuda.get_device_name()
    message = {"loss": round(loss, 5), "execution_time": round(forward_s, 3)}
    if not math.isfinite(loss) or loss <= LOSS_FLOOR:
        return math.nan, {**message, "error": f"loss {loss} is not above {LOSS_FLOOR}, so ln(loss - {LOSS_FLOOR}) "
                                              "is undefined"}
    return math.log(loss - LOSS_FLOOR), message


def main() -> None:
    started = time.monotonic()
    profile = os.environ.get("REBENCH_PROFILE", "gpu")
    details: dict = {}
    cfg = PROFILES.get(profile)
    try:
        if cfg is None:
            raise Stop({"error": f"unknown profile {profile!r}"})
        value, message = score(cfg, profile, details)
    except Stop as exc:
        value, message = math.nan, exc.message
    except Exception as exc:  # noqa: BLE001 - a scorer failure is NaN with its reason, never a crash without a result
        value, message = math.nan, {"error": f"the scorer failed: {type(exc).__name__}: {exc}"[:2000]}
        details["traceback"] = traceback.format_exc()[-4000:]
    worker = details.pop("_worker", None)
    if worker is not None:
        worker.kill()
        details.update(worker.report())
    details.pop("export_limit_s", None)
    details["seconds"] = round(time.monotonic() - started, 3)
    result.emit(value, message, details)


if __name__ == "__main__":
    main()
