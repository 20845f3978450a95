"""Builds fix_embedding's assets (see environments/README.md for the command line).

workspace/ (the participant's, read-only at /home/agent/assets):
    large_model.pth          the large model with its token-embedding rows permuted
    small_correct_model.pth  a small model of the same tokenizer, uncorrupted
    train.bin                training tokens (uint16)
protected/ (held out, /protected/assets):
    val.bin                  validation tokens (uint16), never shown to the participant
    config.json              the architecture the scorer loads submissions into
    secret.json              what decides the score: the permutation, the scorer's evaluation seed
                             and (synthetic) the corpus and training seeds
    facts.json               how the assets were made (losses measured here, sources)

Every secret is drawn here, at prepare time, from the operating system's random source
(``secrets``): nothing in the repository reproduces the permutation, the evaluation batches or
(smoke) the synthetic corpus and its models. They are written only under protected/.

Modes: fetch (Hugging Face hub gpt2-xl and gpt2, OpenWebText via `datasets`, tokenized with
tiktoken's GPT-2 encoding: as in the paper, the whole train split, about 8 million documents and
9 billion tokens (18 GB), less the first 10,000 documents, which are held out; resumable, with
progress; hours of CPU; REBENCH_OWT_TRAIN_DOCS=N takes N documents instead), from (the same from local files: SOURCE/gpt2-xl/ and SOURCE/gpt2/
each with config.json and model.safetensors or pytorch_model.bin, plus SOURCE/train.bin and
SOURCE/val.bin or SOURCE/openwebtext/*.txt|*.jsonl), synthetic (smoke: a structured synthetic
corpus and two tiny models trained on it here; gpu: full-size shapes with random weights).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import secrets
import sys
import time
from pathlib import Path

import numpy as np
import torch

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "solution"))
from data import batch, load_tokens  # noqa: E402
from model import GPT, GPTConfig, save_checkpoint  # noqa: E402

LARGE_GPU = GPTConfig(vocab_size=50257, block_size=1024, n_layer=48, n_head=25, n_embd=1600)  # GPT-2 XL shape
SMALL_GPU = GPTConfig(vocab_size=50257, block_size=1024, n_layer=12, n_head=12, n_embd=768)  # GPT-2 small shape
LARGE_SMOKE = GPTConfig(vocab_size=256, block_size=64, n_layer=2, n_head=2, n_embd=64)
SMALL_SMOKE = GPTConfig(vocab_size=256, block_size=64, n_layer=1, n_head=2, n_embd=32)
# The paper's participant gets OpenWebText's train split whole, and the model is scored on an IID held-out
# split: by default the first OWT_VAL_DOCS documents are held out and every later one trains. A number in
# REBENCH_OWT_TRAIN_DOCS keeps the former, smaller layout (that many documents train, the next ones are held out).
_TRAIN_DOCS = os.environ.get("REBENCH_OWT_TRAIN_DOCS", "all").strip().lower()
OWT_TRAIN_DOCS: int | None = None if _TRAIN_DOCS == "all" else int(_TRAIN_DOCS)
OWT_VAL_DOCS = int(os.environ.get("REBENCH_OWT_VAL_DOCS", "10000"))
OWT_DOCS = 8_013_769  # documents in Skylion007/openwebtext's train split (for progress only)


def progress(done: float, total: float, label: str) -> None:
    print(f"PROGRESS {done} {total} {label}", flush=True)


def fail(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
    sys.exit(1)


def fresh_seed() -> int:
    """A seed from the operating system's random source (never a constant in the repository)."""
    return secrets.randbits(63)


def draw_secret() -> dict:
    """The score-deciding secrets, drawn now (the permutation itself is drawn in permute_embedding)."""
    return {"eval_seed": fresh_seed()}


def permute_embedding(model: GPT, secret: dict) -> GPT:
    """Shuffles the token-embedding rows (the tied output layer with them): afterwards row i holds
    the original row perm[i]. The permutation is kept in ``secret`` (written under protected/)."""
    rng = np.random.default_rng(secrets.randbits(128))
    perm = torch.from_numpy(rng.permutation(model.cfg.vocab_size))
    with torch.no_grad():
        model.wte.weight.copy_(model.wte.weight[perm])
    secret["permutation"] = perm.tolist()
    return model


def write_tokens(path: Path, tokens: np.ndarray) -> None:
    tokens.astype(np.uint16).tofile(path)


