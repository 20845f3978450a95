"""The chat format and answer generation, exactly as the scorer uses them.

Two prompt shapes:

* gpu profile: every prompt is already a full Alpaca-template prompt (the preamble "Below is an
  instruction that describes a task...", then ``### Instruction:``, an optional ``### Input:``,
  and ``### Response:`` at the end; :func:`alpaca_prompt` writes one). Such a prompt is given to
  the model as it is.
* smoke profile: a plain user message becomes ``"Human: <message>\\n\\nAssistant:"``.

The model writes at most 60 new tokens (MAX_NEW_TOKENS), greedily (temperature 0), stopping at
the end-of-text token. The answer is those tokens decoded, cut where the model starts a new turn
(``"\\nHuman:"``, or a new ``### Instruction:``/``### Input:``/``### Response:`` heading) and
stripped of surrounding whitespace. The scorer imports this file from its own pristine copy, so
editing it changes your experiments, not the scoring.
"""

from __future__ import annotations

import random

import torch

from model import GPT, generate

MAX_NEW_TOKENS = 60
TURN_BREAKS = ("\nHuman:", "\n\nHuman", "Human:", "### Instruction", "### Input", "### Response", "Below is an instruction")
# The Alpaca template: one preamble for an instruction alone, another for one with an input.
ALPACA_START = "Below is an instruction that describes a task"
ALPACA_NO_INPUT = (ALPACA_START + ". Write a response that appropriately completes the request.\n\n"
                   "### Instruction:\n{instruction}\n\n### Response:")
ALPACA_WITH_INPUT = (ALPACA_START + ", paired with an input that provides further context. Write a response that "
                     "appropriately completes the request.\n\n### Instruction:\n{instruction}\n\n### Input:\n{input}\n\n"
                     "### Response:")


def alpaca_prompt(instruction: str, input: str = "") -> str:  # noqa: A002 - the dataset's field name
    """An instruction (and optional input) in the Alpaca template, ending with ``### Response:``."""
    if input.strip():
        return ALPACA_WITH_INPUT.format(instruction=instruction.strip(), input=input.strip())
    return ALPACA_NO_INPUT.format(instruction=instruction.strip())


def format_prompt(message: str) -> str:
    """What the model reads: an Alpaca-template prompt unchanged, any other message as a chat turn."""
    if message.startswith(ALPACA_START):
        return message
    return f"Human: {message.strip()}\n\nAssistant:"


def clean_answer(text: str) -> str:
    for marker in TURN_BREAKS:
        cut = text.find(marker)
        if cut >= 0:
            text = text[:cut]
    return text.strip()


def answer(model: GPT, tok, messages: list[str], *, temperature: float = 0.0, top_k: int | None = None,
           seed: int | None = None, batch_size: int = 32, max_new_tokens: int = MAX_NEW_TOKENS) -> list[str]:
    """Answers (cleaned text) to user messages; greedy by default, which is what the scorer does."""
    device = next(model.parameters()).device
    gen = None
    if temperature > 0:
        gen = torch.Generator(device=device).manual_seed(seed if seed is not None else random.randrange(2**31))
    prompts = [tok.encode(format_prompt(m)) for m in messages]
    was_training = model.training
    model.eval()
    try:
        outs = generate(model, prompts, max_new_tokens, tok.eot, temperature=temperature, top_k=top_k, generator=gen,
                        batch_size=batch_size)
    finally:
        model.train(was_training)
    return [clean_answer(tok.decode(o)) for o in outs]


def sft_batch(tok, pairs: list[tuple[str, str]], block_size: int, device) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Inputs, targets and a loss mask for supervised finetuning on (message, answer) pairs:
    only the answer's tokens and the end-of-text token after it are learned."""
    rows = []
    for message, reply in pairs:
        p = tok.encode(format_prompt(message))
        a = tok.encode(" " + reply.strip()) + [tok.eot]
        seq = (p + a)[-(block_size + 1):]
        n_answer = min(len(a), len(seq) - 1)
        rows.append((seq, n_answer))
    width = max(len(s) for s, _ in rows) - 1
    x = torch.full((len(rows), width), tok.eot, dtype=torch.long)
    y = torch.full((len(rows), width), tok.eot, dtype=torch.long)
    m = torch.zeros((len(rows), width), dtype=torch.float32)
    for i, (seq, n_answer) in enumerate(rows):
        t = len(seq) - 1
        x[i, :t] = torch.tensor(seq[:-1])
        y[i, :t] = torch.tensor(seq[1:])
        m[i, t - n_answer:t] = 1.0
    return x.to(device), y.to(device), m.to(device)


def sft_loss(model: GPT, x: torch.Tensor, y: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    logits = model(x)
    per_token = torch.nn.functional.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), y.reshape(-1),
                                                  reduction="none").view_as(m)
    return (per_token * m).sum() / m.sum().clamp(min=1.0)
