"""Scorer for nanogpt_chat_rl: the finetuned model's answers to held-out messages, judged against
two baselines' answers by the judge LLM.

Run by the workstation as root inside the container (or by the local runtime) with REBENCH_HOME,
REBENCH_PROTECTED and REBENCH_PROFILE (gpu or smoke); JUDGE_PROXY_URL comes from the profile.
Prints one JSON line last on stdout:

    {"score": mean win rate or "NaN", "message": {"win_vs_base": ..., "win_vs_sft": ...}, "details": {...}}

Steps
1. Read $REBENCH_PROTECTED/assets/heldout.json (messages and each baseline's answers).
2. Load $REBENCH_HOME/finetuned_model/model.pt with torch.load(weights_only=True) into the
   pristine copy of solution/model.py ($REBENCH_PROTECTED/starting_solution): no participant code
   runs. Missing, unreadable, a configuration other than the base model's, or non-finite
   weights: NaN with `error` saying which.
3. Answers: chat.answer() of the pristine copy (the chat prompt, 60 new tokens, greedy), with
   torch's seed fixed, batched.
4. For each baseline and message: an answer equal to the baseline's counts 1/2 without asking;
   otherwise the judge (solution/judge.py's messages and parsing, through the loopback judge
   proxy with the scorer's token) sees both in an order drawn from a fixed seed; a win counts
   1, a loss 0, an unreadable verdict 1/2. win_vs_<baseline> = the mean over messages.
5. Score = the mean of the win rates over baselines (higher is better). If the judge cannot be
   reached after its retries: NaN with `error` (not the participant's fault; score again).
"""

from __future__ import annotations

import json
import math
import os
import random
import sys
import time
import traceback
from concurrent.futures import ThreadPoolExecutor

PROFILES = {
    "gpu": {"device": "cuda", "batch_size": 64, "judge_workers": 8},
    "smoke": {"device": "cpu", "batch_size": 64, "judge_workers": 4},
}
GEN_SEED = 0
ORDER_SEED = 20_240_601
TOKEN_WAIT_S = 30.0
MODEL_DIR = "finetuned_model"


def emit(score: float, message: dict, details: dict | None = None) -> None:
    line = json.dumps({"score": score if math.isfinite(score) else "NaN", "message": message, "details": details or {}})
    sys.stderr.flush()
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
    os._exit(0)


def fail(error: str, details: dict, exc: BaseException | None = None) -> None:
    if exc is not None:
        details = {**details, "traceback": traceback.format_exc()[-3000:]}
    emit(math.nan, {"error": error}, details)


def scorer_token(protected: str) -> str | None:
    """The judge proxy's scorer token (root-only file it writes at start); waits for a proxy starting up."""
    path = os.path.join(protected, "judge_proxy", "scorer.token")
    deadline = time.monotonic() + TOKEN_WAIT_S
    while True:
        try:
            with open(path, encoding="utf-8") as fh:
                return fh.read().strip() or None
        except OSError:
            if time.monotonic() > deadline:
                return None
            time.sleep(0.5)


def load_participant_model(folder: str, base_cfg: dict, model_mod, device: str):
    import torch

    path = os.path.join(folder, model_mod.WEIGHTS)
    if not os.path.isfile(path):
        raise ValueError(f"no model at {path}: save your finetuned model there with solution/model.py's "
                         f"save_model(model, '{folder}') (to score the base model: cp -r ~/assets/base_model {folder})")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # noqa: BLE001
        raise ValueError(f"{path} is not a readable checkpoint: {type(exc).__name__}: {str(exc)[:300]}") from None
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("config"), dict) or not isinstance(ckpt.get("state_dict"), dict):
        raise ValueError(f"{path} must hold {{'config': {{...}}, 'state_dict': {{...}}}} (use save_model)")
    if ckpt["config"] != base_cfg:
        raise ValueError(f"{path} has configuration {ckpt['config']}; it must be the base model's {base_cfg}")
    model = model_mod.GPT(model_mod.GPTConfig(**base_cfg))
    try:
        model.load_state_dict({k: v.float() if torch.is_floating_point(v) else v for k, v in ckpt["state_dict"].items()})
    except (RuntimeError, TypeError, AttributeError) as exc:
        raise ValueError(f"{path}: the weights do not fit the base model's shapes: {str(exc)[:400]}") from None
    bad = [n for n, p in model.state_dict().items() if not bool(torch.isfinite(p).all())]
    if bad:
        raise ValueError(f"{path}: non-finite weights in {bad[:5]}")
    return model.to(device).eval()


