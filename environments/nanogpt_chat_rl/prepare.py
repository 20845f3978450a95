"""Builds nanogpt_chat_rl's assets (see environments/README.md for the command line).

workspace/ (the participant's, read-only at /home/agent/assets):
    base_model/model.pt   the base model (GPT-2 small in the gpu profile), solution/model.py's format
    tokenizer.json        the tokenizer (solution/tokenizer.py reads it)
    train_prompts.json    prompts to practise on, without answers (a list of strings; gpu: Alpaca
                          prompts in the Alpaca template; smoke: short user messages)
    README.txt            what these files are
protected/ (held out, /protected/assets):
    heldout.json          held-out prompts and the two baselines' answers to them:
                          {"prompts": [...], "baselines": {"base": [...], "alpaca" or "sft": [...]},
                           "order_seed": int, "baseline_notes": {...}, ...}; gpu from Alpaca also
                          "references": the dataset's answers to the held-out prompts (kept for the
                          record; the scorer does not read them)
    tokenizer.json        the scorer's own copy of the tokenizer
    facts.json            how the assets were made (seeds, sizes, times, sources with their sha256,
                          and the sha256 of every other file written here)

Secrets drawn here (from the operating system's randomness, never a constant of this
repository) and kept on the protected side only: ``split_seed`` (which rows, topics or word pairs
are held out; facts.json) and ``order_seed`` (the order in which the judge sees each pair of
answers; heldout.json). The environment variable CHATRL_SPLIT_SEED pins the split (tests that
reproduce a measured figure); never set it for a real attempt. CHATRL_HELDOUT sets the gpu
profile's number of held-out prompts (512, the number a secondary source gives for METR's task; the paper states none).

Every baseline answers exactly as the scorer makes the participant's model answer (chat.py: the
prompt, 60 new tokens, greedy). The gpu profile follows RE-Bench appendix B.6:
    base    GPT-2 small as published (so the starting model ties with it: identical answers count 1/2)
    alpaca  GPT-2 small finetuned on the Alpaca training rows' (prompt, answer) pairs, none of whose
            instructions is held out (2 epochs, AdamW lr 5e-5 with 100 warm-up steps and a linear
            decay to a tenth, batch 32, answer tokens only)
The smoke profile (and the gpu profile's random-weight stand-in) keeps a self-finetune instead:
    sft     the base model samples one answer per training message (temperature 0.9, top-k 50);
            answers that end within 60 tokens, have at least 3 words, repeat no word trigram and
            share a word of 4+ letters with the message are kept; the base model is finetuned on
            the kept (message, answer) pairs (2 epochs; smoke: 3).

Modes (gpu profile):
    fetch      from the Hugging Face hub into --work, with progress, resuming what an interrupted
               run left (huggingface_hub's snapshot_download into a local folder): GPT-2 small
               (openai-community/gpt2: config.json, model.safetensors, vocab.json, merges.txt) and
               the Alpaca data (dataset tatsu-lab/alpaca: data/*.parquet, read with pyarrow). Each
               is pinned to the commit the hub names when the download starts (recorded).
    from       the same from files someone already has, under --source DIR:
                 DIR/gpt2/    config.json, vocab.json, merges.txt and model.safetensors (or
                              pytorch_model.bin)
                 the Alpaca data, the first of: DIR/alpaca/ (a copy of the hub dataset's folder:
                 *.parquet, or *.json / *.jsonl inside), DIR/alpaca.jsonl, DIR/alpaca.json,
                 DIR/alpaca_data.json (a JSON list or JSON lines of objects with instruction,
                 input and output)
    synthetic  GPT-2 small shapes with random weights and a byte tokenizer with GPT-2's vocabulary
               size, prompts from prompts.py's templates in the Alpaca template, and the sft
               self-finetune (for timing the generation and the scorer where the hub cannot be
               reached; the answers are noise).
    The smoke profile takes only synthetic: a tiny word-level GPT trained here (below).
Whatever a mode read (downloaded or given) is listed in facts.json's "sources" with its size and
sha256; everything else written is listed in its "files" with its sha256.

The smoke corpus: dialogues "Human: <message>\\n\\nAssistant: <answer><eot>" about a tiny world
(prompts.py). Half of the answers are evasive ("i do not know.", ...: they start with "i"), the other half talk
about the message's things (naming its noun; or its adjective and noun; or those and its second
noun). The base model therefore answers evasively when greedy ("i" is its likeliest first word) but
names the message's things in roughly a quarter of its samples: there is something for RL to find.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import secrets
import sys
import time
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "solution"))
sys.path.insert(0, str(HERE))
import prompts as P  # noqa: E402
from chat import MAX_NEW_TOKENS, answer, sft_batch, sft_loss  # noqa: E402
from model import GPT, GPTConfig, save_model  # noqa: E402
from tokenizer import PIECES, ByteTokenizer, GPT2Tokenizer, WordTokenizer  # noqa: E402

GPT2_SMALL = GPTConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768)
SMOKE_SHAPE = {"block_size": 96, "n_layer": 2, "n_head": 4, "n_embd": 64}  # vocab_size: the word tokenizer's
SETTINGS = {  # per profile: how many messages, and how the second baseline is made
    "gpu": {"n_heldout": int(os.environ.get("CHATRL_HELDOUT", "512")), "sft_prompts": 0, "sft_epochs": 2,
            "sft_lr": 2e-5, "sft_batch": 16, "gen_batch": 64,
            "alpaca_epochs": 2, "alpaca_lr": 5e-5, "alpaca_batch": 32, "alpaca_warmup": 100, "alpaca_final_lr": 0.1},
    "smoke": {"n_train": 480, "n_heldout": 32, "sft_prompts": 0, "sft_epochs": 3, "sft_lr": 2e-3, "sft_batch": 32,
              "gen_batch": 128},
}
SFT_SEED = 1_234
SAMPLE_TEMPERATURE, SAMPLE_TOP_K = 0.9, 50
GPT2_REPO = "openai-community/gpt2"
GPT2_FILES = ["config.json", "model.safetensors", "vocab.json", "merges.txt"]
ALPACA_REPO = "tatsu-lab/alpaca"  # a dataset repository: instruction, input, output (and text)
ALPACA_FILES = ["alpaca", "alpaca.jsonl", "alpaca.json", "alpaca_data.json"]  # under --source, first found wins


def progress(done: float, total: float, label: str) -> None:
    print(f"PROGRESS {done} {total} {label}", flush=True)


def fail(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
    sys.exit(1)


# -- the sft self-finetune (smoke; gpu synthetic) ------------------------------------------------
def words4(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]{4,}", text)}


def keep_sample(message: str, reply: str, ended: bool) -> bool:
    words = reply.lower().split()
    trigrams = list(zip(words, words[1:], words[2:]))
    return ended and len(words) >= 3 and len(set(trigrams)) == len(trigrams) and bool(words4(message) & words4(reply))


def sft_step(model: GPT, opt, tok, pairs: list[tuple[str, str]], device: str) -> torch.Tensor:
    """One optimizer step on (prompt, answer) pairs, learning the answers (chat.sft_loss); the loss."""
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
        loss = sft_loss(model, *sft_batch(tok, pairs, model.cfg.block_size, device))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    return loss


def sft_baseline(base: GPT, tok, messages: list[str], st: dict, device: str, *, filtered: bool = True) -> tuple[GPT, dict]:
    from model import generate
    from chat import clean_answer, format_prompt

    progress(0, 2, f"sampling {len(messages)} answers from the base model for the SFT baseline")
    gen = torch.Generator(device=device).manual_seed(SFT_SEED)
    base.eval()
    outs = generate(base, [tok.encode(format_prompt(m)) for m in messages], MAX_NEW_TOKENS, tok.eot,
                    temperature=SAMPLE_TEMPERATURE, top_k=SAMPLE_TOP_K, generator=gen, batch_size=st["gen_batch"])
    pairs = []
    for m, o in zip(messages, outs):
        reply = clean_answer(tok.decode(o))
        if not filtered or keep_sample(m, reply, ended=bool(o) and o[-1] == tok.eot):
            pairs.append((m, reply))
    info = {"sampled": len(messages), "kept": len(pairs), "filtered": filtered}
    if len(pairs) < 8:  # only a random-weight model gets here: train on whatever it said
        pairs = [(m, clean_answer(tok.decode(o))) for m, o in zip(messages, outs)]
        info["kept_unfiltered"] = len(pairs)
    model = GPT(base.cfg).to(device)
    model.load_state_dict(base.state_dict())
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=st["sft_lr"], weight_decay=0.0)
    rng = random.Random(SFT_SEED)
    steps = max(1, st["sft_epochs"] * len(pairs) // st["sft_batch"])
    for step in range(steps):
        loss = sft_step(model, opt, tok, rng.sample(pairs, min(st["sft_batch"], len(pairs))), device)
        if step % 20 == 0 or step == steps - 1:
            progress(1 + (step + 1) / steps, 2, f"finetuning the SFT baseline (loss {loss.item():.3f})")
    info["steps"] = steps
    model.eval()
    return model, info


# -- the alpaca baseline (gpu fetch, from) -------------------------------------------------------
def alpaca_baseline(base: GPT, tok, pairs: list[tuple[str, str]], st: dict, device: str) -> tuple[GPT, dict]:
    """The base model finetuned on (Alpaca prompt, Alpaca answer) pairs: only the answer's tokens
    and the end-of-text after it are learned (chat.sft_loss); each epoch sees every pair once, in
    a fresh order; AdamW, a linear warm-up, then a linear decay to ``alpaca_final_lr`` of the peak."""
    model = GPT(base.cfg).to(device)
    model.load_state_dict(base.state_dict())
    model.train()
    batch = st["alpaca_batch"]
    per_epoch = max(1, -(-len(pairs) // batch))
    steps = per_epoch * st["alpaca_epochs"]
    warmup, final = min(st["alpaca_warmup"], max(1, steps // 10)), st["alpaca_final_lr"]

    def factor(step: int) -> float:
        if step < warmup:
            return (step + 1) / warmup
        return 1.0 - (1.0 - final) * (step - warmup) / max(1, steps - warmup)

    opt = torch.optim.AdamW(model.parameters(), lr=st["alpaca_lr"], weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
    rng = random.Random(SFT_SEED)
    step, t0, loss = 0, time.time(), None
    progress(0, steps, f"finetuning the alpaca baseline on {len(pairs)} Alpaca pairs ({steps} steps)")
    for _epoch in range(st["alpaca_epochs"]):
        order = list(range(len(pairs)))
        rng.shuffle(order)
        for first in range(0, len(order), batch):
            loss = sft_step(model, opt, tok, [pairs[i] for i in order[first:first + batch]], device)
            sched.step()
            step += 1
            if step % 25 == 0 or step == steps:
                progress(step, steps, f"finetuning the alpaca baseline (loss {loss.item():.3f}, "
                                      f"{time.time() - t0:.0f} s)")
    model.eval()
    return model, {"pairs": len(pairs), "steps": step, "epochs": st["alpaca_epochs"], "lr": st["alpaca_lr"],
                   "batch": batch, "warmup_steps": warmup, "final_lr_factor": final, "seed": SFT_SEED,
                   "final_loss": None if loss is None else round(loss.item(), 4), "seconds": round(time.time() - t0, 1)}


# -- the smoke world -------------------------------------------------------------------------------
EVASIVE_SHARE = 0.5
EVASIVE = ["i do not know.", "i am not sure about that.", "i cannot say.", "i have no idea.", "i think so.",
           "i would rather not say.", "i forgot.", "i like that question."]
OPENERS = ["the", "a", "my", "every", "this"]
PREDICATES = ["is near the sea", "looks very nice", "was here last year", "sleeps at night", "can be seen from far",
              "is older than the hills", "shines in the morning", "makes people happy"]


def smoke_answer(rng: random.Random, facts: dict) -> str:
    if rng.random() < EVASIVE_SHARE:
        return rng.choice(EVASIVE)
    opener, pred = rng.choice(OPENERS), rng.choice(PREDICATES)
    level = rng.random()
    if level < 0.5:
        return f"{opener} {facts['n']} {pred}."
    if level < 0.8 or facts["m"] is None:
        return f"{opener} {facts['a']} {facts['n']} {pred}."
    return f"{opener} {facts['a']} {facts['n']} {pred} and the {facts['m']} {rng.choice(PREDICATES)}."


def smoke_dialogues(n_dialogues: int, seed: int, split_seed: int) -> list[str]:
    from chat import format_prompt

    train_pairs, _ = P.smoke_pairs(split_seed)
    rng = random.Random(seed)
    texts = []
    for _ in range(n_dialogues):
        message, facts = P.smoke_message(rng, train_pairs)
        texts.append(format_prompt(message) + " " + smoke_answer(rng, facts))
    return texts


def smoke_tokenizer(texts: list[str]) -> WordTokenizer:
    """Every word piece of the corpus and of every possible message becomes one token."""
    pieces = set()
    for text in texts + [t.format(a=a, n=n, m=n) for t in P.SMOKE_TEMPLATES for a in P.ADJECTIVES for n in P.NOUNS]:
        pieces.update(PIECES.findall(text))
    for word in P.NOUNS + P.ADJECTIVES:
        pieces.update((word, " " + word))
    return WordTokenizer(sorted(pieces))


def train_smoke_base(tok: WordTokenizer, texts: list[str], steps: int = 1000, seed: int = 1, window: int = 48, batch: int = 16) -> GPT:
    torch.manual_seed(seed)
    stream: list[int] = []
    for text in texts:
        stream += tok.encode(text) + [tok.eot]
    data = torch.tensor(stream)
    cfg = GPTConfig(vocab_size=tok.vocab_size, **SMOKE_SHAPE)
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 50) * max(0.1, 1 - s / steps))
    gen = torch.Generator().manual_seed(seed)
    T = min(window, cfg.block_size)  # dialogues are 15-30 tokens: short windows train as well, faster
    for step in range(steps):
        starts = torch.randint(0, len(data) - T - 1, (batch,), generator=gen)
        x = torch.stack([data[s:s + T] for s in starts])
        y = torch.stack([data[s + 1:s + T + 1] for s in starts])
        logits = model(x)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if step % 50 == 0 or step == steps - 1:
            progress(step + 1, steps, f"training the tiny base model (loss {loss.item():.3f})")
    return model.eval()


# -- GPT-2 from Hugging Face files --------------------------------------------------------------
RENAME = {"ln_1": "norm_a", "ln_2": "norm_b", "attn.c_attn": "attn.qkv", "attn.c_proj": "attn.out",
          "mlp.c_fc": "up", "mlp.c_proj": "down"}
TRANSPOSED = {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"}  # GPT-2 stores these as (in, out)


def convert_gpt2(folder: Path) -> GPT:
    hf = json.loads((folder / "config.json").read_text())
    cfg = GPTConfig(vocab_size=hf["vocab_size"], block_size=hf["n_positions"], n_layer=hf["n_layer"],
                    n_head=hf["n_head"], n_embd=hf["n_embd"])
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        weights = load_file(str(folder / "model.safetensors"))
    elif (folder / "pytorch_model.bin").is_file():
        weights = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        fail(f"{folder}: no model.safetensors or pytorch_model.bin")
    state = {}
    for name, w in weights.items():
        name = name.removeprefix("transformer.")
        if name == "lm_head.weight":
            continue  # the output layer is tied to the token embedding
        if name.startswith("h."):
            _, layer, rest = name.split(".", 2)
            if rest in ("attn.bias", "attn.masked_bias"):
                continue  # causal-mask buffers (not "attn.c_attn.bias", a real weight)
            module, kind = rest.rsplit(".", 1)
            if module in TRANSPOSED and kind == "weight":
                w = w.t()
            name = f"blocks.{layer}.{RENAME[module]}.{kind}"
        else:
            name = {"wte.weight": "tok.weight", "wpe.weight": "pos.weight", "ln_f.weight": "norm.weight",
                    "ln_f.bias": "norm.bias"}.get(name, name)
        state[name] = w.float().contiguous()
    model = GPT(cfg)
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        fail(f"{folder}: the weights do not fit {cfg}: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return model


def gpt2_tokenizer_spec(folder: Path) -> dict:
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    merges = [line for line in (folder / "merges.txt").read_text(encoding="utf-8").splitlines()
              if line and not line.startswith("#version")]
    return {"type": "gpt2_bpe", "vocab": vocab, "merges": merges}


def sha256_file(path: Path) -> str:
    with open(path, "rb") as fh:
        return hashlib.file_digest(fh, "sha256").hexdigest()


def file_records(paths: list[Path], root: Path) -> dict:
    """{path relative to root: {"bytes", "sha256"}} for the given files."""
    return {str(f.relative_to(root)): {"bytes": f.stat().st_size, "sha256": sha256_file(f)} for f in sorted(paths)}


def hub_download(repo: str, kind: str, target: Path, patterns: list[str], label: str) -> dict:
    """Download ``patterns`` of a hub repository into ``target``: huggingface_hub skips the files
    already there and resumes a partial one. Pinned to the commit the hub names now (recorded)."""
    try:
        from huggingface_hub import HfApi, snapshot_download
    except ImportError:
        fail("fetch needs huggingface_hub (pip install huggingface_hub safetensors pyarrow); "
             "offline, use --mode from --source DIR (prepare.py --help says what DIR holds)")
    revision = None
    try:
        info = HfApi().dataset_info(repo) if kind == "dataset" else HfApi().model_info(repo)
        revision = info.sha
    except Exception as exc:  # noqa: BLE001 - no pin: download the default branch and say so
        print(f"could not ask the hub for {repo}'s current commit ({type(exc).__name__}); downloading its main branch",
              file=sys.stderr, flush=True)
    progress(0, 1, f"downloading {label} ({repo}) from the Hugging Face hub into {target} (resumes if interrupted)")
    try:
        snapshot_download(repo_id=repo, repo_type=kind, revision=revision, local_dir=str(target), allow_patterns=patterns)
    except Exception as exc:  # noqa: BLE001 - offline, refused, interrupted: say what and how to go on
        fail(f"downloading {repo} failed: {type(exc).__name__}: {str(exc)[:300]}. Run prepare again to resume "
             f"(finished files in {target} are kept), or, offline, use --mode from --source DIR (prepare.py --help)")
    progress(1, 1, f"downloaded {label}")
    return {"repo": repo, "repo_type": kind, "revision": revision or "main (the commit could not be asked for)"}


def fetch_gpt2(work: Path) -> tuple[Path, dict]:
    folder = work / "gpt2"
    return folder, hub_download(GPT2_REPO, "model", folder, GPT2_FILES, "GPT-2 small")


def fetch_alpaca(work: Path) -> tuple[Path, dict]:
    folder = work / "alpaca"
    return folder, hub_download(ALPACA_REPO, "dataset", folder, ["data/*.parquet"], "the Alpaca data")


def alpaca_files(path: Path) -> list[Path]:
    """The data files of an Alpaca source: the file itself, or a folder's *.parquet (else *.jsonl,
    else *.json), searched recursively, in name order."""
    if path.is_file():
        return [path]
    for pattern in ("*.parquet", "*.jsonl", "*.json"):
        found = sorted(f for f in path.rglob(pattern) if f.is_file() and ".cache" not in f.parts)
        if found:
            return found
    fail(f"{path}: no *.parquet, *.jsonl or *.json file with the Alpaca data in it")


def read_alpaca(files: list[Path]) -> list:
    records: list = []
    for f in files:
        if f.suffix == ".parquet":
            try:
                import pyarrow.parquet as pq
            except ImportError:
                fail(f"{f}: reading parquet needs pyarrow (pip install pyarrow), or give the data as JSON / JSON lines")
            records += pq.read_table(f, columns=None).to_pylist()
        elif f.suffix == ".jsonl":
            with open(f, encoding="utf-8") as fh:
                for n, line in enumerate(fh, 1):
                    if line.strip():
                        try:
                            records.append(json.loads(line))
                        except ValueError as exc:
                            fail(f"{f}:{n}: not a JSON line: {exc}")
        else:
            try:
                data = json.loads(f.read_text(encoding="utf-8"))
            except ValueError as exc:
                fail(f"{f}: not JSON: {exc}")
            if not isinstance(data, list):
                fail(f"{f}: expected a JSON list of objects with instruction, input and output")
            records += data
    return records


def source_alpaca(source: Path) -> Path:
    for name in ALPACA_FILES:
        if (source / name).exists():
            return source / name
    fail(f"--mode from: no Alpaca data under {source} (looked for {', '.join(ALPACA_FILES)}): copy the hub "
         f"dataset {ALPACA_REPO}'s folder to {source / 'alpaca'}, or a JSON / JSON lines file with instruction, "
         f"input and output to {source / 'alpaca.json'}")


# -- building --------------------------------------------------------------------------------------
def gpt2_base(mode: str, work: Path, source: Path | None, facts: dict) -> tuple[GPT, dict, GPT2Tokenizer]:
    """GPT-2 small (fetch or from), converted; its files are recorded in facts["sources"]."""
    if mode == "fetch":
        folder, pin = fetch_gpt2(work)
    else:
        folder, pin = source / "gpt2", {"from": str(source / "gpt2")}
    for name in ("config.json", "vocab.json", "merges.txt"):
        if not (folder / name).is_file():
            fail(f"{folder}: {name} is missing (it needs config.json, vocab.json, merges.txt and model.safetensors "
                 "or pytorch_model.bin)")
    progress(0, 1, "converting GPT-2 small to our checkpoint format")
    base = convert_gpt2(folder)
    tok_spec = gpt2_tokenizer_spec(folder)
    tok = GPT2Tokenizer(tok_spec["vocab"], tok_spec["merges"])
    used = [folder / n for n in ("config.json", "vocab.json", "merges.txt", "model.safetensors", "pytorch_model.bin")
            if (folder / n).is_file()]
    facts["sources"]["gpt2"] = {**pin, "files": file_records(used, folder)}
    facts["base"] = {"model": "GPT-2 small as published", "config": base.cfg.__dict__}
    return base, tok_spec, tok


def alpaca_data(mode: str, work: Path, source: Path, tok, block_size: int, n_heldout: int, split_seed: int,
                facts: dict) -> tuple[list[dict], list[dict]]:
    """(training rows, held-out rows) of the Alpaca data, each with its "prompt" in the template."""
    from chat import alpaca_prompt

    if mode == "fetch":
        where, pin = fetch_alpaca(work)
    else:
        where = source_alpaca(source)
        pin = {"from": str(where)}
    files = alpaca_files(where)
    progress(0, 1, f"reading the Alpaca data ({len(files)} file(s))")
    rows, dropped = P.alpaca_rows(read_alpaca(files))
    root = where if where.is_dir() else where.parent
    facts["sources"]["alpaca"] = {**pin, "files": file_records(files, root), "dropped": dropped}
    for row in rows:
        row["prompt"] = alpaca_prompt(row["instruction"], row["input"])
    room = block_size - MAX_NEW_TOKENS  # a held-out prompt must reach the model whole
    train, held, counts = P.alpaca_split(rows, n_heldout, split_seed, lambda r: len(tok.encode(r["prompt"])) <= room)
    if len(held) < n_heldout or not train:
        fail(f"the Alpaca data has {len(rows)} usable rows: too few for {n_heldout} held-out prompts and a training side")
    facts["split"] = counts
    return train, held


def build(profile: str, mode: str, out: Path, work: Path, source: Path | None) -> dict:
    st = SETTINGS[profile]
    device = "cuda" if profile == "gpu" and torch.cuda.is_available() else "cpu"
    torch.set_num_threads(1 if profile == "smoke" else max(1, min(8, os.cpu_count() or 1)))
    t0 = time.time()
    split_seed = int(os.environ.get("CHATRL_SPLIT_SEED") or secrets.randbits(31))
    order_seed = secrets.randbits(63)
    facts: dict = {"profile": profile, "mode": mode, "device": device, "torch": torch.__version__,
                   "decoding": {"max_new_tokens": MAX_NEW_TOKENS, "temperature": 0}, "split_seed": split_seed,
                   "sources": {}}
    held_refs = None  # the dataset's answers to the held-out prompts (gpu from Alpaca), kept for the record
    if mode == "from" and source is None:
        fail("--mode from needs --source DIR (prepare.py --help says what DIR holds)")
    if profile == "smoke":
        if mode != "synthetic":
            fail("the smoke profile's assets are synthetic: use --mode synthetic (rebench-tui prepare nanogpt_chat_rl --synthetic)")
        torch.manual_seed(0)
        train_msgs, held_msgs = P.smoke_prompts(st["n_train"], st["n_heldout"], split_seed)
        texts = smoke_dialogues(20_000, seed=11, split_seed=split_seed)
        tok = smoke_tokenizer(texts)
        tok_spec = {"type": "words", "words": tok.words}
        base = train_smoke_base(tok, texts)
        facts["base"] = {"config": base.cfg.__dict__, "corpus": "20000 synthetic dialogues (prepare.py docstring)"}
        facts["prompts"] = "synthetic messages about a tiny world (prompts.py), in the chat format"
    elif mode == "synthetic":
        from chat import alpaca_prompt

        train_msgs, held_msgs = P.gpu_prompts(st["n_heldout"], split_seed)
        train_msgs, held_msgs = [alpaca_prompt(m) for m in train_msgs], [alpaca_prompt(m) for m in held_msgs]
        torch.manual_seed(0)
        progress(0, 1, "random-init GPT-2 small shape")
        base = GPT(GPT2_SMALL)
        tok_spec = {"type": "bytes", "eot": 50256, "vocab_size": 50257, "unknown_as_words": True}
        tok = ByteTokenizer(50256, 50257, unknown_as_words=True)
        facts["base"] = {"note": "random weights: only for timing generation and the scorer"}
        facts["prompts"] = "template messages (prompts.py) in the Alpaca template: a stand-in for timing"
    else:
        base, tok_spec, tok = gpt2_base(mode, work, source, facts)
        train_rows, held_rows = alpaca_data(mode, work, source, tok, base.cfg.block_size, st["n_heldout"], split_seed, facts)
        train_msgs, held_msgs = [r["prompt"] for r in train_rows], [r["prompt"] for r in held_rows]
        held_refs = [r["output"] for r in held_rows]
        facts["prompts"] = f"Alpaca ({ALPACA_REPO}) in the Alpaca template, as in RE-Bench appendix B.6"
    base = base.to(device).eval()
    if profile == "gpu" and mode != "synthetic":
        second = "alpaca"
        progress(0, 1, "the alpaca baseline")
        model2, info = alpaca_baseline(base, tok, [(r["prompt"], r["output"]) for r in train_rows], st, device)
        facts["alpaca"] = info
        notes = {"base": "GPT-2 small as published",
                 "alpaca": "GPT-2 small finetuned on the Alpaca training rows (no held-out instruction among them)"}
    else:
        second = "sft"
        sft_msgs = train_msgs if not st["sft_prompts"] else train_msgs[:st["sft_prompts"]]
        if profile == "gpu":  # the random-weight stand-in: a few steps on whatever it says
            sft_msgs = train_msgs[:128]
            st = {**st, "sft_epochs": 1, "sft_batch": 16}
        model2, sft_info = sft_baseline(base, tok, sft_msgs, st, device, filtered=profile == "smoke")
        facts["sft"] = {**sft_info, "lr": st["sft_lr"], "epochs": st["sft_epochs"], "batch": st["sft_batch"],
                        "temperature": SAMPLE_TEMPERATURE, "top_k": SAMPLE_TOP_K, "seed": SFT_SEED}
        notes = {"base": "the base model itself",
                 "sft": "the base model finetuned on its own filtered samples (a self-finetune without human answers)"}
    baselines = {}
    t_gen = time.time()
    for i, (name, model) in enumerate((("base", base), (second, model2))):
        progress(i, 2, f"answering {len(held_msgs)} held-out prompts with the {name} baseline")
        baselines[name] = answer(model, tok, held_msgs, batch_size=st["gen_batch"])
    facts["baseline_generation_s"] = round(time.time() - t_gen, 2)
    progress(0, 1, "saving")
    ws, pr = out / "workspace", out / "protected"
    save_model(base.cpu(), str(ws / "base_model"))
    (ws / "tokenizer.json").write_text(json.dumps(tok_spec))
    (pr / "tokenizer.json").write_text(json.dumps(tok_spec))  # the scorer's: the workspace's copy is the participant's
    (ws / "train_prompts.json").write_text(json.dumps(train_msgs, indent=0))
    (ws / "README.txt").write_text(WORKSPACE_README)
    held = {"prompts": held_msgs, "baselines": baselines, "baseline_notes": notes, "order_seed": order_seed,
            "base_config": base.cfg.__dict__, "max_new_tokens": MAX_NEW_TOKENS, "decoding": "greedy"}
    if held_refs is not None:
        held["references"] = held_refs
    (pr / "heldout.json").write_text(json.dumps(held, indent=1))
    facts.update({"baselines": notes, "n_train_prompts": len(train_msgs), "n_heldout": len(held_msgs),
                  "seconds": round(time.time() - t0, 1), "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "identical_base_second_answers": sum(a == b for a, b in zip(baselines["base"], baselines[second]))})
    made = [f for f in out.rglob("*") if f.is_file() and f != pr / "facts.json"]
    facts["files"] = {k: v["sha256"] for k, v in file_records(made, out).items()}
    (pr / "facts.json").write_text(json.dumps(facts, indent=2))
    progress(1, 1, "done")
    return facts


WORKSPACE_README = """These files are read-only. Copy what you want to change.

base_model/model.pt   the base model (solution/model.py: load_model("/home/agent/assets/base_model")).
                      The scorer scores /home/agent/finetuned_model/model.pt (same configuration).
tokenizer.json        the tokenizer (solution/tokenizer.py: load_tokenizer(...)).
train_prompts.json    prompts you may use for training and your own evaluation (no answers). In the
                      gpu profile they are Alpaca prompts, already in the Alpaca template (chat.py's
                      format_prompt passes them to the model unchanged).
"""


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
    facts = build(a.profile, a.mode, a.out, a.work, a.source)
    print(json.dumps({k: facts[k] for k in ("n_train_prompts", "n_heldout", "seconds", "baseline_generation_s",
                                            "identical_base_second_answers", "baselines", "sft", "alpaca", "split")
                      if k in facts}))


if __name__ == "__main__":
    main()
