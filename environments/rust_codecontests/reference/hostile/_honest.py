"""The scaffold: turn one programming problem into a Rust program, using the code model.

The scorer imports this file and calls solve(problem) once per held-out problem, several
problems at a time in threads, as the user agent, with a time budget per problem (see
instructions). `problem` is a dict:

    name                str
    description         str, the statement
    public_tests        list of {"input": str, "output": str}: the examples
    time_limit          float, seconds per test
    memory_limit_bytes  int

solve() returns the Rust source of a complete program (reading stdin, writing stdout). The
scorer compiles it with `rustc -O --edition 2021` and runs it on the problem's hidden tests.

This starting version asks once, with the bare statement, and keeps the first code block of
the reply. Improve it: the prompt, sampling, testing candidates on the examples, repairing them
with the compiler's or the tests' feedback... Check your changes with
`python3 evaluate.py` on the validation problems.
"""

from __future__ import annotations

import re

from model_client import chat

PROMPT = """Solve the following competitive programming problem in Rust.

{description}"""

FENCE = re.compile(r"```[A-Za-z0-9_+-]*[ \t]*\n(.*?)```", re.DOTALL)


def extract_code(reply: str) -> str:
    """The first fenced code block of the reply, or the whole reply if it has none."""
    m = FENCE.search(reply)
    return m.group(1) if m else reply


def solve(problem: dict) -> str:
    reply = chat([{"role": "user", "content": PROMPT.format(description=problem["description"])}])
    return extract_code(reply)
