"""fix_embedding's checkpoint loader: runs as the participant, never in the scorer's process.

score.py (root) reads this file and runs it with ``python3 -I -c <text>`` through
rebench_scorer.participant: uid 1000, no supplementary groups (no /protected), its own session,
a clean environment, only the control socket inherited. It is what unpickles the participant's
file (``torch.load(weights_only=True)``, the restricted unpickler), so even a file that got past
that could only act as the participant, in a process the scorer kills afterwards.

Protocol (JSON over rebench_scorer.channel, no pickle either way):
  scorer -> loader: {"op": "load", "path": str, "max_bytes": int, "total_bytes": int,
                     "tensors": [{"name": str, "shape": [int...], "offset": int}, ...]}
                    with one descriptor: a memfd of total_bytes, laid out by the scorer.
  loader -> scorer: {"ok": true} once every expected tensor is in the memfd as float32 at its
                    offset, or {"ok": false, "error": str, ...} (missing / unexpected /
                    wrong_shapes lists for a checkpoint of another shape).
The scorer trusts none of it: it reads the values back itself and checks them.
"""

import os
import stat
import sys

sys.path.insert(0, os.environ["REBENCH_SCORER_LIB"])
from rebench_scorer.channel import Channel  # noqa: E402

FLOATS = ("float16", "bfloat16", "float32", "float64")


def first_line(exc: BaseException) -> str:
    """The telling line of an exception: for the restricted unpickler's refusal, the one that names
    what it refused (torch puts it below a paragraph of advice)."""
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    named = [line for line in lines if "unsupported global" in line.lower()]
    if named:
        return named[0][:300]
    for i, line in enumerate(lines):  # some versions end the line at "WeightsUnpickler error:"
        if "WeightsUnpickler error" in line:
            return " ".join(lines[i:i + 2])[:300]
    return (lines or [""])[0][:300]


def write_all(fd: int, data: memoryview, offset: int) -> None:
    done = 0
    while done < len(data):
        done += os.pwrite(fd, data[done:], offset + done)


def load(msg: dict, fd: int) -> dict:
    path = msg["path"]
    name = os.path.basename(path)
    try:
        st = os.lstat(path)
    except OSError as exc:
        return {"ok": False, "error": f"could not open {name}: {exc.strerror}"}
    if not stat.S_ISREG(st.st_mode):
        return {"ok": False, "error": f"{name} is not a regular file"}
    if st.st_size > msg["max_bytes"]:
        return {"ok": False, "error": f"{name} has {st.st_size} bytes, more than the {msg['max_bytes']} allowed"}
    import torch

    try:
        try:
            ckpt = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
        except RuntimeError as exc:
            if "mmap" not in str(exc):
                raise
            ckpt = torch.load(path, map_location="cpu", weights_only=True)  # an old (non-zip) file
    except Exception as exc:  # noqa: BLE001 - whatever it is, the participant should see why
        return {"ok": False, "error": f"could not load {name} with torch.load(weights_only=True): "
                                      f"{type(exc).__name__}: {first_line(exc)}"}
    state = ckpt.get("state_dict", ckpt) if isinstance(ckpt, dict) else None
    if not isinstance(state, dict) or not all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in state.items()):
        return {"ok": False, "error": f"{name} is not a state dict (save {{'config': ..., 'state_dict': model.state_dict()}})"}
    expected = {t["name"]: tuple(t["shape"]) for t in msg["tensors"]}
    missing = sorted(set(expected) - set(state))
    extra = sorted(set(state) - set(expected))
    wrong = sorted(k for k in set(expected) & set(state) if tuple(state[k].shape) != expected[k])
    if missing or extra or wrong:
        shapes = [f"{k}: {tuple(state[k].shape)} (expected {expected[k]})" for k in wrong[:5]]
        return {"ok": False, "error": "the checkpoint does not fit the fixed architecture",
                "missing": missing[:10], "unexpected": extra[:10], "wrong_shapes": shapes}
    for t in msg["tensors"]:
        value = state[t["name"]]
        dtype = str(value.dtype).removeprefix("torch.")
        if dtype not in FLOATS or value.layout != torch.strided or value.is_quantized:
            return {"ok": False, "error": f"{t['name']} is a {dtype} {value.layout} tensor; save floating-point weights "
                                          f"({', '.join(FLOATS)})"}
        flat = value.detach().to(device="cpu", dtype=torch.float32).contiguous().view(-1)
        write_all(fd, memoryview(flat.numpy()).cast("B"), t["offset"])
    return {"ok": True}


def main() -> None:
    ch = Channel.from_env()
    msg, fds = ch.recv(timeout=60)
    if msg.get("op") != "load" or len(fds) != 1:
        ch.send({"ok": False, "error": "loader: unexpected request"})
        return
    try:
        reply = load(msg, fds[0])
    except Exception as exc:  # noqa: BLE001
        reply = {"ok": False, "error": f"loading failed: {type(exc).__name__}: {first_line(exc)}"}
    ch.send(reply)


main()
