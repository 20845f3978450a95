"""Builds restricted_mlm's assets (the command line is in environments/README.md).

    python prepare.py --profile {gpu,smoke} --mode {fetch,synthetic,from} --out DIR --work DIR [--source DIR]

Writes
    DIR/workspace/train.bin             training tokens: GPT-2 ids as a flat numpy uint16 array
    DIR/workspace/start_checkpoint.pt   the starting model's weights (solution/model.py loads it)
    DIR/workspace/data_info.json        what the participant may know about the data
    DIR/protected/val.bin               held-out tokens, same format; the scorer samples from it
    DIR/protected/secret.json           the validation seed: which windows of val.bin are scored and
                                        which of their positions are masked (drawn at random here)
    DIR/protected/info.json             how everything was made

Modes
    fetch      OpenWebText through Hugging Face `datasets` (streamed), tokenized with GPT-2's BPE
               (`tiktoken`, else `transformers`); downloads and tokenized chunks are kept in --work
               so an interrupted run resumes. The first documents become val.bin, the next ones
               train.bin: each document goes to val.bin with a probability drawn so that val.bin
               ends up about its size, by a random generator seeded at random here, so which
               documents are held out cannot be recomputed. Then the starting model is trained
               briefly.
    from       The same from files already on this machine, in --source:
                 SOURCE/train.bin and SOURCE/val.bin   already tokenized (uint16 GPT-2 ids, as
                                                       nanoGPT's openwebtext/prepare.py writes them);
                                                       used as they are, cut to this profile's sizes
                                                       (that split is the source's, not secret)
               or documents, read in sorted path order:
                 SOURCE/**/*.txt                       one document per file
                 SOURCE/**/*.jsonl                     one JSON object per line with a "text" field
                 SOURCE/**/*.parquet                   a "text" column (needs pyarrow)
               Documents are split at random as in fetch. They need a GPT-2 tokenizer: SOURCE/tokenizer/ with vocab.json and merges.txt
               (read with `transformers`), or `tiktoken` with its GPT-2 files cached
               (TIKTOKEN_CACHE_DIR), or `transformers` with "gpt2" in the Hugging Face cache.
    synthetic  Offline: a corpus from a hidden Markov model over 256 token ids (32 hidden states
               that tend to persist, each emitting from its own 24 tokens), so that the masked
               tokens are predictable from their neighbours and, less so, from the whole window.
               The mask id 50256 never occurs in it. The model and train.bin come from fixed
               seeds; val.bin is sampled with a seed drawn at random here. smoke: tiny sizes and a tiny starting model
               trained here for a few seconds; gpu: full-size model shapes and a larger corpus,
               the starting model barely trained (for measuring the scorer's speed only).

Sizes: gpu the whole corpus (about 9e9 GPT-2 tokens of OpenWebText, as the paper gives it; hours
of CPU, resumable, about 36 GB of disk while it runs) less 5e6 held-out tokens (environment variables
RMLM_TRAIN_TOKENS=N and RMLM_VAL_TOKENS change them; RMLM_OWT_DATASET names another hub dataset with a "text" column);
smoke 4e6 and 3e5; gpu synthetic 4e7 and 2e6.

Secrets: the validation seed (secret.json), the synthetic val.bin's sampling seed and the
documents' split are drawn from the operating system's random source at every run and written
only under protected/ (which becomes /protected/assets, root:protected 0750): nothing in this
repository lets a participant recompute the scored windows, their masks or the held-out text.
RMLM_SECRET_SEED=N derives all three from N instead, for reproducing a measurement. Everything
else (train.bin, the starting checkpoint) uses fixed seeds: the same on every run.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
from pathlib import Path
from typing import NoReturn

import numpy as np

HERE = Path(__file__).resolve().parent
VOCAB_SIZE = 50257
MASK_ID = 50256
SEQ_LEN = 128

# Token counts and start-model training per profile (environment variables override the sizes).
SIZES = {
    "smoke": {"train": 4_000_000, "val": 300_000},
    # gpu: the whole corpus trains (the paper gives the participant OpenWebText itself), less the held-out tokens;
    # RMLM_TRAIN_TOKENS=N takes N training tokens instead (the former default was 1e9).
    "gpu": {"train": None if os.environ.get("RMLM_TRAIN_TOKENS", "all").strip().lower() == "all"
            else int(os.environ["RMLM_TRAIN_TOKENS"]),
            "val": int(os.environ.get("RMLM_VAL_TOKENS", 5_000_000))},
}
SYNTHETIC_GPU_SIZES = {"train": 40_000_000, "val": 2_000_000}
START_TRAINING = {
    # profile, mode -> model config and training of the starting checkpoint
    ("smoke", "synthetic"): {"config": "tiny", "steps": 30, "batch_size": 8, "lr": 3e-3},
    ("smoke", "from"): {"config": "tiny", "steps": 30, "batch_size": 8, "lr": 3e-3},
    ("smoke", "fetch"): {"config": "tiny", "steps": 30, "batch_size": 8, "lr": 3e-3},
    ("gpu", "synthetic"): {"config": "full", "steps": 20, "batch_size": 32, "lr": 2e-3},
    ("gpu", "from"): {"config": "full", "steps": 300, "batch_size": 64, "lr": 2e-3},
    ("gpu", "fetch"): {"config": "full", "steps": 300, "batch_size": 64, "lr": 2e-3},
}
SEED = 20_250_311  # the public part: the synthetic corpus's model, train.bin and the starting model
OWT_DATASET = os.environ.get("RMLM_OWT_DATASET", "Skylion007/openwebtext")
DOCS_PER_CHUNK = 2_000
OWT_TOKENS_ESTIMATE = 9_000_000_000  # GPT-2 tokens in OpenWebText's train split, about (for progress only)


def progress(done: float, total: float, label: str) -> None:
    print(f"PROGRESS {done} {total} {label}", flush=True)


def say(text: str) -> None:
    print(text, flush=True)


def fail(message: str) -> NoReturn:
    print(f"prepare.py: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


# -- synthetic ------------------------------------------------------------------------------
class HiddenMarkovCorpus:
    """32 hidden states; each stays with probability 0.5 or moves to one of 4 successors, and
    emits one of its 24 tokens (Dirichlet(0.5) weights) out of 256 ids spread over GPT-2's range.
    (Measured with the forward-backward algorithm: the best possible masked-token loss is about
    3.15 nats, score ln(3.15 - 1.5) = 0.50; token frequencies alone give about 5.0.)"""

    STATES, SUCCESSORS, STAY, EMITS, IDS = 32, 4, 0.5, 24, 256

    def __init__(self, seed: int) -> None:
        rng = np.random.default_rng(seed)
        S, K, E = self.STATES, self.SUCCESSORS, self.EMITS
        self.ids = rng.choice(MASK_ID, size=self.IDS, replace=False).astype(np.uint16)  # never the mask id
        others = np.stack([rng.choice(np.delete(np.arange(S), s), K, replace=False) for s in range(S)])
        self.next_states = np.concatenate([np.arange(S)[:, None], others], axis=1)
        probs = np.concatenate([np.full((S, 1), self.STAY), (1 - self.STAY) * rng.dirichlet(np.ones(K), size=S)], axis=1)
        self.next_cum = np.cumsum(probs, axis=1)
        self.emit_tokens = np.stack([rng.choice(self.IDS, E, replace=False) for _ in range(S)])
        self.emit_cum = np.cumsum(rng.dirichlet(np.full(E, 0.5), size=S), axis=1)

    def sample(self, n_tokens: int, seed: int, label: str, doc_len: int = 1024, chains: int = 8192) -> np.ndarray:
        """n_tokens ids: independent documents of doc_len tokens, generated `chains` at a time."""
        rng = np.random.default_rng(seed)
        out = np.empty(n_tokens, dtype=np.uint16)
        filled = 0
        while filled < n_tokens:
            n = min(chains, -(-(n_tokens - filled) // doc_len))
            state = rng.integers(self.STATES, size=n)
            block = np.empty((n, doc_len), dtype=np.uint16)
            for t in range(doc_len):
                pick = (rng.random(n)[:, None] > self.emit_cum[state]).sum(axis=1).clip(max=self.EMITS - 1)
                block[:, t] = self.ids[self.emit_tokens[state, pick]]
                move = (rng.random(n)[:, None] > self.next_cum[state]).sum(axis=1).clip(max=self.SUCCESSORS)
                state = self.next_states[state, move]
            flat = block.reshape(-1)[: n_tokens - filled]
            out[filled: filled + len(flat)] = flat
            filled += len(flat)
            progress(filled, n_tokens, label)
        return out


def draw_secrets() -> dict:
    """The seeds that decide what is held out and what is scored: random, unless
    RMLM_SECRET_SEED pins them (for reproducing a measurement)."""
    pinned = os.environ.get("RMLM_SECRET_SEED")
    if pinned is not None:
        rng = np.random.default_rng([int(pinned), 0x5EC])
        return {f: int(rng.integers(0, 2**62)) for f in ("val_seed", "val_sample_seed", "split_seed")} | {"pinned": True}
    return {f: secrets.randbits(62) for f in ("val_seed", "val_sample_seed", "split_seed")} | {"pinned": False}


def build_synthetic(profile: str, out: Path, secret: dict) -> dict:
    sizes = SIZES["smoke"] if profile == "smoke" else SYNTHETIC_GPU_SIZES
    corpus = HiddenMarkovCorpus(SEED)
    corpus.sample(sizes["train"], SEED + 1, "synthetic train.bin").tofile(out / "workspace" / "train.bin")
    corpus.sample(sizes["val"], secret["val_sample_seed"], "synthetic val.bin").tofile(out / "protected" / "val.bin")
    return {"source": "synthetic hidden Markov model (32 states, 256 token ids)", "seed": SEED,
            "train_tokens": sizes["train"], "val_tokens": sizes["val"]}


# -- tokenizing documents -------------------------------------------------------------------
def gpt2_tokenizer(source: Path | None = None):
    """A function list[str] -> list[list[int]] with GPT-2's BPE (no special tokens)."""
    local = source / "tokenizer" if source is not None else None
    if local is not None and (local / "vocab.json").is_file() and (local / "merges.txt").is_file():
        try:
            from transformers import GPT2TokenizerFast
        except ImportError:
            fail(f"{local} holds a GPT-2 tokenizer, which needs the `transformers` package: pip install transformers")
        tok = GPT2TokenizerFast.from_pretrained(str(local))
        return lambda texts: tok(texts, add_special_tokens=False)["input_ids"]
    try:
        import tiktoken
    except ImportError:
        tiktoken = None
    if tiktoken is not None:
        try:
            enc = tiktoken.get_encoding("gpt2")
        except Exception as exc:  # noqa: BLE001 - offline without a cache
            fail(f"tiktoken could not load the GPT-2 encoding ({exc}); on an offline machine set TIKTOKEN_CACHE_DIR "
                 "to a folder with its cached files, or put vocab.json and merges.txt in SOURCE/tokenizer/")
        return lambda texts: enc.encode_ordinary_batch(texts)
    try:
        from transformers import GPT2TokenizerFast
    except ImportError:
        fail("tokenizing text needs `tiktoken` (pip install tiktoken) or `transformers` (pip install transformers)")
    tok = GPT2TokenizerFast.from_pretrained("gpt2")
    return lambda texts: tok(texts, add_special_tokens=False)["input_ids"]


