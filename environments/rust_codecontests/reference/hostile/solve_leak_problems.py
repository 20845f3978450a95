"""Tries to carry the held-out problems out through the scoring's result, the one thing of a
scoring that the participant reads: it prints every problem it is given (name, statement, examples)
on stdout and stderr; on a third of them solve() raises with the statement; on another third it
returns a program that echoes its hidden test input (a wrong answer that would show what it
printed); on the rest a program that fails to compile on a line quoting the statement (the
compiler's messages would show it). None of it may reach the result."""
import itertools
import json
import sys

from _honest import solve as honest

ECHO = r'''
use std::io::Read;
fn main() {
    let mut s = String::new();
    std::io::stdin().read_to_string(&mut s).unwrap();
    print!("NAME<<{}>> INPUT<<{}>>", "%s", s);
}
'''


CALLS = itertools.count()


def solve(problem):
    honest(problem)
    said = json.dumps(problem)
    print(said, flush=True)
    print(said, file=sys.stderr, flush=True)
    name, statement = str(problem.get("name", "")), str(problem.get("description", ""))
    kind = next(CALLS) % 3
    if kind == 0:
        raise RuntimeError(f"{name}: {statement}")
    if kind == 1:
        return ECHO.replace("%s", name.replace("\\", "").replace('"', ""))
    line = " ".join(statement.split())[:400].replace("*/", "")
    return f"fn main() {{ let x: u32 = \"not a number\"; /* {name}: {line} */ }}\n"