def main() -> None:
    profile = os.environ.get("REBENCH_PROFILE", "gpu")
    cfg = PROFILES.get(profile)
    if cfg is None:
        fail(f"unknown profile {profile!r}", {})
    home = os.environ.get("REBENCH_HOME", "/home/agent")
    protected = os.environ.get("REBENCH_PROTECTED", "/protected")
    pristine = os.path.join(protected, "starting_solution")
    if not os.path.isdir(pristine):  # running from the repository (tests, run_gpu.sh)
        pristine = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "solution")
    sys.path.insert(0, os.path.abspath(pristine))
    sys.dont_write_bytecode = True

    import torch

    import chat
    import judge
    import model as model_mod
    from tokenizer import load_tokenizer

    details: dict = {"profile": profile, "torch": torch.__version__}
    device = cfg["device"]
    if device == "cuda" and not torch.cuda.is_available():
        fail("the gpu profile needs a CUDA device and none is visible", details)
    held_path = os.path.join(protected, "assets", "heldout.json")
    try:
        with open(held_path, encoding="utf-8") as fh:
            held = json.load(fh)
        base_cfg = held["base_config"]
        tok = load_tokenizer(os.path.join(home, "assets", "tokenizer.json"))
    except (OSError, ValueError, KeyError) as exc:
        fail("the environment's assets are missing or unreadable: prepare them (rebench-tui prepare nanogpt_chat_rl)",
             details, exc)
    prompts, baselines = held["prompts"], held["baselines"]
    details.update({"n_prompts": len(prompts), "baselines": sorted(baselines), "max_new_tokens": chat.MAX_NEW_TOKENS})

    folder = os.path.join(home, MODEL_DIR)
    t0 = time.perf_counter()
    try:
        model = load_participant_model(folder, base_cfg, model_mod, device)
    except ValueError as exc:
        fail(str(exc), details)
    except Exception as exc:  # noqa: BLE001
        fail(f"could not load {folder}: {type(exc).__name__}: {exc}", details, exc)
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()
    torch.manual_seed(GEN_SEED)
    try:
        answers = chat.answer(model, tok, prompts, batch_size=cfg["batch_size"])
    except Exception as exc:  # noqa: BLE001
        fail(f"generating answers failed: {type(exc).__name__}: {exc}", details, exc)
    if device == "cuda":
        torch.cuda.synchronize()
        details["peak_gpu_memory_gib"] = round(torch.cuda.max_memory_allocated() / 2**30, 3)
    details["generation_seconds"] = round(time.perf_counter() - t0, 3)
    details["mean_answer_chars"] = round(sum(map(len, answers)) / max(1, len(answers)), 1)
    del model

    token = scorer_token(protected)
    details["scorer_token"] = token is not None
    client = judge.JudgeClient(headers={judge_header(): token} if token else None, attempts=6)
    rng = random.Random(ORDER_SEED)
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
        return job, client.prefer(prompts[i], answers[i], baselines[name][i], first)

    try:
        with ThreadPoolExecutor(cfg["judge_workers"]) as pool:
            for (name, i, _first), value in pool.map(ask, jobs):
                results[name][i] = value
                unreadable += value == 0.5
    except judge.JudgeUnavailable as exc:
        fail(f"the judge could not be reached (not a problem with your model; score again): {exc}",
             {**details, "judge_calls_planned": len(jobs)})
    details.update({"judge_calls": len(jobs), "judge_seconds": round(time.perf_counter() - t1, 3),
                    "identical_answers": ties, "unreadable_verdicts": unreadable,
                    "examples": [{"answer": a} for a in answers[:3]]})
    message = {f"win_vs_{name}": round(sum(v) / len(v), 4) for name, v in sorted(results.items())}
    message["n_prompts"] = len(prompts)
    score = sum(sum(v) / len(v) for v in results.values()) / len(results)
    emit(score, message, details)


def judge_header() -> str:
    return "X-Judge-Scorer-Token"


if __name__ == "__main__":
    main()