def encode_docs(encode, texts: list[str]) -> np.ndarray:
    """Documents joined as nanoGPT does: each followed by <|endoftext|> (50256, also the mask id)."""
    ids = encode(texts)
    flat = np.fromiter((t for doc in ids for t in (*doc, MASK_ID)), dtype=np.uint16,
                       count=sum(len(d) + 1 for d in ids))
    return flat


def split_documents(tokens: np.ndarray) -> list[np.ndarray]:
    """Documents of a token stream, each with the <|endoftext|> (50256) that ends it."""
    ends = np.flatnonzero(tokens == MASK_ID) + 1
    return [d for d in np.split(tokens, ends) if len(d)]


class SplitWriter:
    """Whole documents to val.bin until it holds `val` tokens, the rest to train.bin (cut at `train`).

    Without `rng` the first documents are held out. With one (prepare's secret split), each
    document is held out with probability about val / (val + train), until val.bin is full: which
    documents those are depends only on the generator's seed."""

    def __init__(self, val_path: Path, train_path: Path, val: int, train: int | None,
                 rng: np.random.Generator | None = None, expected_total: int | None = None) -> None:
        """``train`` None: every document not held out trains; ``expected_total`` (tokens, an
        estimate) then sets how often a document is held out."""
        self.val_file, self.train_file = open(val_path, "wb"), open(train_path, "wb")
        self.val_target, self.train_target = val, (sys.maxsize if train is None else train)
        self.val_n = self.train_n = 0
        self.rng = rng
        total = val + train if train is not None else max(val, expected_total or val)
        self.p_val = min(1.0, 1.05 * val / max(1, total))  # a little over: val.bin fills before train.bin

    @property
    def full(self) -> bool:
        return self.train_n >= self.train_target

    def add(self, tokens: np.ndarray) -> None:
        if self.rng is None:
            self._to(tokens, self.val_n < self.val_target)
            return
        for doc in split_documents(tokens):
            if self.full:
                break
            self._to(doc, self.val_n < self.val_target and self.rng.random() < self.p_val)

    def _to(self, tokens: np.ndarray, held_out: bool) -> None:
        if held_out:
            tokens.tofile(self.val_file)
            self.val_n += len(tokens)
            return
        tokens = tokens[: self.train_target - self.train_n]
        tokens.tofile(self.train_file)
        self.train_n += len(tokens)

    def close(self) -> None:
        self.val_file.close()
        self.train_file.close()


