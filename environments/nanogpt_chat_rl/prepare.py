"""Builds nanogpt_chat_rl's assets (see environments/README.md for the command line).

workspace/ (the participant's, read-only at /home/agent/assets):
    base_model/model.pt   the base model (GPT-2 small in the gpu profile), solution/model.py's format
    tokenizer.json        the tokenizer (solution/tokenizer.py reads it)
    train_prompts.json    user messages to practise on (a list of strings; no answers)
    README.txt            what these files are
protected/ (held out, /protected/assets):
    heldout.json          held-out user messages and the two baselines' answers to them:
                          {"prompts": [...], "baselines": {"base": [...], "sft": [...]},
                           "order_seed": int, ...}
    tokenizer.json        the scorer's own copy of the tokenizer
    facts.json            how the assets were made (seeds, sizes, times, sources)

Secrets drawn here (from the operating system's randomness, never a constant of this
repository) and kept on the protected side only: ``split_seed`` (which topics or word pairs are
held out and which messages are drawn; facts.json) and ``order_seed`` (the order in which the
judge sees each pair of answers; heldout.json). The environment variable CHATRL_SPLIT_SEED pins
the split (tests that reproduce a measured figure); never set it for a real attempt.

The two baselines answer exactly as the scorer makes the participant's model answer (chat.py:
the chat prompt, 60 new tokens, greedy):
    base  the base model itself (so the starting model ties with it: identical answers count 1/2)
    sft   a simple finetune without human answers: the base model samples one answer per training
          message (temperature 0.9, top-k 50); answers that end within 60 tokens, have at least 3
          words, repeat no word trigram and share a word of 4+ letters with the message are kept;
          the base model is finetuned on the kept (message, answer) pairs (2 epochs; smoke: 3).

Modes:
    fetch      GPT-2 small from the Hugging Face hub (config.json, model.safetensors, vocab.json,
               merges.txt; resumable in --work), converted to our format; messages generated here
               (prompts.py); baselines trained and run here (on a GPU if torch sees one).
    from       the same from SOURCE/gpt2/ holding those four files (pytorch_model.bin instead of
               model.safetensors also works).
    synthetic  smoke: a tiny byte-level GPT trained here on a synthetic dialogue corpus (below);
               gpu: GPT-2 small shapes with random weights and a byte tokenizer with GPT-2's
               vocabulary size (for timing the generation and the scorer where the hub cannot be
               reached; the answers are noise).

The smoke corpus: dialogues "Human: <message>\\n\\nAssistant: <answer><eot>" about a tiny world
(prompts.py). Half of the answers are evasive ("i do not know.", ...: they start with "i"), the other half talk
about the message's things (naming its noun; or its adjective and noun; or those and its second
noun). The base model therefore answers evasively when greedy ("i" is its likeliest first word) but
names the message's things in roughly a quarter of its samples: there is something for RL to find.
"""

from __future__ import annotations

import argparse
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
SETTINGS = {  # per profile: how many messages, and how the SFT baseline is made
    "gpu": {"n_heldout": int(os.environ.get("CHATRL_HELDOUT", "200")), "sft_prompts": 0, "sft_epochs": 2,
            "sft_lr": 2e-5, "sft_batch": 16, "gen_batch": 64},
    "smoke": {"n_train": 480, "n_heldout": 32, "sft_prompts": 0, "sft_epochs": 3, "sft_lr": 2e-3, "sft_batch": 32,
              "gen_batch": 128},
}
SFT_SEED = 1_234
SAMPLE_TEMPERATURE, SAMPLE_TOP_K = 0.9, 50


def progress(done: float, total: float, label: str) -> None:
    print(f"PROGRESS {done} {total} {label}", flush=True)


def fail(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)
    sys.exit(1)


# -- the SFT baseline (both profiles) ---------------------------------------------------------
def words4(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]{4,}", text)}


