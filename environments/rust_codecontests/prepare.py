"""Builds rust_codecontests' problem sets (the command line is in environments/README.md).

    python prepare.py --profile {gpu,smoke} --mode {fetch,synthetic,from} --out DIR --work DIR [--source DIR]

Writes
    DIR/workspace/valid.jsonl     the validation problems, with all their tests (the participant's)
    DIR/workspace/README.md       the file format
    DIR/protected/test.jsonl      the held-out problems the scorer uses
    DIR/protected/info.json       where they came from, counts

One problem per line, a JSON object:
    name                str
    description         str, the statement as given
    public_tests        [{"input": str, "output": str}], the examples (also in the statement)
    tests               [{"input": str, "output": str}], every test the program must pass, the
                        examples first (public, then private, then generated tests in CodeContests)
    time_limit          float seconds per test (2.0 where the source gives none)
    memory_limit_bytes  int (256 MiB where the source gives none)
    source, difficulty, cf_rating  metadata kept from the source where it has them

Modes
    fetch      CodeContests (deepmind/code_contests on the Hugging Face hub): its `valid` split
               becomes valid.jsonl and its `test` split test.jsonl. The split files (parquet) are
               downloaded with huggingface_hub into --work/code_contests (an interrupted download
               resumes), then converted as in `from`.
    from       The same from a folder someone already downloaded (--source): either the hub
               repository's parquet files (SOURCE/**/valid-*.parquet and SOURCE/**/test-*.parquet,
               read with pyarrow) or JSON lines with CodeContests' fields (SOURCE/valid.jsonl and
               SOURCE/test.jsonl, e.g. written by `datasets`' to_json).
    synthetic  Offline: the 14 hand-written problems of protected/smoke/ (problem.toml each), 6
               for validation and 8 held out, as their `split` field says. The smoke profile's
               stand-in model knows exactly these problems. With --profile gpu the same problems
               are written (there is no offline substitute for CodeContests; this only lets the
               scoring path be exercised).

Conversion choices (CodeContests -> the format above): problems without any test are dropped;
all public and private tests are kept and at most MAX_GENERATED (default 50, environment
variable RCC_MAX_GENERATED) of the generated tests, in the dataset's order, to bound scoring
time; RCC_MAX_PROBLEMS (default: all) keeps the first N problems of the validation split and a
random N of the held-out split.

What is held out is decided here, at random, and kept only on the protected side: the held-out
problems' order in test.jsonl (the order the scorer sends them to the scaffold in) and, with
RCC_MAX_PROBLEMS, which of them are kept, come from a seed drawn from the operating system's
randomness when the assets are prepared (recorded in protected/info.json, never in the
repository or the workspace).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import secrets
import sys
import tomllib
from pathlib import Path
from typing import Iterable, Iterator, NoReturn

HERE = Path(__file__).resolve().parent
SMOKE = HERE / "protected" / "smoke"
HUB_DATASET = "deepmind/code_contests"
SPLITS = {"valid": ("workspace", "valid.jsonl"), "test": ("protected", "test.jsonl")}
DEFAULT_TIME_LIMIT = 2.0
DEFAULT_MEMORY = 256 * 2**20
MAX_GENERATED = int(os.environ.get("RCC_MAX_GENERATED", "50"))
MAX_PROBLEMS = int(os.environ.get("RCC_MAX_PROBLEMS", "0"))

README = """# Validation problems

`valid.jsonl` holds one problem per line, a JSON object with:

- `name`, `description` (the statement), `public_tests` (the examples, a list of
  `{"input": ..., "output": ...}`), `time_limit` (seconds per test), `memory_limit_bytes`;
- `tests`: every test a program must pass (the examples first), the same fields.