def iter_documents(source: Path):
    files = sorted(p for p in source.rglob("*") if p.is_file() and p.suffix in (".txt", ".jsonl", ".parquet")
                   and "tokenizer" not in p.relative_to(source).parts)
    if not files:
        fail(f"{source} has neither train.bin/val.bin nor any .txt, .jsonl or .parquet documents")
    for path in files:
        if path.suffix == ".txt":
            yield path.read_text(encoding="utf-8", errors="replace")
        elif path.suffix == ".jsonl":
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    if line.strip():
                        yield json.loads(line)["text"]
        else:
            try:
                import pyarrow.parquet as pq
            except ImportError:
                fail(f"reading {path} needs pyarrow: pip install pyarrow")
            for batch in pq.ParquetFile(path).iter_batches(columns=["text"], batch_size=1024):
                yield from batch.column(0).to_pylist()


def build_from(profile: str, source: Path, out: Path, secret: dict) -> dict:
    sizes = SIZES[profile]
    train_path, val_path = out / "workspace" / "train.bin", out / "protected" / "val.bin"
    if (source / "train.bin").is_file() and (source / "val.bin").is_file():
        counts = {}
        for name, dest, limit in (("val.bin", val_path, sizes["val"]), ("train.bin", train_path, sizes["train"])):
            src = np.memmap(source / name, dtype=np.uint16, mode="r")
            n = len(src) if limit is None else min(len(src), limit)
            if n < 4 * SEQ_LEN:
                fail(f"{source / name} holds only {len(src)} tokens")
            with open(dest, "wb") as fh:
                step = 50_000_000
                for i in range(0, n, step):
                    np.asarray(src[i: min(n, i + step)]).tofile(fh)
                    progress(min(n, i + step), n, f"copying {name}")
            counts[name] = n
        return {"source": f"pre-tokenized {source}/train.bin and val.bin", "train_tokens": counts["train.bin"],
                "val_tokens": counts["val.bin"]}
    encode = gpt2_tokenizer(source)
    guess = None if sizes["train"] is not None else sum(p.stat().st_size for p in source.rglob("*") if p.is_file()) // 5
    writer = SplitWriter(val_path, train_path, sizes["val"], sizes["train"], np.random.default_rng(secret["split_seed"]),
                         expected_total=guess)  # about 4-5 bytes of text a GPT-2 token, less for parquet
    batch: list[str] = []
    docs = 0
    for text in iter_documents(source):
        batch.append(text)
        if len(batch) == DOCS_PER_CHUNK:
            writer.add(encode_docs(encode, batch))
            docs += len(batch)
            batch = []
            progress(writer.val_n + writer.train_n, max(writer.val_n + writer.train_n, sizes["val"] + (sizes["train"] or guess or 0)),
                     f"tokenizing {source} ({docs:,} documents)")
            if writer.full:
                break
    if batch and not writer.full:
        writer.add(encode_docs(encode, batch))
        docs += len(batch)
    writer.close()
    if writer.train_n < 4 * SEQ_LEN:
        fail(f"{source} gave {writer.val_n} validation and {writer.train_n} training tokens: too few for training")
    return {"source": f"documents in {source}", "documents": docs, "train_tokens": writer.train_n, "val_tokens": writer.val_n}


