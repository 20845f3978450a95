"""Scorer for fix_embedding: the validation loss of the fixed model.

Scores /home/agent/fixed_model.pth (or, before one exists, the corrupted large model: the
starting score) in the fixed architecture of /protected/assets/config.json, built from the model
code of the pristine starting solution. Evaluates a fixed number of batches of the training and
of the held-out validation tokens, at positions drawn from the evaluation seed that prepare.py
drew and kept in /protected/assets/secret.json, and emits
{"score": ln(loss_validation - 1.5), "message": {"loss_train", "loss_validation", ...}} through
the result channel (rebench_scorer.result).

The participant's file is never unpickled here: loader.py does that (torch.load with
weights_only=True) in a process of its own running as the participant, and writes the expected
tensors as float32 into a memfd this process laid out. This process only checks the file's kind
and size first (a symbolic link, anything but a regular file, or a file larger than
MAX_BYTES_FACTOR x the float32 weights + MAX_BYTES_SLACK is refused without being opened), then
reads the values back itself and refuses any that are not finite. A checkpoint of any other
shape is refused with the mismatching tensors named.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib"))
from rebench_scorer import result  # noqa: E402  (first: takes the result channel out of reach)

import fcntl  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import stat  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from pathlib import Path  # noqa: E402

from rebench_scorer import participant, room  # noqa: E402
from rebench_scorer.channel import ChannelError  # noqa: E402

HOME = Path(os.environ.get("REBENCH_HOME", "/home/agent"))
PROTECTED = Path(os.environ.get("REBENCH_PROTECTED", "/protected"))
PROFILE = os.environ.get("REBENCH_PROFILE", "gpu")
HERE = Path(__file__).resolve().parent
# batches x rows x tokens per split; load_s: how long the loader may take
EVAL = {"gpu": {"batches": 40, "rows": 2, "tokens": 1024, "load_s": 200},
        "smoke": {"batches": 32, "rows": 8, "tokens": 64, "load_s": 60}}
FLOOR = 1.5
MAX_BYTES_FACTOR = 4  # the file may hold up to 4 x the float32 weights (float64 copies, extra entries) ...
MAX_BYTES_SLACK = 64 << 20  # ... plus 64 MiB
ALIGN = 64


class Refused(Exception):
    """The submission cannot be scored: NaN with this message (shown to the participant)."""

    def __init__(self, message: dict) -> None:
        super().__init__(str(message))
        self.message = message


class SetupError(Exception):
    """The assets are missing or stale: not the participant's fault."""


def _text(value, limit: int = 500) -> str:
    return value[:limit] if isinstance(value, str) else ""


def _texts(value, items: int = 10, limit: int = 200) -> list[str]:
    return [v[:limit] for v in value[:items] if isinstance(v, str)] if isinstance(value, list) else []


def read_secret() -> dict:
    path = PROTECTED / "assets" / "secret.json"
    try:
        secret = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise SetupError(f"{path}: {exc} (assets prepared before secret.json existed? prepare them again with --force)") from None
    seed = secret.get("eval_seed") if isinstance(secret, dict) else None
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise SetupError(f"{path} has no eval_seed")
    return secret


def submission() -> tuple[Path, str | None]:
    """The file to score, and a note when it is the corrupted model (no fixed_model.pth yet)."""
    fixed = HOME / "fixed_model.pth"
    try:
        os.lstat(fixed)
    except FileNotFoundError:
        return HOME / "assets" / "large_model.pth", "no /home/agent/fixed_model.pth yet: scored the corrupted model"
    return fixed, None


def check_file(path: Path, max_bytes: int) -> int:
    """The file's size, after refusing anything but a regular file of at most max_bytes (never opened here)."""
    try:
        st = os.lstat(path)
    except OSError as exc:
        raise Refused({"error": f"could not load {path.name}: {exc.strerror}"}) from None
    if stat.S_ISLNK(st.st_mode):
        raise Refused({"error": f"{path.name} is a symbolic link: save the checkpoint itself at {path}"})
    if not stat.S_ISREG(st.st_mode):
        raise Refused({"error": f"{path.name} is not a regular file"})
    if st.st_size > max_bytes:
        raise Refused({"error": f"{path.name} has {st.st_size} bytes, more than the {max_bytes} a checkpoint of this "
                                f"architecture needs ({MAX_BYTES_FACTOR} x its float32 weights + {MAX_BYTES_SLACK >> 20} MiB)"})
    return st.st_size