def keep_sample(message: str, reply: str, ended: bool) -> bool:
    words = reply.lower().split()
    trigrams = list(zip(words, words[1:], words[2:]))
    return ended and len(words) >= 3 and len(set(trigrams)) == len(trigrams) and bool(words4(message) & words4(reply))


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
        batch = rng.sample(pairs, min(st["sft_batch"], len(pairs)))
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=device == "cuda"):
            loss = sft_loss(model, *sft_batch(tok, batch, model.cfg.block_size, device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % 20 == 0 or step == steps - 1:
            progress(1 + (step + 1) / steps, 2, f"finetuning the SFT baseline (loss {loss.item():.3f})")
    info["steps"] = steps
    model.eval()
    return model, info


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
        if name == "lm_head.weight" or name.endswith(("attn.bias", "attn.masked_bias")):
            continue  # tied output layer; causal-mask buffers
        if name.startswith("h."):
            _, layer, rest = name.split(".", 2)
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


def fetch_gpt2(work: Path) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        fail("fetch needs huggingface_hub and safetensors (pip install huggingface_hub safetensors); "
             "offline, use --mode from --source DIR with DIR/gpt2/")
    progress(0, 1, "downloading gpt2 from the Hugging Face hub (resumes if interrupted)")
    path = snapshot_download(repo_id="openai-community/gpt2", local_dir=str(work / "gpt2"),
                             allow_patterns=["config.json", "model.safetensors", "vocab.json", "merges.txt"])
    return Path(path)


# -- building --------------------------------------------------------------------------------------
def build(profile: str, mode: str, out: Path, work: Path, source: Path | None) -> dict:
    st = SETTINGS[profile]
    device = "cuda" if profile == "gpu" and torch.cuda.is_available() else "cpu"
    torch.set_num_threads(1 if profile == "smoke" else max(1, min(8, os.cpu_count() or 1)))
    t0 = time.time()
    split_seed = int(os.environ.get("CHATRL_SPLIT_SEED") or secrets.randbits(31))
    order_seed = secrets.randbits(63)
    facts: dict = {"profile": profile, "mode": mode, "device": device, "torch": torch.__version__,
                   "decoding": {"max_new_tokens": MAX_NEW_TOKENS, "temperature": 0}, "split_seed": split_seed}
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
    else:
        train_msgs, held_msgs = P.gpu_prompts(st["n_heldout"], split_seed)
        if mode == "synthetic":
            torch.manual_seed(0)
            progress(0, 1, "random-init GPT-2 small shape")
            base = GPT(GPT2_SMALL)
            tok_spec = {"type": "bytes", "eot": 50256, "vocab_size": 50257, "unknown_as_words": True}
            tok = ByteTokenizer(50256, 50257, unknown_as_words=True)
            facts["base"] = {"note": "random weights: only for timing generation and the scorer"}
        else:
            if mode == "fetch":
                folder = fetch_gpt2(work)
            else:
                if source is None:
                    fail("--mode from needs --source DIR (with DIR/gpt2/config.json, model.safetensors, vocab.json, merges.txt)")
                folder = source / "gpt2"
            for name in ("config.json", "vocab.json", "merges.txt"):
                if not (folder / name).is_file():
                    fail(f"{folder}: {name} is missing")
            progress(0, 1, "converting GPT-2 small to our checkpoint format")
            base = convert_gpt2(folder)
            tok_spec = gpt2_tokenizer_spec(folder)
            tok = GPT2Tokenizer(tok_spec["vocab"], tok_spec["merges"])
            facts["base"] = {"source": "openai-community/gpt2" if mode == "fetch" else str(folder)}
    base = base.to(device).eval()
    sft_msgs = train_msgs if not st["sft_prompts"] else train_msgs[:st["sft_prompts"]]
    if profile == "gpu" and mode == "synthetic":
        sft_msgs = train_msgs[:128]
        st = {**st, "sft_epochs": 1, "sft_batch": 16}
    sft, sft_info = sft_baseline(base, tok, sft_msgs, st, device, filtered=not (profile == "gpu" and mode == "synthetic"))
    facts["sft"] = {**sft_info, "lr": st["sft_lr"], "epochs": st["sft_epochs"], "batch": st["sft_batch"],
                    "temperature": SAMPLE_TEMPERATURE, "top_k": SAMPLE_TOP_K, "seed": SFT_SEED}
    baselines = {}
    t_gen = time.time()
    for i, (name, model) in enumerate((("base", base), ("sft", sft))):
        progress(i, 2, f"answering {len(held_msgs)} held-out messages with the {name} baseline")
        baselines[name] = answer(model, tok, held_msgs, batch_size=st["gen_batch"])
    facts["baseline_generation_s"] = round(time.time() - t_gen, 2)
    progress(0, 1, "saving")
    ws, pr = out / "workspace", out / "protected"
    save_model(base.cpu(), str(ws / "base_model"))
    (ws / "tokenizer.json").write_text(json.dumps(tok_spec))
    (pr / "tokenizer.json").write_text(json.dumps(tok_spec))  # the scorer's: the workspace's copy is the participant's
    (ws / "train_prompts.json").write_text(json.dumps(train_msgs, indent=0))
    (ws / "README.txt").write_text(WORKSPACE_README)
    (pr / "heldout.json").write_text(json.dumps({"prompts": held_msgs, "baselines": baselines, "order_seed": order_seed,
                                                 "base_config": base.cfg.__dict__, "max_new_tokens": MAX_NEW_TOKENS, "decoding": "greedy"}, indent=1))
    facts.update({"n_train_prompts": len(train_msgs), "n_heldout": len(held_msgs), "seconds": round(time.time() - t0, 1),
                  "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                  "identical_base_sft_answers": sum(a == b for a, b in zip(baselines["base"], baselines["sft"]))})
    (pr / "facts.json").write_text(json.dumps(facts, indent=2))
    progress(1, 1, "done")
    return facts


WORKSPACE_README = """These files are read-only. Copy what you want to change.

base_model/model.pt   the base model (solution/model.py: load_model("/home/agent/assets/base_model")).
                      The scorer scores /home/agent/finetuned_model/model.pt (same configuration).
tokenizer.json        the tokenizer (solution/tokenizer.py: load_tokenizer(...)).
train_prompts.json    user messages you may use for training and your own evaluation (no answers).
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
                                            "identical_base_sft_answers")} | {"sft": facts["sft"]}))


if __name__ == "__main__":
    main()