Your `solve(problem)` receives these fields except `tests` (see the instructions). The held-out
problems the scorer uses have the same format and come from the same source ({source}).
`python3 ~/solution/evaluate.py` runs your scaffold on these problems the way the scorer does.
"""


def fail(message: str) -> NoReturn:
    print(message, file=sys.stderr, flush=True)
    sys.exit(1)


def progress(done: int, total: int, label: str) -> None:
    print(f"PROGRESS {done} {total} {label}", flush=True)


# -- the hand-written problems --------------------------------------------------------------------
def smoke_problems(folder: Path = SMOKE) -> dict[str, list[dict]]:
    """{"valid": [...], "test": [...]} from folder/*/problem.toml."""
    out: dict[str, list[dict]] = {"valid": [], "test": []}
    for toml in sorted(folder.glob("*/problem.toml")):
        doc = tomllib.loads(toml.read_text(encoding="utf-8"))
        if doc["split"] not in out:
            fail(f"{toml}: split must be valid or test, not {doc['split']!r}")
        public = [{"input": t["input"], "output": t["output"]} for t in doc["public_tests"]]
        hidden = [{"input": t["input"], "output": t["output"]} for t in doc["hidden_tests"]]
        out[doc["split"]].append({
            "name": doc["name"], "description": doc["description"].strip() + "\n", "public_tests": public,
            "tests": public + hidden, "time_limit": float(doc["time_limit"]),
            "memory_limit_bytes": int(doc["memory_limit_bytes"]), "source": "hand-written (smoke)",
        })
    return out


# -- CodeContests ---------------------------------------------------------------------------------
def _pairs(tests) -> list[dict]:
    if not tests:
        return []
    inputs, outputs = tests.get("input") or [], tests.get("output") or []
    return [{"input": i, "output": o} for i, o in zip(inputs, outputs)]


def convert_row(row: dict, max_generated: int = MAX_GENERATED) -> dict | None:
    """One CodeContests record -> one problem, or None if it has no test."""
    public = _pairs(row.get("public_tests"))
    tests = public + _pairs(row.get("private_tests")) + _pairs(row.get("generated_tests"))[:max(0, max_generated)]
    if not tests or not (row.get("description") or "").strip():
        return None
    tl = row.get("time_limit") or {}
    seconds = float(tl.get("seconds") or 0) + float(tl.get("nanos") or 0) / 1e9 if isinstance(tl, dict) else 0.0
    problem = {
        "name": str(row.get("name") or "unnamed"), "description": row["description"], "public_tests": public,
        "tests": tests, "time_limit": seconds if seconds > 0 else DEFAULT_TIME_LIMIT,
        "memory_limit_bytes": int(row.get("memory_limit_bytes") or 0) or DEFAULT_MEMORY,
    }
    for key in ("source", "difficulty", "cf_rating"):
        if row.get(key) is not None:
            problem[key] = row[key]
    return problem


def read_parquet_rows(paths: list[Path]) -> Iterator[dict]:
    try:
        import pyarrow.parquet as pq
    except ImportError:
        fail("reading CodeContests' parquet files needs pyarrow (pip install pyarrow)")
    columns = ["name", "description", "public_tests", "private_tests", "generated_tests", "source", "difficulty",
               "cf_rating", "time_limit", "memory_limit_bytes"]
    for path in paths:
        f = pq.ParquetFile(path)
        present = [c for c in columns if c in f.schema_arrow.names]
        for batch in f.iter_batches(batch_size=8, columns=present):
            yield from batch.to_pylist()


def read_jsonl_rows(path: Path) -> Iterator[dict]:
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def source_rows(source: Path, split: str) -> tuple[Iterable[dict], str]:
    parquet = sorted(source.rglob(f"{split}-*.parquet"))
    if parquet:
        return read_parquet_rows(parquet), ", ".join(str(p.relative_to(source)) for p in parquet)
    jsonl = source / f"{split}.jsonl"
    if jsonl.is_file():
        return read_jsonl_rows(jsonl), jsonl.name
    fail(f"{source} holds neither **/{split}-*.parquet (the hub repository's files) nor {split}.jsonl")


def draw_held_out(problems: list[dict], seed: int, keep: int = 0) -> list[dict]:
    """The held-out problems in an order drawn from ``seed`` (the first ``keep`` of it if keep > 0)."""
    order = list(problems)
    random.Random(seed).shuffle(order)
    return order[:keep] if keep > 0 else order