def _save_chunk(chunk_dir: Path, state: dict, tokens: np.ndarray, n_docs: int) -> None:
    """One tokenized chunk, renamed into place, then counted in ``state`` (the caller saves it)."""
    name = f"chunk_{len(state['chunks']):06d}.npy"
    np.save(chunk_dir / (name + ".tmp.npy"), tokens)
    os.replace(chunk_dir / (name + ".tmp.npy"), chunk_dir / name)
    state["chunks"].append(name)
    state["docs"] += n_docs
    state["tokens"] += len(tokens)


def build_fetch(profile: str, work: Path, out: Path, secret: dict) -> dict:
    """OpenWebText, streamed. Tokenized chunks of DOCS_PER_CHUNK documents go to WORK/owt/ as they
    are made; a rerun skips the documents already there."""
    try:
        import datasets
    except ImportError:
        fail("--mode fetch needs the `datasets` package (pip install datasets tiktoken); "
             "on a machine without internet use --mode from --source DIR instead")
    sizes = SIZES[profile]
    encode = gpt2_tokenizer()
    chunk_dir = work / "owt"
    chunk_dir.mkdir(parents=True, exist_ok=True)
    state_path = chunk_dir / "state.json"
    state = json.loads(state_path.read_text()) if state_path.is_file() else {"dataset": OWT_DATASET, "chunks": [], "docs": 0, "tokens": 0}
    if state.get("dataset") != OWT_DATASET:
        fail(f"{chunk_dir} holds chunks of {state.get('dataset')!r}, not {OWT_DATASET!r}: remove it or set RMLM_OWT_DATASET")
    whole = sizes["train"] is None  # stream to the corpus's end
    needed = OWT_TOKENS_ESTIMATE if whole else sizes["val"] + sizes["train"]
    if not state.get("complete") and (whole or state["tokens"] < needed):
        say(f"streaming {OWT_DATASET} from the Hugging Face hub (resuming after {state['docs']:,} documents)")
        stream = datasets.load_dataset(OWT_DATASET, split="train", streaming=True)
        if state["docs"]:
            stream = stream.skip(state["docs"])
        batch: list[str] = []
        for row in stream:
            batch.append(row["text"])
            if len(batch) < DOCS_PER_CHUNK:
                continue
            _save_chunk(chunk_dir, state, encode_docs(encode, batch), len(batch))
            state_path.write_text(json.dumps(state))
            batch = []
            progress(min(state["tokens"], needed), max(needed, state["tokens"]),
                     f"downloading and tokenizing OpenWebText ({state['docs']:,} documents)")
            if not whole and state["tokens"] >= needed:
                break
        else:  # the stream ended: its last documents, then the corpus is complete
            _save_chunk(chunk_dir, state, encode_docs(encode, batch), len(batch)) if batch else None
            state["complete"] = True
            state_path.write_text(json.dumps(state))
    train_target = state["tokens"] - sizes["val"] if whole else sizes["train"]
    writer = SplitWriter(out / "protected" / "val.bin", out / "workspace" / "train.bin", sizes["val"], train_target,
                         np.random.default_rng(secret["split_seed"]))
    for i, name in enumerate(state["chunks"]):
        writer.add(np.load(chunk_dir / name))
        progress(i + 1, len(state["chunks"]), "writing train.bin and val.bin")
        if writer.full:
            break
    writer.close()
    return {"source": f"Hugging Face {OWT_DATASET} (streamed), GPT-2 BPE", "documents": state["docs"],
            "train_tokens": writer.train_n, "val_tokens": writer.val_n}


