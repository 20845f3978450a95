"""Looks for the held-out tests from the scaffold, and from inside the judge with its programs.

What it finds it reports through the outcome, the only thing of its own that leaves a scoring room:
solve() raises (a scaffold error) unless every read and write of /protected was refused, the
held-out tests with "Permission denied"; a program exits 0 (a wrong answer) when every read was
refused and no descriptor of the judge's was readable, and 3 (a runtime error) otherwise."""
import glob
import os

from _honest import solve as honest

found = []
for path in ["/protected/assets/test.jsonl", "/protected/score.py", "/protected/secrets.env",
             "/protected/smoke/digit_weight/good.rs", "/proc/1/root/protected/assets/test.jsonl",
             f"/proc/{os.getppid()}/environ", f"/proc/{os.getppid()}/mem"]:
    try:
        with open(path, "rb") as fh:
            found.append(f"READ-OK {path} {len(fh.read(1 << 20))}")
    except OSError as exc:
        found.append(f"READ-DENIED {path} {exc.strerror}")
for pattern in ["/tmp/rcc-score-*", "/tmp/rcc-score-*/*", "/protected/*"]:
    found.append(f"GLOB {pattern} {glob.glob(pattern)}")
for path in ["/protected/assets/stolen", "/protected/score.py"]:
    try:
        with open(path, "a") as fh:
            fh.write("# changed by the participant\n")
        found.append(f"WRITE-OK {path}")
    except OSError as exc:
        found.append(f"WRITE-DENIED {path} {exc.strerror}")
print("\n".join(found), flush=True)
REFUSED = (not any(line.startswith(("READ-OK", "WRITE-OK")) for line in found)
           and "READ-DENIED /protected/assets/test.jsonl Permission denied" in found)

PROGRAM = r'''
use std::fs;
fn main() {
    let mut report = String::new();
    for p in ["/protected/assets/test.jsonl", "/protected/smoke/digit_weight/good.rs", "/protected/secrets.env",
              "/proc/1/root/protected/assets/test.jsonl"] {
        match fs::read(p) {
            Ok(b) => report.push_str(&format!("READ-OK:{}:{} ", p, b.len())),
            Err(e) => report.push_str(&format!("READ-DENIED:{:?} ", e.kind())),
        }
    }
    let mut fds = 0;
    if let Ok(procs) = fs::read_dir("/proc") {
        for p in procs.flatten() {
            if let Ok(entries) = fs::read_dir(p.path().join("fd")) {
                for e in entries.flatten() {
                    if let Ok(t) = fs::read_link(e.path()) {
                        let t = t.to_string_lossy().to_string();
                        if t.contains("test.jsonl") || t.contains("input.txt") || t.contains("output.txt") {
                            if fs::read(e.path()).is_ok() { fds += 1; }
                        }
                    }
                }
            }
        }
    }
    println!("{}FD-READ:{}", report, fds);
    if report.contains("READ-OK") || !report.contains("READ-DENIED") || fds != 0 { std::process::exit(3); }
}
'''


def solve(problem):
    honest(problem)  # the model is asked as usual
    if not REFUSED:
        raise RuntimeError("the scaffold reached /protected: " + "; ".join(found))
    return PROGRAM
