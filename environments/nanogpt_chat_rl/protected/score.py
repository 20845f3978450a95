"""Scorer for nanogpt_chat_rl: the finetuned model's answers to held-out messages, judged against
two baselines' answers by the judge LLM.

Run by the workstation as root inside the container (or by the local runtime) with REBENCH_HOME,
REBENCH_PROTECTED and REBENCH_PROFILE (gpu or smoke). The result goes out through
rebench_scorer.result (the supervisor's result channel; the line is also printed on stdout):

    {"score": mean win rate or "NaN", "message": {"win_vs_base": ..., "win_vs_alpaca": ...}, "details": {...}}

(one win_vs_<name> per baseline prepare.py made: base and alpaca in the gpu profile, base and sft
in the smoke profile and in the gpu profile's random-weight stand-in)

No code of the participant's runs here: only their weights are read.

Steps
1. Read $REBENCH_PROTECTED/assets/heldout.json (prompts, each baseline's answers, the judge's
   order seed, all drawn when the assets were prepared) and the scorer's copy of the tokenizer.
2. Read $REBENCH_HOME/finetuned_model/model.pt with the participant's own permissions (a link to
   a file they may not read stays unreadable), a regular file of at most MAX_BYTES (about twice
   the base model in float32), then torch.load(weights_only=True) from those bytes into the
   pristine copy of solution/model.py ($REBENCH_PROTECTED/starting_solution): exactly the base
   model's configuration, parameter names and shapes, floating-point and finite. Anything else:
   NaN with `error` saying which.
3. Answers: chat.answer() of the pristine copy (the chat prompt, 60 new tokens, greedy), with
   torch's seed fixed, batched.
4. For each baseline and message: an answer equal to the baseline's counts 1/2 without asking;
   otherwise the judge (solution/judge.py's messages and parsing) sees both in an order drawn
   from the prepared order seed; a win counts 1, a loss 0. A verdict that names neither reply is
   asked again (judge.UNREADABLE_RETRIES times) and, still unreadable, counts as a loss: an answer
   that derails the judge earns nothing. The message carries `unreadable_verdicts` (pairs counted
   as losses that way). win_vs_<baseline> = the mean over messages. The judge is reached through a private instance
   of protected/judge_proxy.py started in this process on a port the kernel picks, answering
   only this scorer (in the smoke profile with a private stand-in judge behind it), never
   through the service port, which anyone on the machine could have taken.
5. Score = the mean of the win rates over baselines (higher is better). If the judge cannot be
   reached after its retries: NaN with `error` (not the participant's fault; score again).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib"))
from rebench_scorer import result  # noqa: E402  (first: it takes the result channel out of reach)
from rebench_scorer import participant  # noqa: E402

import contextlib  # noqa: E402
import importlib.util  # noqa: E402
import io  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import stat  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import zipfile  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROFILES = {
    "gpu": {"device": "cuda", "batch_size": 64, "judge_workers": 8, "proxy": ["--scorer-rate", "20", "--scorer-burst", "40"]},
    "smoke": {"device": "cpu", "batch_size": 64, "judge_workers": 4, "proxy": ["--scorer-rate", "1000", "--scorer-burst", "1000"]},
}
GEN_SEED = 0
MODEL_DIR = "finetuned_model"
SIZE_FACTOR, SIZE_SLACK = 2.2, 16 << 20  # model.pt may hold up to ~2x the float32 weights (float64 fits)
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


class Invalid(Exception):
    """The attempt is invalid: NaN with this message (and the details so far)."""

    def __init__(self, error: str, with_traceback: bool = False) -> None:
        super().__init__(error)
        self.error = error
        self.trace = traceback.format_exc()[-3000:] if with_traceback else None


def load_module(name: str, path: str):
    """One of the scorer's own files (root-owned): never the participant's."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# -- the participant's weights --------------------------------------------------------------
@contextlib.contextmanager
def as_participant(who):
    """File access with the participant's permissions (effective ids, no supplementary groups)."""
    if who is None or os.geteuid() != 0 or who.uid == 0:
        yield
        return
    groups, egid = os.getgroups(), os.getegid()
    os.setgroups([])
    os.setegid(who.gid)
    os.seteuid(who.uid)
    try:
        yield
    finally:
        os.seteuid(0)
        os.setegid(egid)
        os.setgroups(groups)