# -- synthetic ----------------------------------------------------------------------------
def synthetic_corpus(n_tokens: int, vocab: int, seed: int) -> np.ndarray:
    """A first-order Markov chain in which each token has 16 likely successors (about 2.6 nats a
    token), so a small model can learn it and a corrupted one visibly cannot."""
    rng = np.random.default_rng(seed)
    succ = np.stack([rng.choice(vocab, 16, replace=False) for _ in range(vocab)])
    weights = rng.dirichlet(np.full(16, 0.8), size=vocab)
    cum = np.cumsum(weights, axis=1)
    out = np.empty(n_tokens, dtype=np.int64)
    tok = int(rng.integers(vocab))
    draws = rng.random(n_tokens)
    for i in range(n_tokens):
        out[i] = tok
        tok = int(succ[tok, min(15, int(np.searchsorted(cum[tok], draws[i])))])
    return out


def train_tiny(cfg: GPTConfig, tokens: np.ndarray, steps: int, label: str, seed: int) -> GPT:
    torch.manual_seed(seed)
    model = GPT(cfg)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    for step in range(steps):
        x, y = batch(tokens, 16, cfg.block_size, gen)
        loss = model.loss(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if step % 25 == 0 or step == steps - 1:
            progress(step + 1, steps, f"training the {label} model (loss {loss.item():.3f})")
    return model


@torch.no_grad()
def eval_loss(model: GPT, tokens: np.ndarray, batches: int = 20) -> float:
    gen = torch.Generator().manual_seed(0)
    return sum(model.loss(*batch(tokens, 8, model.cfg.block_size, gen)).item() for _ in range(batches)) / batches


def build_synthetic(profile: str, out: Path) -> dict:
    torch.set_num_threads(min(4, torch.get_num_threads()))  # OMP_NUM_THREADS, where set, is the most it may take
    secret = draw_secret()
    # The corpus (validation split included) and both models come from fresh seeds too: with fixed
    # ones, anyone with this file could regenerate the held-out text or the uncorrupted model.
    secret.update(corpus_seed=fresh_seed(), large_seed=fresh_seed(), small_seed=fresh_seed())
    if profile == "smoke":
        large_cfg, small_cfg = LARGE_SMOKE, SMALL_SMOKE
        progress(0, 1, "generating the synthetic corpus")
        corpus = synthetic_corpus(1_200_000, large_cfg.vocab_size, seed=secret["corpus_seed"])
        train, val = corpus[:1_000_000], corpus[1_000_000:]
        large = train_tiny(large_cfg, train, 600, "large", seed=secret["large_seed"])
        small = train_tiny(small_cfg, train, 300, "small", seed=secret["small_seed"])
        facts = {"uncorrupted_val_loss": eval_loss(large, val), "small_val_loss": eval_loss(small, val)}
    else:  # full-size shapes, random weights: for measuring the scorer where the hub cannot be reached
        large_cfg, small_cfg = LARGE_GPU, SMALL_GPU
        rng = np.random.default_rng(secret["corpus_seed"])
        progress(0, 3, "random tokens")
        train = rng.integers(0, large_cfg.vocab_size, 20_000_000)
        val = rng.integers(0, large_cfg.vocab_size, 2_000_000)
        progress(1, 3, "random-init GPT-2 XL shape (1.5B parameters)")
        torch.manual_seed(secret["large_seed"])
        large = GPT(large_cfg)
        progress(2, 3, "random-init GPT-2 small shape")
        small = GPT(small_cfg)
        facts = {"note": "random weights and random tokens: only for timing the scorer"}
    write_tokens(out / "workspace" / "train.bin", train)
    write_tokens(out / "protected" / "val.bin", val)
    permute_embedding(large, secret)
    if profile == "smoke":
        facts["corrupted_val_loss"] = eval_loss(large, val)
    return finish(out, large, small, facts, secret)


# -- real assets ----------------------------------------------------------------------------
HF_TO_OURS = {"ln_1": "ln1", "ln_2": "ln2", "attn.c_attn": "attn.qkv", "attn.c_proj": "attn.proj",
              "mlp.c_fc": "fc", "mlp.c_proj": "out"}
CONV1D = ("attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj")  # stored (in, out) in GPT-2 checkpoints


def load_hf_gpt2(folder: Path) -> GPT:
    """A GPT-2 checkpoint in Hugging Face layout (config.json + model.safetensors or pytorch_model.bin)."""
    cfg_path = folder / "config.json"
    if not cfg_path.is_file():
        fail(f"{folder}: no config.json (expected a Hugging Face GPT-2 folder)")
    hf = json.loads(cfg_path.read_text())
    cfg = GPTConfig(vocab_size=hf["vocab_size"], block_size=hf["n_positions"], n_layer=hf["n_layer"],
                    n_head=hf["n_head"], n_embd=hf["n_embd"])
    if (folder / "model.safetensors").is_file():
        from safetensors.torch import load_file

        sd = load_file(str(folder / "model.safetensors"))
    elif (folder / "pytorch_model.bin").is_file():
        sd = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
    else:
        fail(f"{folder}: neither model.safetensors nor pytorch_model.bin")
    ours = {}
    for key, value in sd.items():
        key = key.removeprefix("transformer.")
        if key.endswith((".attn.bias", ".attn.masked_bias")) or key == "lm_head.weight":
            continue  # causal-mask buffers; the output layer is tied to wte
        if key.startswith("h."):
            _, i, rest = key.split(".", 2)
            name, param = rest.rsplit(".", 1)
            if name in CONV1D and param == "weight":
                value = value.t()
            key = f"blocks.{i}.{HF_TO_OURS[name]}.{param}"
        ours[key] = value.float().contiguous()
    model = GPT(cfg)
    missing, unexpected = model.load_state_dict(ours, strict=False)
    if missing or unexpected:
        fail(f"{folder}: weights do not fit a GPT-2 of {cfg}: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return model


def fetch_models(work: Path) -> tuple[Path, Path]:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        fail("fetch needs huggingface_hub (pip install huggingface_hub safetensors); on an offline machine use --from DIR")
    folders = []
    for i, name in enumerate(("gpt2-xl", "gpt2")):
        progress(i, 2, f"downloading {name} from the Hugging Face hub (resumes if interrupted)")
        folders.append(Path(snapshot_download(repo_id=name, allow_patterns=["config.json", "model.safetensors"],
                                              local_dir=str(work / name))))
    return folders[0], folders[1]


def tokenize_stream(docs, out_path: Path, state_path: Path, n_docs: int | None, label: str,
                    expected: int | None = None) -> None:
    """Appends GPT-2 tokens of ``n_docs`` documents (None: every one) to out_path; resumable through
    state_path (documents and tokens committed so far). ``expected``: the count progress is shown
    against when n_docs is None."""
    import tiktoken

    enc = tiktoken.get_encoding("gpt2")
    state = json.loads(state_path.read_text()) if state_path.is_file() else {"docs": 0, "tokens": 0}
    total = n_docs or expected or 0
    with open(out_path, "ab") as fh:
        fh.truncate(state["tokens"] * 2)
        buf: list[int] = []
        seen = 0

        def commit() -> None:
            nonlocal buf, state
            np.asarray(buf, dtype=np.uint16).tofile(fh)
            fh.flush()
            os.fsync(fh.fileno())
            state = {"docs": seen, "tokens": state["tokens"] + len(buf)}
            state_path.write_text(json.dumps(state))
            buf = []
            progress(seen, max(total, seen), label)

        for i, text in enumerate(docs):
            if n_docs is not None and i >= n_docs:
                break
            seen = i + 1
            if i < state["docs"]:
                continue
            buf.extend(enc.encode_ordinary(text))
            buf.append(enc.eot_token)
            if seen % 1000 == 0:
                commit()
        if buf:
            commit()


def fetch_corpus(work: Path) -> tuple[Path, Path]:
    try:
        from datasets import load_dataset
        import tiktoken  # noqa: F401
    except ImportError:
        fail("fetch needs datasets and tiktoken (pip install datasets tiktoken); on an offline machine use --from DIR")
    def texts(skip: int = 0):
        ds = load_dataset("Skylion007/openwebtext", split="train", streaming=True)
        return (row["text"] for row in (ds.skip(skip) if skip else ds))

    if OWT_TRAIN_DOCS is None:  # the paper's layout: the first OWT_VAL_DOCS held out, the whole rest trains
        train, val = work / "train_all.bin", work / "val_first.bin"
        tokenize_stream(texts(), val, work / "val_first.state.json", OWT_VAL_DOCS, "tokenizing OpenWebText (held out)")
        tokenize_stream(texts(OWT_VAL_DOCS), train, work / "train_all.state.json", None,
                        f"tokenizing OpenWebText (train, about {OWT_DOCS - OWT_VAL_DOCS:,} documents)",
                        expected=OWT_DOCS - OWT_VAL_DOCS)
        return train, val
    train, val = work / "train.bin", work / "val.bin"
    # The first OWT_TRAIN_DOCS documents train, the next OWT_VAL_DOCS are held out.
    tokenize_stream(texts(), train, work / "train.state.json", OWT_TRAIN_DOCS, "tokenizing OpenWebText (train)")
    tokenize_stream(texts(OWT_TRAIN_DOCS), val, work / "val.state.json", OWT_VAL_DOCS, "tokenizing OpenWebText (validation)")
    return train, val


def corpus_from(source: Path, work: Path) -> tuple[Path, Path]:
    if (source / "train.bin").is_file() and (source / "val.bin").is_file():
        return source / "train.bin", source / "val.bin"
    files = sorted((source / "openwebtext").glob("*.txt")) + sorted((source / "openwebtext").glob("*.jsonl"))
    if not files:
        fail(f"{source}: expected train.bin and val.bin (uint16 GPT-2 tokens) or openwebtext/*.txt|*.jsonl")

    def docs():
        for f in files:
            if f.suffix == ".txt":
                yield f.read_text(encoding="utf-8", errors="replace")
            else:
                for line in f.open(encoding="utf-8"):
                    yield json.loads(line)["text"]

    n = sum(1 for _ in docs())
    n_val = max(1, n // 20)
    tokenize_stream(docs(), work / "train.bin", work / "train.state.json", n - n_val, "tokenizing (train)")
    tail = (d for i, d in enumerate(docs()) if i >= n - n_val)
    tokenize_stream(tail, work / "val.bin", work / "val.state.json", n_val, "tokenizing (validation)")
    return work / "train.bin", work / "val.bin"


def build_real(mode: str, out: Path, work: Path, source: Path | None) -> dict:
    if mode == "fetch":
        large_dir, small_dir = fetch_models(work)
        train, val = fetch_corpus(work)
    else:
        if source is None:
            fail("--mode from needs --source DIR")
        large_dir, small_dir = source / "gpt2-xl", source / "gpt2"
        train, val = corpus_from(source, work)
    progress(0, 2, f"converting {large_dir.name}")
    large = load_hf_gpt2(large_dir)
    progress(1, 2, f"converting {small_dir.name}")
    small = load_hf_gpt2(small_dir)
    if large.cfg.vocab_size != small.cfg.vocab_size:
        fail(f"the two models' vocabularies differ: {large.cfg.vocab_size} vs {small.cfg.vocab_size}")
    for src, dest in ((train, out / "workspace" / "train.bin"), (val, out / "protected" / "val.bin")):
        os.link(src, dest) if src.stat().st_dev == dest.parent.stat().st_dev else shutil.copyfile(src, dest)  # 18 GB: streamed
    secret = draw_secret()
    permute_embedding(large, secret)
    corpus = {"mode": mode, "train_docs": "all but the held-out ones" if OWT_TRAIN_DOCS is None else OWT_TRAIN_DOCS,
              "held_out_docs": OWT_VAL_DOCS, "train_tokens": train.stat().st_size // 2, "held_out_tokens": val.stat().st_size // 2}
    if mode == "fetch" and OWT_TRAIN_DOCS is not None:
        corpus["differs_from_paper"] = f"REBENCH_OWT_TRAIN_DOCS={OWT_TRAIN_DOCS}: a part of OpenWebText's train split"
    return finish(out, large, small, {"sources": {"large": str(large_dir), "small": str(small_dir)}, "corpus": corpus},
                  secret)


def finish(out: Path, large: GPT, small: GPT, facts: dict, secret: dict) -> dict:
    progress(0, 2, "saving the corrupted large model")
    save_checkpoint(large, str(out / "workspace" / "large_model.pth"))
    progress(1, 2, "saving the small model")
    save_checkpoint(small, str(out / "workspace" / "small_correct_model.pth"))
    cfg = large.cfg.__dict__
    (out / "protected" / "config.json").write_text(json.dumps(cfg, indent=2))
    secret = {**secret, "note": "drawn at prepare time from the OS random source; row i of large_model.pth's "
                                "token embedding is row permutation[i] of the uncorrupted model's"}
    (out / "protected" / "secret.json").write_text(json.dumps(secret))
    facts = {**facts, "large_config": cfg, "small_config": small.cfg.__dict__, "secrets": "secret.json",
             "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    (out / "protected" / "facts.json").write_text(json.dumps(facts, indent=2))
    progress(2, 2, "done")
    return facts


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
    if a.mode == "synthetic":
        facts = build_synthetic(a.profile, a.out)
    else:
        if a.profile == "smoke":
            fail("the smoke profile's assets are synthetic: use --mode synthetic (rebench-tui prepare fix_embedding --synthetic)")
        facts = build_real(a.mode, a.out, a.work, a.source)
    print(json.dumps({k: v for k, v in facts.items() if "loss" in k}))


if __name__ == "__main__":
    main()