# -- the starting checkpoint ------------------------------------------------------------------
def train_start_checkpoint(profile: str, mode: str, out: Path) -> dict:
    import torch

    sys.dont_write_bytecode = True  # no __pycache__ in solution/, which is copied to participants
    sys.path.insert(0, str(HERE / "solution"))
    import model as M  # noqa: E402 - the starting solution's model
    import train as T  # noqa: E402 - and its training loop

    plan = START_TRAINING[(profile, mode)]
    if profile == "smoke":
        torch.set_num_threads(min(2, torch.get_num_threads()))  # reproducible on bigger machines too; fewer where given fewer
    device = "cuda" if torch.cuda.is_available() else "cpu"
    tokens = T.load_tokens(out / "workspace" / "train.bin")
    train_part, held_out = T.split(tokens)
    torch.manual_seed(SEED)
    net = M.build(plan["config"])
    T.init_output_bias(net, train_part)
    label = f"training the starting model ({plan['steps']} steps on {device})"
    summary = T.train(net, train_part, steps=plan["steps"], batch_size=plan["batch_size"], lr=plan["lr"], device=device,
                      seed=SEED, log_every=0, progress=lambda d, t: progress(d, t, label))
    held = T.evaluate(net, held_out, 10, 32, device)
    M.save_checkpoint(net.cpu(), out / "workspace" / "start_checkpoint.pt")
    say(f"starting model: {summary['steps']} steps in {summary['seconds']} s, held-out loss {held:.4f}")
    return {**plan, "device": device, "train_seconds": summary["seconds"], "held_out_loss": round(held, 4),
            "parameters": sum(p.numel() for p in net.parameters())}


