"""rust_codecontests in a real container (smoke profile): real rustc, the stand-in model behind the
key-adding proxy as services, the starting scaffold against the reference scaffold, a broken
scaffold, /protected and the key out of the participant's reach.

One container for the whole file (building the image installs Debian's rustc once: about a
minute and a half the first time, cached afterwards); then about two minutes on a 2-core machine.
"""

from __future__ import annotations

import json
import math
import os
import shutil

import pytest

from rebench_tui.assets import AssetStore
from rebench_tui.config import Settings
from rebench_tui.session import Session
from tests.conftest import ROOT

pytestmark = pytest.mark.docker
ENV_DIR = ROOT / "environments" / "rust_codecontests"
SECRET = "sk-rcc-test-9Xq2LmVb7TnSecretKeyValue"

HARNESS_CHECK = r'''
import json, sys
sys.path.insert(0, "/home/agent/solution")
import rust_harness as h
tests = [{"input": "2 3\n", "output": "5\n"}, {"input": "10 -4\n", "output": "6"}]
programs = {
    "good": "use std::io::Read;\nfn main(){let mut s=String::new();std::io::stdin().read_to_string(&mut s).unwrap();"
            "let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();println!(\"{}\",v[0]+v[1]);}\n",
    "spaced": "fn main(){ print!(\"  5 \\n\\n\"); }\n",
    "loop": "fn main(){ let mut n: u64 = 1; while n != 0 { n = n.wrapping_mul(3) | 1; } println!(\"{}\", n); }\n",
    "forks": "use std::process::Command;\nfn main(){ let _c = Command::new(\"sleep\").arg(\"1000\").spawn(); loop {} }\n",
    "no_compile": "fn main() { let x: i32 = \"not a number\"; println!(\"{}\", x) }\n",
    "panics": "fn main(){ let v: Vec<i32> = Vec::new(); println!(\"{}\", v[3]); }\n",
}
out = {}
for name, src in programs.items():
    v = h.evaluate(src, tests[:1] if name == "spaced" else tests, 1.0)
    out[name] = {"outcome": v.outcome, "compile_seconds": v.compile_seconds, "run_seconds": v.run_seconds}
print(json.dumps(out))
'''

MODEL_CHECK = r'''
import json, urllib.request, urllib.error
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
body = json.dumps({"model": "x", "messages": [{"role": "user", "content": "Solve Digit Weight in Rust."}]}).encode()
out = {}
for name, url in (("direct", "http://127.0.0.1:8700/v1/chat/completions"), ("proxy", "http://127.0.0.1:8701/v1/chat/completions")):
    req = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"}, method="POST")
    try:
        with opener.open(req, timeout=20) as r:
            out[name] = {"status": r.status, "text": json.loads(r.read())["choices"][0]["message"]["content"][:80]}
    except urllib.error.HTTPError as e:
        out[name] = {"status": e.code}
print(json.dumps(out))
'''


def every_file_bytes(folder):
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                with open(path, "rb") as fh:
                    yield path, fh.read()


@pytest.mark.timed  # its outcomes turn on the programs' time limits and the compile's wall-clock backstop
def test_smoke_in_a_container(catalog, docker_runtime, settings):
    env = catalog.get("rust_codecontests")
    store = AssetStore(Settings().cache_dir)
    store.prepare(env, "smoke", "synthetic")
    s = Session.create(env, "smoke", docker_runtime, settings.sessions, asset_store=store,
                       secrets={"CODE_MODEL_API_KEY": SECRET})
    sol = s.workspace / "solution"
    smoke = env.profile("smoke")
    try:
        # the participant's side: no key in the environment, /protected closed, the proxy open
        env_out = s.sandbox.exec(["env"]).stdout
        assert SECRET not in env_out and "CODE_MODEL_API_KEY" not in env_out
        assert "REBENCH_MODEL_URL=http://127.0.0.1:8701/v1" in env_out
        for path in ("/protected/score.py", "/protected/assets/test.jsonl", "/protected/secrets.env",
                     "/protected/smoke/digit_weight/good.rs"):
            denied = s.sandbox.exec(["cat", path])
            assert denied.exit_code != 0 and "Permission denied" in denied.stderr, path
        (s.workspace / "model_check.py").write_text(MODEL_CHECK)
        r = s.sandbox.exec(["python3", "/home/agent/model_check.py"], timeout=60)
        assert r.exit_code == 0, r.stderr[-2000:]
        reached = json.loads(r.stdout.strip().splitlines()[-1])
        assert reached["direct"]["status"] == 401  # the stand-in wants the key ...
        assert reached["proxy"]["status"] == 200 and "```rust" in reached["proxy"]["text"]  # ... the proxy adds it

        # real rustc as the participant, through the same harness the scorer imports
        (s.workspace / "harness_check.py").write_text(HARNESS_CHECK)
        r = s.sandbox.exec(["python3", "/home/agent/harness_check.py"], timeout=180)
        assert r.exit_code == 0, r.stderr[-2000:]
        verdicts = json.loads(r.stdout.strip().splitlines()[-1])
        assert {k: v["outcome"] for k, v in verdicts.items()} == {
            "good": "passed", "spaced": "passed", "loop": "timeout", "forks": "timeout",
            "no_compile": "compile_error", "panics": "runtime_error"}, verdicts
        left = s.sandbox.exec(["sh", "-c", "ps -eo args | grep -c '^sleep 1000' || true"]).stdout.strip()
        assert left == "0", "a program's child outlived its timeout"

        # every stand-in program behaves as its problem.toml says, with the container's rustc
        shutil.copy(ENV_DIR / "reference" / "check_smoke_programs.py", s.workspace / "check_smoke_programs.py")
        r = s.sandbox.exec(["python3", "/home/agent/check_smoke_programs.py", "--smoke", "/protected/smoke",
                            "--harness", "/protected/starting_solution"], user="root", timeout=400)
        assert r.exit_code == 0, r.stdout[-3000:] + r.stderr[-2000:]

        start = s.score()
        assert start.score == pytest.approx(smoke.start_score, abs=1e-9), start
        assert start.message["n_problems"] == 8 and "standard_error" in start.message
        # judged as nobody in the container: two endless loops end as timeouts, two programs do not compile
        assert start.message["outcomes"] == {"wrong_answer": 4, "timeout": 2, "compile_error": 2}, start.message
        assert start.details["model_endpoint"]["started_by"] == "service"

        saved = (sol / "solve.py").read_bytes()
        shutil.copy(ENV_DIR / "reference" / "solve.py", sol / "solve.py")
        ref = s.score()
        assert ref.score == pytest.approx(smoke.reference_score, abs=1e-9), ref
        assert ref.score > start.score
        assert ref.message["n_successes"] == 7

        (sol / "solve.py").write_text("def solve(problem:\n    return ''\n")
        broken = s.score()
        assert math.isnan(broken.score), broken
        assert "SyntaxError" in broken.message["error"] and "Traceback" in broken.message["traceback"]
        (sol / "solve.py").write_bytes(saved)
        s.close()
    finally:
        if s.lock.held:
            s.close()
        s.sandbox.stop(remove=True)
    hits = [path for path, data in every_file_bytes(s.folder) if SECRET.encode() in data]
    assert hits == [], hits
