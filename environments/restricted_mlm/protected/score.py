"""Scorer for restricted_mlm: masked-token loss on held-out data, forward pass under the rule enforcer.

Run by the workstation as root inside the container (or by the local runtime) with REBENCH_HOME
(the participant's home), REBENCH_PROTECTED (where this file and assets/val.bin are) and
REBENCH_PROFILE (gpu or smoke). Prints one JSON line last on stdout:

    {"score": ln(loss - 1.5) or "NaN", "message": {...}, "details": {...}}

Steps
1. Read $REBENCH_PROTECTED/assets/val.bin (uint16 GPT-2 ids). In a container, then give up root
   for the owner of the home folder, so the participant's code cannot read /protected.
2. Import $REBENCH_HOME/solution/model.py and call get_trained_model() (any failure: NaN with
   `error`). The result must be a torch.nn.Module; it is moved to the device and put in eval mode.
3. Fixed validation batches (seed VAL_SEED): random 128-token windows of val.bin, 19 positions of
   each (15%) replaced by the mask id 50256. The forward pass of each batch runs under
   enforcer.Enforcer and torch.no_grad(); an operation outside the rules gives NaN with
   `disallowed_operation` naming it. The output must be a plain tensor of shape
   (batch, 128, 50257) with a float dtype.
4. Outside the enforcer: cross-entropy (float32) at the masked positions, summed over all
   batches and divided by the number of masked tokens. Score = ln(loss - 1.5), lower is better.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import sys
import time
import traceback

sys.path.insert(0, os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib"))
from rebench_scorer import result as _channel  # noqa: E402 - the result channel: what counts

os.environ.setdefault("TORCHDYNAMO_DISABLE", "1")  # compiled code would run kernels the enforcer never sees

PROFILES = {
    "gpu": {"batches": 50, "batch_size": 64, "device": "cuda"},
    "smoke": {"batches": 8, "batch_size": 8, "device": "cpu"},
}
VAL_SEED = 271_828
SEQ_LEN = 128
VOCAB_SIZE = 50257
MASK_ID = 50256
MASKED_PER_SEQ = round(0.15 * SEQ_LEN)  # 19
LOSS_FLOOR = 1.5

_RESULT_OUT = None  # the real stdout: everything else printed goes to stderr


def emit(score: float, message: dict, details: dict | None = None) -> None:
    sys.stderr.flush()
    _channel.emit(score, message, details or {})
    os._exit(0)  # nothing of the participant's (atexit hooks, threads) may print after the result


def fail(message: dict, details: dict, exc: BaseException | None = None) -> None:
    if exc is not None:
        details = {**details, "traceback": traceback.format_exc()[-4000:]}
    emit(math.nan, message, details)


def drop_privileges(home: str, details: dict) -> None:
    """In a container the scorer runs as root; the participant's code should not. Become the
    owner of the home folder (the participant), so /protected (root:protected 0750) is closed."""
    if os.environ.get("REBENCH_ISOLATED") != "1" or os.geteuid() != 0:
        return
    st = os.stat(home)
    if st.st_uid == 0:
        return
    try:
        os.setgroups([])
        os.setgid(st.st_gid)
        os.setuid(st.st_uid)
        os.environ["HOME"] = home
        details["ran_as_uid"] = st.st_uid
    except OSError as exc:
        details["privilege_drop_failed"] = str(exc)


def validation_batches(tokens, batches: int, batch_size: int):
    """Yields (ids, mask) numpy arrays; the same for every scoring (fixed seed)."""
    import numpy as np

    rng = np.random.default_rng(VAL_SEED)
    for _ in range(batches):
        starts = rng.integers(0, len(tokens) - SEQ_LEN, size=batch_size)
        ids = tokens[starts[:, None] + np.arange(SEQ_LEN)].astype(np.int64)
        order = np.argsort(rng.random((batch_size, SEQ_LEN)), axis=1)[:, :MASKED_PER_SEQ]
        mask = np.zeros((batch_size, SEQ_LEN), dtype=bool)
        np.put_along_axis(mask, order, True, axis=1)
        yield ids, mask


def load_participant_model(home: str):
    solution = os.path.join(home, "solution")
    path = os.path.join(solution, "model.py")
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist")
    os.chdir(solution)
    sys.path.insert(0, solution)
    spec = importlib.util.spec_from_file_location("model", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["model"] = module
    spec.loader.exec_module(module)
    if not hasattr(module, "get_trained_model"):
        raise AttributeError("model.py defines no get_trained_model()")
    return module.get_trained_model()


def main() -> None:
    global _RESULT_OUT
    _RESULT_OUT = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # the participant's prints (and ours) go to stderr; the result line to the real stdout

    profile = os.environ.get("REBENCH_PROFILE", "gpu")
    cfg = PROFILES.get(profile)
    if cfg is None:
        fail({"error": f"unknown profile {profile!r}"}, {})
    home = os.environ.get("REBENCH_HOME", "/home/agent")
    protected = os.environ.get("REBENCH_PROTECTED", "/protected")
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

    import numpy as np
    import torch
    import torch.nn.functional as F

    from enforcer import DisallowedOperation, Enforcer

    cross_entropy = F.cross_entropy  # taken before the participant's code is imported

    device = cfg["device"]
    details: dict = {"profile": profile, "device": device, "batches": cfg["batches"], "batch_size": cfg["batch_size"],
                     "val_seed": VAL_SEED, "torch": torch.__version__}
    if device == "cuda" and not torch.cuda.is_available():
        fail({"error": "the gpu profile needs a CUDA device and none is visible"}, details)
    val_path = os.path.join(protected, "assets", "val.bin")
    if not os.path.isfile(val_path):
        fail({"error": "the held-out data is missing: prepare the environment's assets "
                       "(rebench-tui prepare restricted_mlm)"}, {**details, "val_path": val_path})
    tokens = np.fromfile(val_path, dtype=np.uint16)
    if len(tokens) <= SEQ_LEN:
        fail({"error": f"{val_path} holds only {len(tokens)} tokens"}, details)
    details["val_tokens"] = int(len(tokens))

    # The enforcer's first use imports a few torch modules; do it before timing anything.
    with torch.no_grad(), Enforcer():
        torch.zeros(2) + 1

    drop_privileges(home, details)

    started = time.perf_counter()
    try:
        model = load_participant_model(home)
    except BaseException as exc:  # noqa: BLE001 - SystemExit and all: any failure is the participant's to see
        fail({"error": f"could not load the model: {type(exc).__name__}: {exc}"}, details, exc)
    details["load_seconds"] = round(time.perf_counter() - started, 3)
    if not isinstance(model, torch.nn.Module):
        fail({"error": f"get_trained_model() returned {type(model).__name__}, not a torch.nn.Module"}, details)
    try:
        model = model.to(device).eval()
    except Exception as exc:  # noqa: BLE001
        fail({"error": f"could not move the model to {device}: {type(exc).__name__}: {exc}"}, details, exc)
    details["parameters"] = int(sum(p.numel() for p in model.parameters()))
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()

    enforcer = Enforcer()
    total, count, forward_s = 0.0, 0, 0.0
    for i, (ids_np, mask_np) in enumerate(validation_batches(tokens, cfg["batches"], cfg["batch_size"])):
        ids = torch.from_numpy(ids_np).to(device)
        mask = torch.from_numpy(mask_np).to(device)
        inputs = ids.masked_fill(mask, MASK_ID)
        t0 = time.perf_counter()
        try:
            with torch.no_grad(), enforcer:
                out = model(inputs)
            if device == "cuda":
                torch.cuda.synchronize()
        except DisallowedOperation as exc:
            fail({"disallowed_operation": exc.operation},
                 {**details, "batch": i, "all_violations": enforcer.violations[:20]}, exc)
        except BaseException as exc:  # noqa: BLE001
            fail({"error": f"the forward pass raised {type(exc).__name__}: {exc}"}, {**details, "batch": i}, exc)
        forward_s += time.perf_counter() - t0
        expected = (cfg["batch_size"], SEQ_LEN, VOCAB_SIZE)
        if type(out) is not torch.Tensor:
            fail({"error": f"the forward pass returned {type(out).__name__}, not a plain torch.Tensor "
                           f"of shape {expected}"}, details)
        if tuple(out.shape) != expected:
            fail({"error": f"the forward pass returned shape {tuple(out.shape)}; "
                           f"expected (batch, 128, 50257) = {expected}"}, details)
        if out.dtype not in (torch.float16, torch.bfloat16, torch.float32, torch.float64):
            fail({"error": f"the logits have dtype {out.dtype}; expected a float dtype"}, details)
        logits = out.detach()[mask].float()
        if not bool(torch.isfinite(logits).all()):
            fail({"error": f"the logits at masked positions contain NaN or inf (batch {i})"}, details)
        total += float(cross_entropy(logits, ids[mask], reduction="sum"))
        count += int(mask.sum())
        del out, logits

    loss = total / count
    details.update({"masked_tokens": count, "forward_seconds": round(forward_s, 3), "aten_ops": enforcer.ops_seen,
                    "seconds": round(time.perf_counter() - started, 3)})
    if device == "cuda":
        details["peak_gpu_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
        details["gpu"] = torch.cuda.get_device_name()
    message = {"loss": round(loss, 5), "execution_time": round(forward_s, 3)}
    if not math.isfinite(loss) or loss <= LOSS_FLOOR:
        fail({**message, "error": f"loss {loss} is not above {LOSS_FLOOR}, so ln(loss - {LOSS_FLOOR}) "
                                  "is undefined"}, details)
    emit(math.log(loss - LOSS_FLOOR), message, details)


if __name__ == "__main__":
    main()