def main() -> None:
    ap = argparse.ArgumentParser(description="Build restricted_mlm's assets.")
    ap.add_argument("--profile", choices=("gpu", "smoke"), required=True)
    ap.add_argument("--mode", choices=("fetch", "synthetic", "from"), required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--source", type=Path)
    args = ap.parse_args()
    if args.mode == "from" and (args.source is None or not args.source.is_dir()):
        fail("--mode from needs --source DIR (a folder with train.bin and val.bin, or documents)")
    started = time.time()
    for side in ("workspace", "protected"):
        (args.out / side).mkdir(parents=True, exist_ok=True)
    args.work.mkdir(parents=True, exist_ok=True)

    secret = draw_secrets()
    if args.mode == "synthetic":
        data = build_synthetic(args.profile, args.out, secret)
    elif args.mode == "from":
        data = build_from(args.profile, args.source.resolve(), args.out, secret)
    else:
        data = build_fetch(args.profile, args.work, args.out, secret)
    if data["val_tokens"] <= 4 * SEQ_LEN:
        fail(f"only {data['val_tokens']} held-out tokens: too few to score on")
    start = train_start_checkpoint(args.profile, args.mode, args.out)

    public = {"profile": args.profile, "mode": args.mode, "train_tokens": data["train_tokens"], "dtype": "uint16",
              "vocab_size": VOCAB_SIZE, "mask_id": MASK_ID, "seq_len": SEQ_LEN, "masked_per_sequence": round(0.15 * SEQ_LEN),
              "source": data["source"].split(" (")[0] if args.mode == "synthetic" else data["source"],
              "start_checkpoint": {k: start[k] for k in ("config", "steps", "parameters")}}
    (args.out / "workspace" / "data_info.json").write_text(json.dumps(public, indent=2) + "\n")
    private = {**public, "data": data, "start_checkpoint": start, "secret_pinned": secret["pinned"],
               "seconds": round(time.time() - started, 1)}
    (args.out / "protected" / "info.json").write_text(json.dumps(private, indent=2) + "\n")
    (args.out / "protected" / "secret.json").write_text(json.dumps(secret, indent=2) + "\n")
    say(f"done in {time.time() - started:.1f} s: {data['train_tokens']:,} training and {data['val_tokens']:,} held-out tokens")


if __name__ == "__main__":
    main()
