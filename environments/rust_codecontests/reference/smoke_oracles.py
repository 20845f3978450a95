"""Python oracles for the hand-written smoke problems (protected/smoke/<slug>/problem.toml).

Each oracle maps a test's input text to the expected output text. They were used to compute the
expected outputs in the problem files, and they re-check them:

    python3 reference/smoke_oracles.py          # every test of every smoke problem

(tests/unit/test_env_rust_codecontests.py runs the same check). The Rust programs the stand-in
model returns (good.rs, bad.rs) are checked against the same tests with real rustc in
tests/integration/test_env_rust_codecontests.py.
"""

from __future__ import annotations

import math
import sys
import tomllib
from collections import deque
from pathlib import Path

SMOKE = Path(__file__).resolve().parent.parent / "protected" / "smoke"


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split()]


# -- validation split ---------------------------------------------------------------------------
def pebble_pairs(text: str) -> str:
    v = _ints(text)
    a = v[1:1 + v[0]]
    even = sum(1 for x in a if x % 2 == 0)
    odd = len(a) - even
    return f"{even * (even - 1) // 2 + odd * (odd - 1) // 2}\n"


def signal_relay(text: str) -> str:
    s = text.split()[1]
    best = run = 1
    for a, b in zip(s, s[1:]):
        run = run + 1 if a == b else 1
        best = max(best, run)
    return f"{best}\n"


def can_pyramid(text: str) -> str:
    v = _ints(text)
    out = []
    for n in v[1:1 + v[0]]:
        k = max(0, math.isqrt(2 * n) - 2)
        while k * (k + 1) // 2 < n:
            k += 1
        out.append(str(k))
    return "\n".join(out) + "\n"


def skyline_count(text: str) -> str:
    v = _ints(text)
    best, seen = -1, 0
    for h in v[1:1 + v[0]]:
        if h > best:
            seen, best = seen + 1, h
    return f"{seen}\n"


def bracket_depth(text: str) -> str:
    s = text.split()[0]
    depth = best = 0
    for ch in s:
        depth += 1 if ch == "(" else -1
        if depth < 0:
            return "-1\n"
        best = max(best, depth)
    return f"{best if depth == 0 else -1}\n"


def robot_walk(text: str) -> str:
    s = text.split()[1]
    x = s.count("R") - s.count("L")
    y = s.count("U") - s.count("D")
    return f"{x} {y} {abs(x) + abs(y)}\n"


# -- test split ---------------------------------------------------------------------------------
def lantern_peaks(text: str) -> str:
    v = _ints(text)
    b = v[1:1 + v[0]]
    peaks = 0
    for i, x in enumerate(b):
        if (i == 0 or x > b[i - 1]) and (i == len(b) - 1 or x > b[i + 1]):
            peaks += 1
    return f"{peaks}\n"


def digit_weight(text: str) -> str:
    v = text.split()
    return "\n".join(str(sum(int(d) for d in x)) for x in v[1:1 + int(v[0])]) + "\n"


def garden_square(text: str) -> str:
    v = _ints(text)
    return "\n".join(str(math.isqrt(x)) for x in v[1:1 + v[0]]) + "\n"


def runner_up(text: str) -> str:
    v = _ints(text)
    distinct = sorted(set(v[1:1 + v[0]]), reverse=True)
    return f"{distinct[1] if len(distinct) > 1 else -1}\n"


def noise_windows(text: str) -> str:
    v = _ints(text)
    n, k, t = v[0], v[1], v[2]
    r = v[3:3 + n]
    return f"{sum(1 for i in range(n - k + 1) if sum(r[i:i + k]) > t)}\n"


def tile_divisor(text: str) -> str:
    v = _ints(text)
    q = v[0]
    return "\n".join(str(math.gcd(v[1 + 2 * i], v[2 + 2 * i])) for i in range(q)) + "\n"


def island_count(text: str) -> str:
    lines = text.split()
    r, c = int(lines[0]), int(lines[1])
    grid = lines[2:2 + r]
    seen = [[False] * c for _ in range(r)]
    count = 0
    for i in range(r):
        for j in range(c):
            if grid[i][j] != "#" or seen[i][j]:
                continue
            count += 1
            seen[i][j] = True
            queue = deque([(i, j)])
            while queue:
                a, b = queue.popleft()
                for na, nb in ((a + 1, b), (a - 1, b), (a, b + 1), (a, b - 1)):
                    if 0 <= na < r and 0 <= nb < c and grid[na][nb] == "#" and not seen[na][nb]:
                        seen[na][nb] = True
                        queue.append((na, nb))
    return f"{count}\n"


def booking_blocks(text: str) -> str:
    v = _ints(text)
    n = v[0]
    spans = sorted((v[1 + 2 * i], v[2 + 2 * i]) for i in range(n))
    blocks, end = 0, None
    for lo, hi in spans:
        if end is None or lo > end:
            blocks += 1
            end = hi
        else:
            end = max(end, hi)
    return f"{blocks}\n"


ORACLES = {
    "pebble_pairs": pebble_pairs, "signal_relay": signal_relay, "can_pyramid": can_pyramid,
    "skyline_count": skyline_count, "bracket_depth": bracket_depth, "robot_walk": robot_walk,
    "lantern_peaks": lantern_peaks, "digit_weight": digit_weight, "garden_square": garden_square,
    "runner_up": runner_up, "noise_windows": noise_windows, "tile_divisor": tile_divisor,
    "island_count": island_count, "booking_blocks": booking_blocks,
}


def check(folder: Path = SMOKE) -> list[str]:
    """Problems found: a test whose expected output differs from the oracle's, or a missing oracle."""
    problems = []
    for toml in sorted(folder.glob("*/problem.toml")):
        slug = toml.parent.name
        oracle = ORACLES.get(slug)
        if oracle is None:
            problems.append(f"{slug}: no oracle")
            continue
        doc = tomllib.loads(toml.read_text(encoding="utf-8"))
        for i, test in enumerate(doc["public_tests"] + doc["hidden_tests"]):
            want = oracle(test["input"])
            if want.split() != test["output"].split():
                problems.append(f"{slug} test {i}: file says {test['output']!r}, oracle {want!r}")
    return problems


if __name__ == "__main__":
    found = check()
    print("\n".join(found) or f"all tests agree with the oracles ({len(ORACLES)} problems)")
    sys.exit(1 if found else 0)
