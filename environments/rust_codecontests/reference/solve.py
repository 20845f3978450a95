"""A better scaffold (reference): prompt with the examples, test on them, repair with the failure.

Copy it over solution/solve.py (it uses the solution's model_client.py and rust_harness.py):

    cp reference/solve.py ~/solution/solve.py

For each problem:
1. ask with a system prompt about writing Rust, the statement, the examples spelled out and a
   request to reason step by step first; keep the last ```rust block of the reply;
2. compile it and run it on the examples with the same harness the scorer uses;
3. if it fails, continue the conversation with what went wrong (compiler errors, the expected
   and actual output, or the time limit) and ask again, up to ROUNDS times while the time budget
   allows; with SAMPLES > 1 each round asks for several programs at a higher temperature and
   keeps the first that passes;
4. return the first program that passes the examples, else the last one that compiled, else the
   last one.
"""

from __future__ import annotations

import os
import re
import time

import rust_harness as h
from model_client import ModelError, chat_choices

ROUNDS = int(os.environ.get("RCC_ROUNDS", "4"))
SAMPLES = int(os.environ.get("RCC_SAMPLES", "1"))
MARGIN = 8.0  # seconds of the budget kept back for the last compile and test

SYSTEM = ("You are an expert competitive programmer. You write correct, efficient Rust 2021 programs that "
          "use only the standard library (rustc 1.63, no crates), read all of standard input and print "
          "exactly the required output.")

PROMPT = """Solve this programming contest problem in Rust.

# Problem: {name}

{description}

# Examples
{examples}
Limits: {time_limit:g} s per test, {memory_mb} MiB of memory.

Think step by step: restate the task, find an algorithm fast enough for the largest inputs, check it
against the examples, then give the complete program in one ```rust code block."""

FEEDBACK = """Your program failed on the examples: {what}

Find the mistake step by step, then give the corrected complete program in one ```rust code block."""

FENCE = re.compile(r"```([A-Za-z0-9_+-]*)[ \t]*\n(.*?)```", re.DOTALL)


def extract_rust(reply: str) -> str | None:
    blocks = FENCE.findall(reply)
    rust = [code for lang, code in blocks if lang.lower() in ("rust", "rs")]
    if rust:
        return rust[-1]
    if blocks:
        return blocks[-1][1]
    return reply if "fn main" in reply else None


def examples_text(problem: dict) -> str:
    parts = []
    for i, t in enumerate(problem.get("public_tests") or [], start=1):
        parts.append(f"Input {i}:\n```\n{t['input'].rstrip()}\n```\nOutput {i}:\n```\n{t['output'].rstrip()}\n```\n")
    return "\n".join(parts) or "(none given)\n"


def describe_failure(v: h.Verdict) -> str:
    if v.outcome in ("compile_error", "compile_timeout"):
        return f"it did not compile ({v.outcome}). Compiler output:\n```\n{v.detail[-2500:]}\n```"
    if v.outcome == "timeout":
        return f"time limit exceeded ({v.detail}); it may loop forever or be too slow."
    if v.outcome == "runtime_error":
        return f"runtime error, it crashed or panicked ({v.detail})."
    if v.outcome == "wrong_answer":
        return f"wrong answer; {v.detail}."
    return f"{v.outcome}: {v.detail}"


def solve(problem: dict) -> str:
    started = time.monotonic()
    budget = float(os.environ.get("REBENCH_SOLVE_SECONDS", "120"))
    time_limit = float(problem.get("time_limit") or 2.0)
    memory = problem.get("memory_limit_bytes")
    examples = problem.get("public_tests") or []
    messages = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": PROMPT.format(name=problem.get("name", ""), description=problem["description"],
                                                  examples=examples_text(problem), time_limit=time_limit,
                                                  memory_mb=int((memory or 256 * 2**20) / 2**20))},
    ]
    last, last_compiled = None, None
    for round_ in range(ROUNDS):
        if round_ and time.monotonic() - started > budget - MARGIN:
            break
        try:
            replies = chat_choices(messages, n=SAMPLES, temperature=0.0 if SAMPLES == 1 else 0.7, max_tokens=4096)
        except ModelError:
            break
        failure = None
        for reply in replies:
            code = extract_rust(reply)
            if code is None:
                failure = failure or (reply, "the reply held no ```rust code block.")
                continue
            last = code
            if not examples:
                return code
            v = h.evaluate(code, examples, time_limit, memory_bytes=memory)
            if v.passed:
                return code
            if v.outcome not in ("compile_error", "compile_timeout"):
                last_compiled = code
            if failure is None or failure[1].startswith("the reply held no"):
                failure = (reply, describe_failure(v))
        if failure is None:
            break
        messages += [{"role": "assistant", "content": failure[0]},
                     {"role": "user", "content": FEEDBACK.format(what=failure[1])}]
    return last_compiled or last or ""
