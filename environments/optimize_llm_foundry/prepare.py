"""Builds optimize_llm_foundry's assets (see environments/README.md for the command line).

workspace/ (the participant's, read-only at /home/agent/assets):
    base_model/          the model finetune.sh starts from (config.json, weights, tokenizer files)
    train_data.jsonl     the finetuning rows, {"prompt": ..., "response": ...} per line
protected/ (held out, /protected/assets):
    scoring_rows.jsonl   rows of the same kind and number as train_data.jsonl, never shown to the
                         participant: each scoring room's ~/assets/train_data.jsonl (environment.toml,
                         score.room_assets), so weights kept from an earlier run cannot match
    reference_scoring/   what the UNMODIFIED solution/finetune.sh produced from the base model and
                         scoring_rows.jsonl here: the weights every scoring in a room is compared with
    reference_model/     the same run on train_data.jsonl: what a scoring without a room (the local
                         runtime, which is no boundary) is compared with
    facts.json           how the assets were made (sources, seeds, the reference run's time)

Modes
  smoke synthetic   a tiny LLaMA-shaped model (random, seeded init), a byte-level BPE tokenizer
                    learnt here, 400 synthetic code-instruction rows and 400 more from another
                    seed (the scoring rows); then the two reference runs of the unmodified smoke
                    finetune (plain PyTorch, one thread, 25-40 s each).
  gpu fetch         deepseek-ai/deepseek-coder-1.3b-base from the Hugging Face hub, rows 1-1000 of
                    sahil2801/CodeAlpaca-20k (instruction [+ input] -> prompt, output -> response)
                    and rows 1001-2000 as the scoring rows; then the two reference runs of the
                    unmodified LLM Foundry finetune, which need LLM Foundry and the GPUs (4 in the
                    published setup; a few minutes each).
  gpu from          the same from SOURCE/base_model/ (a Hugging Face model folder) and
                    SOURCE/train_data.jsonl + SOURCE/scoring_rows.jsonl (prompt/response rows) or
                    SOURCE/code_alpaca*.json[l] (instruction/input/output rows: the first 1000 and
                    the next 1000; half and half where there are fewer); SOURCE/reference_model/ and SOURCE/reference_scoring/, when
                    present, are taken as the reference runs (made with the same finetune.sh elsewhere).
  gpu synthetic     full-size shapes with random weights (1.3B LLaMA layout, bf16 safetensors)
                    and synthetic rows, for timing the scorer where the hub cannot be reached.
                    Without LLM Foundry on the machine the "reference" is the base model plus
                    seeded noise, marked timing_only in facts.json: scores against it mean nothing.

The reference run: solution/ is copied to WORK/reference_run/solution, WORK/reference_run/assets
points at OUT/workspace, and `bash finetune.sh` runs there with REBENCH_PROFILE set to the
profile. For smoke, `python3` is this script's interpreter (torch needed); for gpu it is
$OLF_PYTHON if set, else the python3 on PATH (which must import llmfoundry; `composer` must be on
PATH too).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
SOLUTION = HERE / "solution"
sys.path.insert(0, str(SOLUTION))

SMOKE_ROWS = 400
SMOKE_MERGES = 510  # vocabulary 2 specials + 256 bytes + 510 merges = 768
ROWS_SEED = 20_241_101
SCORING_ROWS_SEED = 20_241_102  # the held-out scoring rows (synthetic modes)
MODEL_SEED = 1234
GPU_MODEL = "deepseek-ai/deepseek-coder-1.3b-base"
GPU_DATASET = "sahil2801/CodeAlpaca-20k"
GPU_ROWS = 1000
# deepseek-coder-1.3b-base's architecture (LLaMA layout), for the synthetic gpu shapes
DEEPSEEK_1P3B = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "vocab_size": 32256, "hidden_size": 2048,
    "intermediate_size": 5504, "num_hidden_layers": 24, "num_attention_heads": 16, "num_key_value_heads": 16,
    "max_position_embeddings": 16384, "rope_theta": 100000, "rope_scaling": {"type": "linear", "factor": 4.0},
    "rms_norm_eps": 1e-6, "hidden_act": "silu", "initializer_range": 0.02, "tie_word_embeddings": False,
    "bos_token_id": 32013, "eos_token_id": 32014, "torch_dtype": "bfloat16",
}
OUTPUTS = ("finetuning_tokens", "ftout", "trained_model")


def progress(done: float, total: float, label: str) -> None:
    print(f"PROGRESS {done} {total} {label}", flush=True)


def fail(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
    sys.exit(1)


# -- data ------------------------------------------------------------------------------------
def pseudo_words(rng: random.Random, n: int) -> list[str]:
    cons, vows = "bcdfghklmnprstvz", "aeiou"
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(cons) + rng.choice(vows) for _ in range(rng.randint(2, 3))))
    return sorted(words)


def synthetic_rows(n: int, seed: int) -> list[dict]:
    """Code-instruction rows from six templates over pseudo-words and numbers (learnable structure)."""
    rng = random.Random(seed)
    words = pseudo_words(rng, 120)

    def ident() -> str:
        return "_".join(rng.sample(words, 2))

    what = {"max": "largest item", "min": "smallest item", "sum": "total", "len": "length"}
    rows = []
    for i in range(n):
        kind = i % 6
        if kind == 0:
            a, b, name = rng.randint(0, 99), rng.randint(0, 99), ident()
            rows.append((f"Write a Python function `{name}` that returns the sum of {a} and {b}.",
                         f"def {name}():\n    return {a} + {b}\n"))
        elif kind == 1:
            w = rng.choice(words) + rng.choice(words)
            rows.append((f'Reverse the string "{w}" in Python.', f'"{w}"[::-1]  # "{w[::-1]}"\n'))
        elif kind == 2:
            xs = [rng.randint(0, 50) for _ in range(rng.randint(3, 6))]
            rows.append((f"Sort the list {xs} in ascending order.", f"sorted({xs})  # {sorted(xs)}\n"))
        elif kind == 3:
            name, arg, op = ident(), rng.choice(words), rng.choice(sorted(what))
            rows.append((f"Define `{name}({arg})` returning the {what[op]} of `{arg}`.",
                         f"def {name}({arg}):\n    return {op}({arg})\n"))
        elif kind == 4:
            k = rng.randint(1, 255)
            rows.append((f"Convert {k} to a binary string.", f"bin({k})  # '{bin(k)}'\n"))
        else:
            w, k = rng.choice(words), rng.randint(2, 4)
            rows.append((f'Repeat the word "{w}" {k} times, separated by spaces.',
                         f'" ".join(["{w}"] * {k})  # "{" ".join([w] * k)}"\n'))
    return [{"prompt": p, "response": r} for p, r in rows]


def scoring_rows(n: int, visible: list[dict]) -> list[dict]:
    """``n`` synthetic rows from another seed, none of them also a visible row."""
    seen = {json.dumps(r, sort_keys=True) for r in visible}
    rows = [r for r in synthetic_rows(2 * n, SCORING_ROWS_SEED) if json.dumps(r, sort_keys=True) not in seen]
    return rows[:n]


def write_rows(rows: list[dict], path: Path) -> None:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


def alpaca_to_rows(records: list[dict]) -> list[dict]:
    """CodeAlpaca records (instruction, input, output) as prompt/response rows."""
    rows = []
    for r in records:
        prompt = r["instruction"].strip()
        if (r.get("input") or "").strip():
            prompt += "\n\n" + r["input"].strip()
        rows.append({"prompt": prompt + "\n", "response": r["output"]})
    return rows


# -- the smoke tokenizer and model -----------------------------------------------------------
def train_bpe(texts: list[str], n_merges: int) -> list[list[int]]:
    """Byte-level BPE merges learnt on ``texts`` (most frequent pair first; ties by smallest ids)."""
    from minifoundry.tokenizer import BYTE_OFFSET, FIRST_MERGE_ID, split_pieces

    counts = Counter(piece for t in texts for piece in split_pieces(t))
    words = [[b + BYTE_OFFSET for b in w.encode("utf-8")] for w in counts]
    freqs = list(counts.values())
    merges: list[list[int]] = []
    for rank in range(n_merges):
        pairs: Counter = Counter()
        for w, f in zip(words, freqs):
            for p in zip(w, w[1:]):
                pairs[p] += f
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        new = FIRST_MERGE_ID + rank
        for w in words:
            i = 0
            while i < len(w) - 1:
                if w[i] == best[0] and w[i + 1] == best[1]:
                    w[i:i + 2] = [new]
                i += 1
        merges.append(list(best))
        if rank % 100 == 0:
            progress(rank, n_merges, "learning the BPE tokenizer")
    return merges


def build_smoke(out: Path, work: Path) -> dict:
    import torch

    from minifoundry.model import CausalLM, ModelConfig
    from minifoundry.safetensors_io import save_file

    ws = out / "workspace"
    progress(0, 4, "synthetic finetuning rows")
    rows = synthetic_rows(SMOKE_ROWS, ROWS_SEED)
    write_rows(rows, ws / "train_data.jsonl")
    write_rows(scoring_rows(SMOKE_ROWS, rows), out / "protected" / "scoring_rows.jsonl")
    merges = train_bpe([t for r in rows for t in (r["prompt"], r["response"])], SMOKE_MERGES)
    base = ws / "base_model"
    base.mkdir(parents=True, exist_ok=True)
    (base / "tokenizer.json").write_text(json.dumps({"type": "byte_bpe", "specials": {"<pad>": 0, "<eos>": 1},
                                                     "byte_offset": 2, "merges": merges}) + "\n")
    progress(2, 4, "initializing the tiny model")
    cfg = ModelConfig(vocab_size=2 + 256 + len(merges))
    torch.manual_seed(MODEL_SEED)
    model = CausalLM(cfg)
    model.init_weights(torch.Generator().manual_seed(MODEL_SEED))
    cfg.to_json(base / "config.json")
    save_file(model.state_dict(), base / "model.safetensors")
    n_params = sum(p.numel() for p in model.parameters())
    progress(3, 4, "reference runs of the unmodified finetune.sh, on the visible and the scoring rows (about a minute each)")
    run = reference_runs("smoke", out, work, python=sys.executable)
    return {"profile": "smoke", "mode": "synthetic", "rows": len(rows), "rows_seed": ROWS_SEED,
            "scoring_rows_seed": SCORING_ROWS_SEED, "model_seed": MODEL_SEED,
            "bpe_merges": len(merges), "model_config": cfg.__dict__, "parameters": n_params, "reference_run": run}


# -- the reference run -----------------------------------------------------------------------
def reference_runs(profile: str, out: Path, work: Path, python: str | None) -> dict:
    """Both reference runs: on the scoring rows (protected/reference_scoring/, what a scoring room
    compares with) and on the visible rows (protected/reference_model/, for scorings without one)."""
    scoring = reference_run(profile, out, work, python, rows=out / "protected" / "scoring_rows.jsonl", dest="reference_scoring")
    visible = reference_run(profile, out, work, python)
    return {**visible, "scoring_rows": scoring}


def reference_run(profile: str, out: Path, work: Path, python: str | None, rows: Path | None = None,
                  dest: str = "reference_model") -> dict:
    """Runs the unmodified finetune.sh on these assets (``rows`` in place of train_data.jsonl); its
    trained_model/ becomes protected/<dest>/."""
    run = work / "reference_run"
    shutil.rmtree(run, ignore_errors=True)
    run.mkdir(parents=True)
    shutil.copytree(SOLUTION, run / "solution", ignore=shutil.ignore_patterns("__pycache__", *OUTPUTS))
    if rows is None:
        (run / "assets").symlink_to((out / "workspace").resolve(), target_is_directory=True)
    else:  # as a scoring room lays it out: the shared assets linked in, the rows a file of their own
        (run / "assets").mkdir()
        for entry in (out / "workspace").iterdir():
            if entry.name != "train_data.jsonl":
                (run / "assets" / entry.name).symlink_to(entry.resolve())
        shutil.copy(rows, run / "assets" / "train_data.jsonl")
    env = {**os.environ, "REBENCH_PROFILE": profile, "PYTHONDONTWRITEBYTECODE": "1"}
    if python:  # `python3` in finetune.sh is this interpreter
        bindir = run / "bin"
        bindir.mkdir()
        wrapper = bindir / "python3"
        wrapper.write_text(f'#!/bin/sh\nexec "{python}" "$@"\n')
        wrapper.chmod(0o755)
        # its own bin folder next: a venv's `composer` launcher belongs to the same interpreter
        env["PATH"] = f"{bindir}:{Path(python).parent}:{env.get('PATH', '/usr/bin:/bin')}"
    t0 = time.time()
    proc = subprocess.Popen(["bash", "finetune.sh"], cwd=run / "solution", env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    tail: list[str] = []
    assert proc.stdout is not None
    for line in proc.stdout:
        line = line.rstrip()
        tail = (tail + [line])[-30:]
        if line.strip():
            print(f"  | {line}", flush=True)
    code = proc.wait()
    seconds = round(time.time() - t0, 1)
    produced = run / "solution" / "trained_model"
    if code != 0 or not produced.is_dir():
        fail(f"the reference run of finetune.sh ({profile}) failed with exit status {code} after {seconds} s:\n" + "\n".join(tail))
    dest_dir = out / "protected" / dest
    shutil.rmtree(dest_dir, ignore_errors=True)
    shutil.copytree(produced, dest_dir)
    shutil.rmtree(run, ignore_errors=True)
    return {"seconds": seconds, "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "python": python or "python3 on PATH",
            "files": sorted(p.name for p in dest_dir.iterdir())}


def gpu_reference_check() -> tuple[str, int]:
    """(LLM Foundry's version, GPU count) of the interpreter that will make the gpu reference run; fails clearly."""
    python = os.environ.get("OLF_PYTHON") or shutil.which("python3")
    check = subprocess.run([python or "python3", "-c", "import llmfoundry, torch; print(llmfoundry.__version__, torch.cuda.device_count())"],
                           capture_output=True, text=True)
    if check.returncode != 0:
        fail("the gpu reference run needs LLM Foundry (`pip install llm-foundry==0.22.0`, which pins torch 2.7.0) and GPUs: "
             f"{python or 'python3'} cannot import llmfoundry ({check.stderr.strip().splitlines()[-1] if check.stderr.strip() else 'no output'}). "
             "Set OLF_PYTHON to an interpreter that can, or run the reference elsewhere and pass it in "
             "SOURCE/reference_model with --mode from.")
    version, gpus = check.stdout.split()
    if int(gpus) == 0:
        fail("the gpu reference run needs GPUs, and torch sees none")
    return version, int(gpus)


def gpu_reference_run(out: Path, work: Path) -> dict:
    version, gpus = gpu_reference_check()
    progress(0, 1, f"reference runs of the unmodified finetune.sh (LLM Foundry {version}, {gpus} GPU(s); minutes each)")
    facts = reference_runs("gpu", out, work, python=os.environ.get("OLF_PYTHON"))
    return {**facts, "llm_foundry": version, "gpus": gpus}


# -- gpu profile -----------------------------------------------------------------------------
def fetch_gpu(work: Path) -> tuple[Path, Path]:
    try:
        from huggingface_hub import snapshot_download
        from datasets import load_dataset
    except ImportError:
        fail("fetch needs huggingface_hub and datasets (pip install huggingface_hub datasets); on an offline machine use --mode from")
    progress(0, 2, f"downloading {GPU_MODEL} from the Hugging Face hub (resumes if interrupted)")
    base = Path(snapshot_download(repo_id=GPU_MODEL, local_dir=str(work / "base_model"),
                                  allow_patterns=["*.json", "*.safetensors", "*.model", "tokenizer*"]))
    progress(1, 2, f"the first {2 * GPU_ROWS} rows of {GPU_DATASET} (the first {GPU_ROWS} to train on, the next {GPU_ROWS} to score)")
    ds = load_dataset(GPU_DATASET, split=f"train[:{2 * GPU_ROWS}]")
    rows = alpaca_to_rows([dict(r) for r in ds])
    write_rows(rows[:GPU_ROWS], work / "train_data.jsonl")
    write_rows(rows[GPU_ROWS:], work / "scoring_rows.jsonl")
    return base, work / "train_data.jsonl"


def rows_from(source: Path, work: Path) -> Path:
    """The training rows (work/scoring_rows.jsonl beside them: the held-out ones)."""
    if (source / "train_data.jsonl").is_file():
        if not (source / "scoring_rows.jsonl").is_file():
            fail(f"{source}: train_data.jsonl needs scoring_rows.jsonl beside it (rows of the same kind and number, "
                 "never shown to the participant: what each scoring trains on)")
        shutil.copy(source / "scoring_rows.jsonl", work / "scoring_rows.jsonl")
        return source / "train_data.jsonl"
    for name in ("code_alpaca_20k.json", "code_alpaca.json", "code_alpaca.jsonl"):
        f = source / name
        if f.is_file():
            text = f.read_text()
            records = json.loads(text) if name.endswith(".json") else [json.loads(x) for x in text.splitlines() if x.strip()]
            n = min(GPU_ROWS, len(records) // 2)  # as many held out to score as there are to train on
            if n == 0:
                fail(f"{f}: {len(records)} row(s); at least 2 are needed (half to train on, half held out to score)")
            write_rows(alpaca_to_rows(records[:n]), work / "train_data.jsonl")
            write_rows(alpaca_to_rows(records[n:2 * n]), work / "scoring_rows.jsonl")
            return work / "train_data.jsonl"
    fail(f"{source}: expected train_data.jsonl and scoring_rows.jsonl (prompt/response rows) or code_alpaca_20k.json "
         "(instruction/input/output)")
    raise AssertionError


def copy_tree(src: Path, dest: Path) -> None:
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(src, dest, symlinks=False, ignore=shutil.ignore_patterns(".cache", ".git*"))


def build_gpu_real(mode: str, out: Path, work: Path, source: Path | None) -> dict:
    ws = out / "workspace"
    if mode == "fetch":
        gpu_reference_check()  # before hours of downloading: the reference run needs LLM Foundry and GPUs here
        base, rows = fetch_gpu(work)
        sources = {"model": GPU_MODEL, "dataset": f"{GPU_DATASET} (first {GPU_ROWS} rows)"}
    else:
        if source is None:
            fail("--mode from needs --source DIR")
        base, rows = source / "base_model", rows_from(source, work)
        if not (base / "config.json").is_file():
            fail(f"{base}: no config.json (expected a Hugging Face model folder)")
        sources = {"model": str(base), "dataset": str(rows)}
    progress(0, 2, "copying the base model and the rows into the workspace")
    copy_tree(base, ws / "base_model")
    shutil.copy(rows, ws / "train_data.jsonl")
    shutil.copy(work / "scoring_rows.jsonl", out / "protected" / "scoring_rows.jsonl")
    n_rows = sum(1 for line in (ws / "train_data.jsonl").read_text().splitlines() if line.strip())
    if mode == "from" and source is not None and (source / "reference_model").is_dir():
        if not (source / "reference_scoring").is_dir():
            fail(f"{source}: reference_model/ needs reference_scoring/ beside it (the same finetune.sh run on scoring_rows.jsonl)")
        copy_tree(source / "reference_model", out / "protected" / "reference_model")
        copy_tree(source / "reference_scoring", out / "protected" / "reference_scoring")
        run = {"imported_from": str(source / "reference_model"), "scoring_rows": {"imported_from": str(source / "reference_scoring")}}
    else:
        run = gpu_reference_run(out, work)
    return {"profile": "gpu", "mode": mode, "sources": sources, "rows": n_rows, "reference_run": run}


def build_gpu_synthetic(out: Path, work: Path) -> dict:
    """Full-size shapes, random weights: for timing the scorer (and the finetune, where LLM Foundry exists)."""
    import torch

    from minifoundry.safetensors_io import save_file

    ws, cfg = out / "workspace", DEEPSEEK_1P3B
    base = ws / "base_model"
    base.mkdir(parents=True, exist_ok=True)
    visible = synthetic_rows(GPU_ROWS, ROWS_SEED)
    write_rows(visible, ws / "train_data.jsonl")
    write_rows(scoring_rows(GPU_ROWS, visible), out / "protected" / "scoring_rows.jsonl")
    (base / "config.json").write_text(json.dumps(cfg, indent=2) + "\n")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    gen = torch.Generator(device=device).manual_seed(MODEL_SEED)
    h, f, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    shapes = {"model.embed_tokens.weight": (v, h), "model.norm.weight": (h,), "lm_head.weight": (v, h)}
    for i in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (h,), p + "post_attention_layernorm.weight": (h,),
                       p + "mlp.gate_proj.weight": (f, h), p + "mlp.up_proj.weight": (f, h), p + "mlp.down_proj.weight": (h, f)})
        shapes.update({p + f"self_attn.{n}_proj.weight": (h, h) for n in "qkvo"})
    progress(0, 3, f"random weights in the {GPU_MODEL} shape ({device})")
    state = {k: (torch.ones(s, device=device) if len(s) == 1 else torch.randn(s, device=device, generator=gen) * 0.02)
             .to(torch.bfloat16).cpu() for k, s in shapes.items()}
    n_params = sum(t.numel() for t in state.values())
    save_file(state, base / "model.safetensors")
    tokenizer = write_hf_tokenizer(base, work)
    facts = {"profile": "gpu", "mode": "synthetic", "parameters": n_params, "tokenizer": tokenizer,
             "note": "random weights: for timing the scorer and the finetune only"}
    llmfoundry = subprocess.run([os.environ.get("OLF_PYTHON") or "python3", "-c", "import llmfoundry"], capture_output=True).returncode == 0
    if llmfoundry and tokenizer == "trained" and torch.cuda.is_available():
        facts["reference_run"] = gpu_reference_run(out, work)
        return facts
    progress(2, 3, "timing-only reference (no LLM Foundry here): the base weights plus seeded noise")
    ref = out / "protected" / "reference_model"
    ref.mkdir(parents=True, exist_ok=True)
    noise = torch.Generator().manual_seed(MODEL_SEED + 1)
    save_file({k: (t.float() + torch.randn(t.shape, generator=noise) * 1e-4).to(torch.bfloat16) for k, t in state.items()},
              ref / "model.safetensors")
    shutil.copy(base / "config.json", ref / "config.json")
    copy_tree(ref, out / "protected" / "reference_scoring")  # timing only, like the one it copies
    facts["reference_run"] = {"timing_only": True, "why": "LLM Foundry, a trained tokenizer or a GPU is missing on this machine"}
    return facts