def read_weights(path: str, who, cap: int) -> bytes:
    """model.pt's bytes: opened as the participant, a regular file, at most ``cap`` bytes."""
    hint = (f"save your finetuned model there with solution/model.py's save_model(model, '{os.path.dirname(path)}') "
            f"(to score the base model: cp -r ~/assets/base_model {os.path.dirname(path)})")
    try:
        with as_participant(who):
            fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise Invalid(f"no model at {path}: {hint}") from None
    except PermissionError:
        raise Invalid(f"{path} cannot be read with your permissions (is it a link to a file you may not read?)") from None
    except OSError as exc:
        raise Invalid(f"{path} cannot be opened: {exc.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise Invalid(f"{path} is not a regular file")
        if st.st_size > cap:
            raise Invalid(f"{path} has {st.st_size} bytes; a model of the base model's shape takes at most {cap}")
        chunks, total = [], 0
        while total <= cap:
            chunk = os.read(fd, min(1 << 24, cap + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > cap:
            raise Invalid(f"{path} grew past {cap} bytes while it was read")
        return b"".join(chunks)
    finally:
        os.close(fd)


def check_archive(data: bytes, cap: int, path: str) -> None:
    """torch.save's zip: stored entries only, and no more inside than the cap (no zip bomb)."""
    if not data.startswith(b"PK"):
        return  # the legacy format: torch.load reads what the file holds, nothing more
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, ValueError, OSError) as exc:
        raise Invalid(f"{path} is not a readable checkpoint: {exc}") from None
    if any(i.compress_type != zipfile.ZIP_STORED for i in infos) or sum(i.file_size for i in infos) > cap:
        raise Invalid(f"{path} is not a checkpoint written by torch.save (compressed or oversized entries)")


def load_participant_model(path: str, who, base_cfg: dict, model_mod, device: str):
    import torch

    model = model_mod.GPT(model_mod.GPTConfig(**base_cfg))
    expected = model.state_dict()
    cap = int(SIZE_FACTOR * sum(v.numel() * 4 for v in expected.values())) + SIZE_SLACK
    data = read_weights(path, who, cap)
    check_archive(data, cap, path)
    try:
        ckpt = torch.load(io.BytesIO(data), map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001 - an unpickler refusal, a broken file: all the participant's
        raise Invalid(f"{path} is not a readable checkpoint: {type(exc).__name__}: {str(exc)[:300]}") from None
    del data
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("config"), dict) or not isinstance(ckpt.get("state_dict"), dict):
        raise Invalid(f"{path} must hold {{'config': {{...}}, 'state_dict': {{...}}}} (use save_model)")
    cfg = ckpt["config"]
    if set(cfg) != set(base_cfg) or any(type(cfg[k]) is not type(base_cfg[k]) or cfg[k] != base_cfg[k] for k in base_cfg):
        raise Invalid(f"{path} has configuration {str(cfg)[:300]}; it must be the base model's {base_cfg}")
    state = ckpt["state_dict"]
    missing = sorted(set(expected) - set(state), key=str)
    unexpected = sorted(set(state) - set(expected), key=str)
    if missing or unexpected:
        raise Invalid(f"{path}: the weights do not fit the base model: missing {missing[:5]}, unexpected "
                      f"{[str(k)[:80] for k in unexpected[:5]]}")
    clean = {}
    for name, want in expected.items():
        v = state[name]
        if (not isinstance(v, torch.Tensor) or v.layout != torch.strided or v.is_quantized
                or str(v.dtype).removeprefix("torch.") not in FLOAT_DTYPES):
            raise Invalid(f"{path}: {name} must be a dense floating-point tensor")
        if tuple(v.shape) != tuple(want.shape):
            raise Invalid(f"{path}: the weights do not fit the base model's shapes: {name} is {tuple(v.shape)}, "
                          f"the base model's {tuple(want.shape)}")
        v = v.detach().float()
        if not bool(torch.isfinite(v).all()):
            raise Invalid(f"{path}: non-finite weights in {name}")
        clean[name] = v
    model.load_state_dict(clean, strict=True)
    return model.to(device).eval()


# -- the judge ------------------------------------------------------------------------------
def private_judge(profile: str, cfg: dict, details: dict) -> tuple[str, str]:
    """(base URL, token) of this scorer's own judge proxy (and, in smoke, its own stand-in)."""
    proxy = load_module("ncr_judge_proxy", os.path.join(HERE, "judge_proxy.py"))
    argv = list(cfg["proxy"])
    if profile == "smoke":
        standin = load_module("ncr_judge_standin", os.path.join(HERE, "judge_standin.py"))
        upstream, _server = standin.start_private()
        argv += ["--default-base-url", upstream, "--default-model", "standin-judge"]
        details["judge"] = "private stand-in behind a private proxy"
    else:
        details["judge"] = "the configured judge behind a private proxy"
    url, token, _server = proxy.start_private(argv)
    return url, token


def main() -> None:
    started = time.monotonic()
    details: dict = {}
    try:
        value, message = score(details)
    except Invalid as exc:
        value, message = math.nan, {"error": exc.error}
        if exc.trace:
            details["traceback"] = exc.trace
    except Exception as exc:  # noqa: BLE001
        value, message = math.nan, {"error": f"the scorer failed: {type(exc).__name__}: {str(exc)[:300]}"}
        details["traceback"] = traceback.format_exc()[-3000:]
    details["seconds"] = round(time.monotonic() - started, 3)
    result.emit(value, message, details)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the private judge runs in daemon threads


def score(details: dict) -> tuple[float, dict]:
    profile = os.environ.get("REBENCH_PROFILE", "gpu")
    cfg = PROFILES.get(profile)
    if cfg is None:
        raise Invalid(f"unknown profile {profile!r}")
    home = os.environ.get("REBENCH_HOME", "/home/agent")
    protected = os.environ.get("REBENCH_PROTECTED", "/protected")
    pristine = os.path.join(protected, "starting_solution")
    if not os.path.isdir(pristine):  # running from the repository (tests, run_gpu.sh)
        pristine = os.path.join(HERE, "..", "solution")
    sys.path.insert(0, os.path.abspath(pristine))
    sys.dont_write_bytecode = True

    import torch

    import chat
    import judge
    import model as model_mod
    from tokenizer import load_tokenizer

    details.update({"profile": profile, "torch": torch.__version__})
    device = cfg["device"]
    if device == "cuda" and not torch.cuda.is_available():
        raise Invalid("the gpu profile needs a CUDA device and none is visible")
    assets = os.path.join(protected, "assets")
    try:
        with open(os.path.join(assets, "heldout.json"), encoding="utf-8") as fh:
            held = json.load(fh)
        base_cfg, prompts, baselines, order_seed = held["base_config"], held["prompts"], held["baselines"], held["order_seed"]
        tok = load_tokenizer(os.path.join(assets, "tokenizer.json"))
    except (OSError, ValueError, KeyError) as exc:
        raise Invalid("the environment's assets are missing, unreadable or prepared by an older prepare.py: prepare "
                      "them again (rebench-tui prepare nanogpt_chat_rl --force); not a problem with your model",
                      with_traceback=True) from exc
    details.update({"n_prompts": len(prompts), "baselines": sorted(baselines), "max_new_tokens": chat.MAX_NEW_TOKENS})

    folder = os.path.join(home, MODEL_DIR)
    t0 = time.perf_counter()
    who = participant.account(home) if os.geteuid() == 0 else None
    model = load_participant_model(os.path.join(folder, model_mod.WEIGHTS), who, base_cfg, model_mod, device)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(GEN_SEED)
    try:
        answers = chat.answer(model, tok, prompts, batch_size=cfg["batch_size"])
    except Exception as exc:  # noqa: BLE001
        raise Invalid(f"generating answers failed: {type(exc).__name__}: {exc}", with_traceback=True) from exc
    if device == "cuda":
        torch.cuda.synchronize()
        details["peak_gpu_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
    details["generation_seconds"] = round(time.perf_counter() - t0, 3)
    details["mean_answer_chars"] = round(sum(map(len, answers)) / max(1, len(answers)), 1)
    del model

    url, token = private_judge(profile, cfg, details)
    client = judge.JudgeClient(url, headers={"X-Judge-Scorer-Token": token}, attempts=6)
    rng = random.Random(order_seed)
    jobs = []  # (baseline, index, ours_first) for the pairs the judge must see
    results: dict[str, list[float]] = {name: [0.0] * len(prompts) for name in baselines}
    ties: dict[str, int] = {name: 0 for name in baselines}
    for name in sorted(baselines):
        for i, (ours, theirs) in enumerate(zip(answers, baselines[name])):
            first = rng.random() < 0.5  # drawn for every pair, so the order of one pair never depends on others
            if ours.strip() == theirs.strip():
                results[name][i] = 0.5
                ties[name] += 1
            else:
                jobs.append((name, i, first))
    t1 = time.perf_counter()
    unreadable = 0

    def ask(job):
        name, i, first = job
        return job, client.verdict(prompts[i], answers[i], baselines[name][i], first)

    retried = 0  # replies that named neither answer and were asked again
    try:
        with ThreadPoolExecutor(cfg["judge_workers"]) as pool:
            for (name, i, _first), (value, bad) in pool.map(ask, jobs):
                results[name][i] = 0.0 if value is None else value  # still unreadable: a loss
                unreadable += value is None
                retried += bad
    except judge.JudgeUnavailable as exc:
        details["judge_calls_planned"] = len(jobs)
        raise Invalid(f"the judge could not be reached (not a problem with your model; score again): {exc}") from None
    details.update({"judge_calls": len(jobs), "judge_seconds": round(time.perf_counter() - t1, 3),
                    "identical_answers": ties, "unreadable_replies": retried,
                    "examples": [{"answer": a} for a in answers[:3]]})
    message = {f"win_vs_{name}": round(sum(v) / len(v), 4) for name, v in sorted(results.items())}
    message["n_prompts"] = len(prompts)
    message["unreadable_verdicts"] = unreadable  # counted as losses after judge.UNREADABLE_RETRIES more asks
    return sum(sum(v) / len(v) for v in results.values()) / len(results), message


if __name__ == "__main__":
    main()
