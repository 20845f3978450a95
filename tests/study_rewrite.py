"""The consistent rewrite of a finished session, as a participant who can write its folder
would do it: move a score, then fix the score log, session.json and the finish row to agree, and
chain every hash again. Local checks cannot tell; only a witness can."""

from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

from rebench_tui.trajectory.audit import chain_line, genesis_hash


def rewrite_score(folder: Path, old: float, new: float) -> int:
    """Every scoring of ``old`` becomes ``new`` everywhere; returns the first changed line (1-based)."""
    lines = (folder / "audit.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(x) for x in lines]
    first = None
    for n, row in enumerate(rows, start=1):
        c = row["content"]
        if c["type"] == "intermediateScore" and c["score"] == old:
            c["score"] = new
            first = first or n
    _rewrite_score_log(folder / "score_log.csv", old, new)
    meta = json.loads((folder / "session.json").read_text(encoding="utf-8"))
    meta["final_score"] = new
    (folder / "session.json").write_text(json.dumps(meta, indent=2), encoding="utf-8")
    log_digest = hashlib.sha256((folder / "score_log.csv").read_bytes()).hexdigest()
    for row in rows:
        for part in row["content"].get("content") or []:
            if isinstance(part, dict) and part.get("event") == "session_finished":
                part["final_score"] = new
                part["files"]["score_log.csv"] = log_digest
    prev, out = genesis_hash(rows[0]["runId"]), []
    for row in rows:
        line, prev = chain_line(row, prev)
        out.append(line)
    (folder / "audit.jsonl").write_text("".join(out), encoding="utf-8")
    return first


def _rewrite_score_log(path: Path, old: float, new: float) -> None:
    with open(path, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    for r in rows[1:]:
        if float(r[1]) == old:
            r[1] = repr(float(new))
    with open(path, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh).writerows(rows)