def layout(model) -> tuple[list[dict], int]:
    tensors, offset = [], 0
    for name, value in model.state_dict().items():
        tensors.append({"name": name, "shape": list(value.shape), "offset": offset})
        offset += -(-value.numel() * 4 // ALIGN) * ALIGN
    return tensors, offset


def sealed_memfd(nbytes: int) -> int:
    """A memfd of exactly nbytes that nobody can shrink or grow (so reading it cannot fault)."""
    fd = os.memfd_create("fix_embedding_weights", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    os.ftruncate(fd, max(nbytes, 1))
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_SEAL)
    return fd


def load_weights(path: Path, model, ev: dict, details: dict) -> None:
    """Has loader.py (as the participant) put the checkpoint's tensors into a memfd; copies them
    into ``model`` (this process's own memory) and checks them."""
    import torch

    tensors, total = layout(model)
    max_bytes = MAX_BYTES_FACTOR * total + MAX_BYTES_SLACK
    details["file_bytes"] = check_file(path, max_bytes)
    fd = sealed_memfd(total)
    code = (HERE / "loader.py").read_text(encoding="utf-8")
    lib = os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib")
    # the scorer's own loader, run as the participant: isolated, outside the home, no bytecode cache
    worker = participant.start(room.python_argv(code), env={"REBENCH_SCORER_LIB": lib}, trusted=True)
    try:
        try:
            worker.channel.send({"op": "load", "path": str(path), "max_bytes": max_bytes, "total_bytes": total,
                                 "tensors": tensors}, [fd])
            reply, extra = worker.channel.recv(timeout=ev["load_s"])
            for other in extra:
                os.close(other)
        except ChannelError as exc:
            raise Refused({"error": f"loading {path.name} failed: {exc}"}) from None
    finally:
        worker.wait(5)  # the loader ends by itself once it has answered
        worker.kill()  # before reading anything back: nothing of the loader runs on while we do
        details["loader"] = worker.report()
    if reply.get("ok") is not True:
        message = {"error": _text(reply.get("error")) or f"could not load {path.name}"}
        for key in ("missing", "unexpected", "wrong_shapes"):
            if key in reply:
                message[key] = _texts(reply[key])
        raise Refused(message)
    params = dict(model.named_parameters())
    with torch.no_grad():
        for t in tensors:
            target = params[t["name"]].detach()
            view = memoryview(target.numpy()).cast("B")
            done = 0
            while done < len(view):
                got = os.preadv(fd, [view[done:]], t["offset"] + done)
                if got <= 0:
                    raise Refused({"error": "the loader left the weights incomplete"})
                done += got
            if not bool(torch.isfinite(target).all()):
                raise Refused({"error": f"{t['name']} holds non-finite values (NaN or infinity)"})
    os.close(fd)


def open_tokens(path: Path):
    import numpy as np

    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode):
            raise SetupError(f"{path} is not a regular file")
        return np.memmap(fh, dtype=np.uint16, mode="r")


def evaluate(model, secret: dict, ev: dict, device: str, details: dict) -> dict:
    import torch

    sys.path.insert(0, str(PROTECTED / "starting_solution"))
    from data import batch

    losses = {}
    t1 = time.time()
    with torch.no_grad():
        for i, (split, file) in enumerate((("train", HOME / "assets" / "train.bin"), ("validation", PROTECTED / "assets" / "val.bin"))):
            tokens = open_tokens(file)
            gen = torch.Generator().manual_seed(secret["eval_seed"] + i)
            total = 0.0
            for _ in range(ev["batches"]):
                x, y = batch(tokens, ev["rows"], ev["tokens"], gen, device)
                with torch.autocast(device_type=device, dtype=torch.bfloat16, enabled=device == "cuda"):
                    total += model.loss(x, y).item()
            losses[split] = total / ev["batches"]
    details["eval_s"] = round(time.time() - t1, 2)
    return losses


def score(details: dict) -> tuple[float, dict]:
    import torch

    sys.path.insert(0, str(PROTECTED / "starting_solution"))
    from model import GPT, GPTConfig

    ev = EVAL[PROFILE]
    secret = read_secret()
    cfg = GPTConfig(**json.loads((PROTECTED / "assets" / "config.json").read_text()))
    details.update(profile=PROFILE, eval={k: v for k, v in ev.items() if k != "load_s"}, config=cfg.__dict__)
    path, note = submission()
    details["scored_file"] = str(path)
    t0 = time.time()
    with torch.device("meta"):
        model = GPT(cfg)
    model = model.to_empty(device="cpu")
    load_weights(path, model, ev, details)
    device = "cuda" if PROFILE == "gpu" and torch.cuda.is_available() else "cpu"
    model = model.to(device).eval()
    details["load_s"] = round(time.time() - t0, 2)
    losses = evaluate(model, secret, ev, device, details)
    if device == "cuda":
        details["peak_gpu_memory_gb"] = round(torch.cuda.max_memory_allocated() / 1e9, 2)
    message = {"loss_train": round(losses["train"], 5), "loss_validation": round(losses["validation"], 5)}
    if note:
        message["note"] = note
    val = losses["validation"]
    if not math.isfinite(val) or val <= FLOOR:
        raise Refused({**message, "error": f"validation loss {val} is not above {FLOOR}"})
    return math.log(val - FLOOR), message


def main() -> int:
    details: dict = {}
    if PROFILE not in EVAL:
        result.emit(math.nan, {"error": f"unknown profile {PROFILE!r}"})
        return 0
    try:
        value, message = score(details)
    except Refused as exc:
        value, message = math.nan, exc.message
    except SetupError as exc:
        value, message = math.nan, {"error": "the scorer could not read its assets; tell the organisers"}
        details["setup_error"] = str(exc)
    except Exception as exc:  # noqa: BLE001 - a fault of the scorer's own: say so
        value, message = math.nan, {"error": f"scoring failed: {type(exc).__name__}: {exc}"}
        details["traceback"] = traceback.format_exc()[-4000:]
    result.emit(value, message, details)
    return 0


if __name__ == "__main__":
    sys.exit(main())