def convert_source(source: Path, seed: int) -> tuple[dict[str, list[dict]], dict]:
    out: dict[str, list[dict]] = {}
    info: dict = {"files": {}, "dropped_without_tests": {}, "max_generated_tests": MAX_GENERATED}
    for k, split in enumerate(SPLITS):
        progress(k, len(SPLITS), f"converting the {split} split")
        rows, files = source_rows(source, split)
        info["files"][split] = files
        problems, dropped = [], 0
        for row in rows:
            p = convert_row(row)
            if p is None:
                dropped += 1
                continue
            problems.append(p)
            if split == "valid" and MAX_PROBLEMS and len(problems) >= MAX_PROBLEMS:
                break
        if not problems:
            fail(f"no usable problem in the {split} split of {source}")
        if split == "test":
            info["held_out_available"] = len(problems)
            problems = draw_held_out(problems, seed, MAX_PROBLEMS)
        out[split] = problems
        info["dropped_without_tests"][split] = dropped
    progress(len(SPLITS), len(SPLITS), "converted")
    return out, info


def download(work: Path) -> Path:
    try:
        from huggingface_hub import snapshot_download
    except ImportError:
        fail("--mode fetch needs huggingface_hub (pip install huggingface_hub pyarrow)")
    target = work / "code_contests"
    print(f"downloading the valid and test splits of {HUB_DATASET} into {target}", flush=True)
    snapshot_download(repo_id=HUB_DATASET, repo_type="dataset", local_dir=str(target),
                      allow_patterns=["data/valid-*.parquet", "data/test-*.parquet", "README.md"])
    return target


# -- writing --------------------------------------------------------------------------------------
def write(out: Path, problems: dict[str, list[dict]], info: dict, source_label: str) -> None:
    for split, (side, name) in SPLITS.items():
        folder = out / side
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / name, "w", encoding="utf-8") as fh:
            for p in problems[split]:
                fh.write(json.dumps(p, ensure_ascii=False) + "\n")
    (out / "workspace" / "README.md").write_text(README.replace("{source}", source_label), encoding="utf-8")
    info = {**info, "counts": {s: len(v) for s, v in problems.items()},
            "tests": {s: sum(len(p["tests"]) for p in v) for s, v in problems.items()}}
    (out / "protected" / "info.json").write_text(json.dumps(info, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {info['counts']['valid']} validation and {info['counts']['test']} held-out problems", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", choices=["gpu", "smoke"], required=True)
    ap.add_argument("--mode", choices=["fetch", "synthetic", "from"], required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--work", type=Path, required=True)
    ap.add_argument("--source", type=Path, default=None)
    a = ap.parse_args(argv)
    a.out.mkdir(parents=True, exist_ok=True)
    a.work.mkdir(parents=True, exist_ok=True)
    seed = secrets.randbits(63)  # the held-out draw: protected/info.json only
    if a.mode == "synthetic":
        problems = smoke_problems()
        problems["test"] = draw_held_out(problems["test"], seed)  # which are held out: problem.toml's split
        if a.profile == "gpu":
            print("gpu --mode synthetic: the hand-written smoke problems (CodeContests needs --mode fetch or from)",
                  flush=True)
        write(a.out, problems, {"profile": a.profile, "mode": "synthetic", "source": "protected/smoke",
                                "held_out_seed": seed}, "hand-written problems in CodeContests' style")
        return 0
    if a.mode == "from":
        if a.source is None or not a.source.is_dir():
            fail("--mode from needs --source DIR (the downloaded CodeContests files)")
        source = a.source
    else:
        source = download(a.work)
    problems, info = convert_source(source, seed)
    write(a.out, problems, {"profile": a.profile, "mode": a.mode, "source": f"{HUB_DATASET} ({source})",
                            "held_out_seed": seed, **info},
          f"CodeContests, {HUB_DATASET}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