def write_hf_tokenizer(base: Path, work: Path) -> str:
    """A byte-level BPE tokenizer in Hugging Face's format, learnt on synthetic text, where the
    `tokenizers` package exists (LLM Foundry needs one to tokenize); else none."""
    try:
        from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    except ImportError:
        return "none (the tokenizers package is missing)"
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    specials = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>"]
    trainer = trainers.BpeTrainer(vocab_size=8000, special_tokens=specials, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    texts = [r["prompt"] + r["response"] for r in synthetic_rows(20_000, ROWS_SEED + 1)]
    tok.train_from_iterator(texts, trainer)
    tok.save(str(base / "tokenizer.json"))
    (base / "tokenizer_config.json").write_text(json.dumps({
        "tokenizer_class": "PreTrainedTokenizerFast", "bos_token": specials[0], "eos_token": specials[1],
        "pad_token": specials[1], "model_max_length": 16384, "add_bos_token": True}, indent=2) + "\n")
    return "trained"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profile", choices=["gpu", "smoke"], required=True)
    ap.add_argument("--mode", choices=["fetch", "synthetic", "from"], required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--source", type=Path)
    a = ap.parse_args()
    for side in ("workspace", "protected"):
        (a.out / side).mkdir(parents=True, exist_ok=True)
    a.work.mkdir(parents=True, exist_ok=True)
    t0 = time.time()
    if a.profile == "smoke":
        if a.mode != "synthetic":
            fail("the smoke profile's assets are synthetic: use --mode synthetic (rebench-tui prepare optimize_llm_foundry --synthetic)")
        facts = build_smoke(a.out, a.work)
    elif a.mode == "synthetic":
        facts = build_gpu_synthetic(a.out, a.work)
    else:
        facts = build_gpu_real(a.mode, a.out, a.work, a.source)
    facts["prepare_seconds"] = round(time.time() - t0, 1)
    facts["created"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    (a.out / "protected" / "facts.json").write_text(json.dumps(facts, indent=2) + "\n")
    progress(1, 1, "done")
    print(json.dumps({k: facts[k] for k in ("profile", "mode", "prepare_seconds")} | {"reference_run": facts.get("reference_run")}))


if __name__ == "__main__":
    main()
