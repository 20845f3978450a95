"""rust_codecontests: the smoke problems, prepare.py, the stand-in model and the key-adding proxy
over real loopback HTTP, the scaffold runner, the compile-and-run harness and score.py end to end.

The harness and scorer tests compile real Rust with the host's `rustc` and are skipped where
there is none (the integration test runs the same paths in the environment's container with
Debian's rustc). The scorer is run as a subprocess on a home and a protected folder laid out as
the container has them; the smoke scores are exact (the stand-in is deterministic), so the
manifest's figures are checked with a tolerance of 1e-9. About a minute on a 2-core machine.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tomllib
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.modules import load_file

ENV = Path(__file__).resolve().parents[2] / "environments" / "rust_codecontests"
MANIFEST = tomllib.loads((ENV / "environment.toml").read_text())
SMOKE = MANIFEST["profiles"]["smoke"]
KEY = "sk-unit-test-key-4f1c"
HAS_RUSTC = shutil.which("rustc") is not None
needs_rustc = pytest.mark.skipif(not HAS_RUSTC, reason="no rustc on this machine (the integration test covers it)")


server_mod = load_file("rcc_model_server", ENV / "protected" / "model_server.py")
proxy_mod = load_file("rcc_model_proxy", ENV / "protected" / "model_proxy.py")
harness = load_file("rcc_rust_harness", ENV / "solution" / "rust_harness.py")
oracles = load_file("rcc_smoke_oracles", ENV / "reference" / "smoke_oracles.py")
prepare = load_file("rcc_prepare", ENV / "prepare.py")
reference = None  # reference/solve.py imports the solution's modules; loaded in the scorer's process only

PROBLEMS = {p["slug"]: p for p in server_mod.load_problems(ENV / "protected" / "smoke")}
DOCS = {t.parent.name: tomllib.loads(t.read_text()) for t in sorted((ENV / "protected" / "smoke").glob("*/problem.toml"))}


# -- the hand-written problems ------------------------------------------------------------------
def test_smoke_problems_are_well_formed_and_split():
    assert len(DOCS) == 14
    splits = {s: sorted(k for k, d in DOCS.items() if d["split"] == s) for s in ("valid", "test")}
    assert len(splits["valid"]) == 6 and len(splits["test"]) == 8
    for slug, d in DOCS.items():
        assert 1 <= d["difficulty"] <= 4, slug
        assert d["bad_kind"] in ("compile_error", "wrong_answer", "timeout"), slug
        assert d["public_tests"] and d["hidden_tests"], slug
        assert (ENV / "protected" / "smoke" / slug / "good.rs").read_text() != (ENV / "protected" / "smoke" / slug / "bad.rs").read_text()
    # the stand-in tells problems apart: no problem's markers occur in another's statement
    for a in PROBLEMS.values():
        for b in PROBLEMS.values():
            if a is not b:
                assert not any(m in server_mod.squash(b["name"] + " " + DOCS[b["slug"]]["description"]) for m in a["markers"])


def test_expected_outputs_agree_with_the_python_oracles():
    assert oracles.check() == []


# -- prepare.py ---------------------------------------------------------------------------------
@pytest.mark.parametrize("profile", ["smoke", "gpu"])
def test_prepare_synthetic_writes_the_validation_and_held_out_splits(tmp_path, profile):
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(ENV / "prepare.py"), "--profile", profile, "--mode", "synthetic",
                        "--out", str(out), "--work", str(tmp_path / "work")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    valid = harness.load_problems(out / "workspace" / "valid.jsonl")
    test = harness.load_problems(out / "protected" / "test.jsonl")
    assert len(valid) == 6 and len(test) == 8
    assert not {p["name"] for p in valid} & {p["name"] for p in test}
    assert not any(p["name"] in (out / "workspace" / "valid.jsonl").read_text() for p in test)
    for p in valid + test:
        assert p["tests"][:len(p["public_tests"])] == p["public_tests"] and len(p["tests"]) > len(p["public_tests"])
        assert set(harness.public_view(p)) == {"name", "description", "public_tests", "time_limit", "memory_limit_bytes"}
    info = json.loads((out / "protected" / "info.json").read_text())
    assert info["counts"] == {"valid": 6, "test": 8}


def _cc_row(name, public=1, private=1, generated=0, seconds=2, nanos=500_000_000, description="Print the sum."):
    tests = lambda n, tag: {"input": [f"{tag}{i}\n" for i in range(n)], "output": [f"{tag}{i}!\n" for i in range(n)]}
    return {"name": name, "description": description, "public_tests": tests(public, "p"),
            "private_tests": tests(private, "q"), "generated_tests": tests(generated, "g"), "source": 2, "difficulty": 7,
            "cf_rating": 1200, "time_limit": {"seconds": seconds, "nanos": nanos}, "memory_limit_bytes": 0,
            "solutions": {"language": [2], "solution": ["int main(){}"]}}


def test_codecontests_rows_convert_to_the_problem_format():
    p = prepare.convert_row(_cc_row("1A. Sum", public=2, private=1, generated=80))
    assert p["public_tests"] == [{"input": "p0\n", "output": "p0!\n"}, {"input": "p1\n", "output": "p1!\n"}]
    assert len(p["tests"]) == 2 + 1 + prepare.MAX_GENERATED and p["tests"][:2] == p["public_tests"]
    assert p["time_limit"] == 2.5 and p["memory_limit_bytes"] == prepare.DEFAULT_MEMORY
    assert p["cf_rating"] == 1200 and "solutions" not in p
    assert prepare.convert_row(_cc_row("empty", public=0, private=0)) is None
    assert prepare.convert_row({**_cc_row("no limit"), "time_limit": None})["time_limit"] == prepare.DEFAULT_TIME_LIMIT


def test_prepare_from_a_folder_of_codecontests_json_lines(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    for split, names in (("valid", ["v1", "v2"]), ("test", ["t1", "t2", "t3"])):
        rows = [_cc_row(n) for n in names] + [_cc_row(f"{split}-untested", public=0, private=0)]
        (src / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out"
    r = subprocess.run([sys.executable, str(ENV / "prepare.py"), "--profile", "gpu", "--mode", "from", "--source", str(src),
                        "--out", str(out), "--work", str(tmp_path / "work")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert [p["name"] for p in harness.load_problems(out / "workspace" / "valid.jsonl")] == ["v1", "v2"]
    assert sorted(p["name"] for p in harness.load_problems(out / "protected" / "test.jsonl")) == ["t1", "t2", "t3"]
    info = json.loads((out / "protected" / "info.json").read_text())
    assert isinstance(info["held_out_seed"], int)  # drawn here, kept on the protected side only
    assert info["dropped_without_tests"] == {"valid": 1, "test": 1}
    missing = subprocess.run([sys.executable, str(ENV / "prepare.py"), "--profile", "gpu", "--mode", "from", "--source",
                              str(tmp_path / "work"), "--out", str(tmp_path / "o2"), "--work", str(tmp_path / "w2")],
                             capture_output=True, text=True, timeout=60)
    assert missing.returncode != 0 and "valid" in missing.stderr


# -- the stand-in's rule ------------------------------------------------------------------------
def _statement(slug):
    d = DOCS[slug]
    return f"{d['name']}\n\n{d['description']}"


def _examples(slug):
    return "\n".join(f"Input:\n{t['input']}\nOutput:\n{t['output']}" for t in DOCS[slug]["public_tests"])


def test_the_starting_prompt_gets_the_bad_program_everywhere():
    for slug in PROBLEMS:
        d = server_mod.decide(list(PROBLEMS.values()), [{"role": "user", "content":
                              "Solve the following competitive programming problem in Rust.\n\n" + DOCS[slug]["description"]}])
        assert (d["problem"], d["variant"], d["q"]) == (slug, "bad", 0)
        assert PROBLEMS[slug]["bad"] in d["reply"]


def test_each_hint_counts_and_good_comes_at_the_problems_difficulty():
    problems = list(PROBLEMS.values())
    for slug, p in PROBLEMS.items():
        system = {"role": "system", "content": "You write Rust."}
        user = {"role": "user", "content": f"Solve in Rust, step by step.\n{_statement(slug)}\n{_examples(slug)}"}
        d = server_mod.decide(problems, [system, user])
        assert d["hints"] == ["examples", "step_by_step", "system"]
        assert d["variant"] == ("good" if p["difficulty"] <= 3 else "bad")
        retry = [system, user, {"role": "assistant", "content": "```rust\nfn main(){}\n```"},
                 {"role": "user", "content": "That failed: wrong answer on the first example."}]
        d = server_mod.decide(problems, retry)
        assert d["q"] == 4 and d["variant"] == "good" and p["good"] in d["reply"]
    assert server_mod.decide(problems, [{"role": "user", "content": "Write hello world in Rust."}])["variant"] == "none"
    py = server_mod.decide(problems, [{"role": "user", "content": _statement("digit_weight")}])
    assert py["variant"] == "python" and "```python" in py["reply"]


# -- the stand-in and the proxy over loopback HTTP ----------------------------------------------
def _post(url, body, headers=None):
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with opener.open(req, timeout=20) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture
def model_chain():
    """The stand-in wanting KEY, and the proxy that adds it: both real servers on loopback ports."""
    standin = server_mod.serve("127.0.0.1", 0, require_key=KEY)
    upstream = f"http://127.0.0.1:{standin.server_address[1]}/v1"
    proxy = proxy_mod.serve("127.0.0.1", 0, upstream, KEY, "stand-in-code-model")
    yield upstream, f"http://127.0.0.1:{proxy.server_address[1]}/v1"
    for s in (proxy, standin):
        s.shutdown()
        s.server_close()


def test_the_stand_in_needs_the_key_and_the_proxy_adds_it(model_chain):
    upstream, proxied = model_chain
    body = {"model": "anything", "n": 2, "messages": [{"role": "user", "content": "In Rust:\n" + _statement("tile_divisor")}]}
    status, data = _post(upstream + "/chat/completions", body)
    assert status == 401 and b"API key" in data
    status, data = _post(upstream + "/chat/completions", body, {"Authorization": "Bearer wrong"})
    assert status == 401
    status, data = _post(proxied + "/chat/completions", body)
    assert status == 200, data
    doc = json.loads(data)
    assert doc["model"] == "code-model" and len(doc["choices"]) == 2
    assert PROBLEMS["tile_divisor"]["bad"] in doc["choices"][0]["message"]["content"]
    assert KEY.encode() not in data
    status, data = _post(proxied + "/chat/completions", {**body, "stream": True})
    assert status == 400
    status, data = _post(proxied + "/chat/completions", {"messages": "not a list"})
    assert status == 400  # the stand-in's refusal comes back through the proxy as it is


def test_the_proxy_without_an_upstream_answers_503_and_lists_its_model():
    proxy = proxy_mod.serve("127.0.0.1", 0, None, None, None)
    try:
        url = f"http://127.0.0.1:{proxy.server_address[1]}/v1"
        status, data = _post(url + "/chat/completions", {"messages": [{"role": "user", "content": "hi"}]})
        assert status == 503 and b"CODE_MODEL_BASE_URL" in data
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        with opener.open(url + "/models", timeout=10) as r:
            assert json.loads(r.read())["data"][0]["id"] == "code-model"
    finally:
        proxy.shutdown()
        proxy.server_close()


def test_the_proxy_reads_a_missing_setting_from_the_protected_secrets_file(tmp_path, monkeypatch):
    (tmp_path / "secrets.env").write_text(f"CODE_MODEL_API_KEY={KEY}\nCODE_MODEL_BASE_URL=http://example.invalid/v1/\n")
    monkeypatch.setenv("REBENCH_PROTECTED", str(tmp_path))
    for name in ("CODE_MODEL_API_KEY", "CODE_MODEL_BASE_URL", "CODE_MODEL_NAME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("CODE_MODEL_NAME", "from-env")
    assert proxy_mod.settings_from_env() == {"upstream": "http://example.invalid/v1", "key": KEY, "model": "from-env"}


# -- the scaffold runner, driven by the scorer's own loop ----------------------------------------
LIB = Path(__file__).resolve().parents[2] / "rebench_tui" / "runtime" / "lib"


@pytest.fixture(scope="module")
def score_mod():
    sys.path.insert(0, str(LIB))
    return load_file("rcc_score", ENV / "protected" / "score.py")


def _run_runner(tmp_path, score_mod, solve_source, problems, budget=1.0, parallel=2):
    sol = tmp_path / "solution"
    sol.mkdir(exist_ok=True)
    (sol / "solve.py").write_text(solve_source)
    details: dict = {}
    cfg = {"solve_seconds": budget, "parallel": parallel}
    records = score_mod.run_scaffold(problems, harness, str(tmp_path), "smoke", "http://127.0.0.1:9/v1", cfg, details)
    return records, details


def test_the_runner_abandons_a_solve_over_budget_and_reports_the_others(tmp_path, score_mod):
    solve = ("import time\nprint('chatter goes to its own output')\n"
             "def solve(p):\n    if p['name'] == 'slow':\n        time.sleep(600)\n"
             "    if p['name'] == 'raises':\n        raise ValueError('boom')\n"
             "    if p['name'] == 'number':\n        return 7\n"
             "    if p['name'] == 'huge':\n        return 'x' * (300 * 1024)\n    return 'fn main(){}'\n")
    problems = [{"name": n, "description": n, "tests": [{"input": "secret", "output": "hidden"}]}
                for n in ("slow", "ok", "raises", "number", "huge")]
    by, details = _run_runner(tmp_path, score_mod, solve, problems)
    assert by[0]["status"] == "timeout" and by[1]["status"] == "ok" and by[1]["code"] == "fn main(){}"
    assert by[2]["status"] == "error" and "boom" in by[2]["traceback"] and by[3]["status"] == "bad_return"
    assert by[4]["status"] == "too_big" and "code" not in by[4]
    assert "chatter" in details["participant_stdout_tail"]
    assert 0.9 < by[0]["seconds"] < 5


def test_the_runner_never_sees_the_hidden_tests(tmp_path, score_mod):
    solve = "import json\ndef solve(p):\n    return json.dumps(p)\n"
    problems = [{"name": "a", "description": "d", "public_tests": [{"input": "1", "output": "2"}],
                 "tests": [{"input": "1", "output": "2"}, {"input": "secret-input", "output": "secret-output"}],
                 "time_limit": 1.0, "memory_limit_bytes": 1 << 20}]
    by, _details = _run_runner(tmp_path, score_mod, solve, problems)
    seen = json.loads(by[0]["code"])
    assert set(seen) == {"name", "description", "public_tests", "time_limit", "memory_limit_bytes"}
    assert "secret" not in by[0]["code"]


def test_the_runner_reports_a_scaffold_that_cannot_be_imported(tmp_path, score_mod):
    with pytest.raises(score_mod.ScaffoldFailed) as info:
        _run_runner(tmp_path, score_mod, "def solve(p:\n", [{"name": "a"}])
    assert "SyntaxError" in info.value.message["error"] and "Traceback" in info.value.message["traceback"]
    with pytest.raises(score_mod.ScaffoldFailed) as info:
        _run_runner(tmp_path, score_mod, "x = 1\n", [{"name": "a"}])
    assert "defines no function solve" in info.value.message["error"]
    with pytest.raises(score_mod.ScaffoldFailed) as info:
        _run_runner(tmp_path, score_mod, "import os\nprint('{\"score\": 1.0}')\nos._exit(0)\n", [{"name": "a"}])
    assert "exit status 0" in info.value.message["error"] and "score" in info.value.message["scaffold_output_tail"]


def test_answers_are_checked_as_untrusted_data(score_mod):
    check = score_mod.checked_answer
    assert check({"status": "ok", "code": "fn main(){}"}, 100) == {"status": "ok", "code": "fn main(){}"}
    assert check({"status": "ok", "code": 5}, 100)["status"] == "bad_answer"
    assert check({"status": "ok", "code": "\ud800"}, 100)["status"] == "bad_answer"
    assert check({"status": "ok", "code": "x" * 101}, 100)["status"] == "too_big"
    assert check({"status": "passed"}, 100)["status"] == "bad_answer"
    assert check({"status": "error", "error": "e" * 5000, "traceback": 3}, 100) == {"status": "error", "error": "e" * 1000}


# -- the harness with real rustc ----------------------------------------------------------------
@needs_rustc
def test_the_harness_passes_good_programs_and_fails_loops_and_compile_errors():
    tests = [{"input": "3 4\n", "output": "7\n"}, {"input": "-1 1", "output": "0"}]
    add = ("use std::io::Read;\nfn main(){let mut s=String::new();std::io::stdin().read_to_string(&mut s).unwrap();"
           "let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();print!(\"  {}\\n\\n\",v[0]+v[1]);}\n")
    v = harness.evaluate(add, tests, 1.0)
    assert v.outcome == "passed" and v.tests_passed == 2
    v = harness.evaluate(add.replace("v[0]+v[1]", "v[0]*v[1]"), tests, 1.0)
    assert v.outcome == "wrong_answer" and v.failed_test == 0 and "12" in v.detail
    v = harness.evaluate("fn main(){ let mut n: u64 = 1; while n != 0 { n = n.wrapping_mul(3) | 1; } println!(\"{}\", n); }\n",
                         tests, 1.0)
    assert v.outcome == "timeout" and v.run_seconds < 10
    v = harness.evaluate("fn main() { let x: i32 = \"text\"; }\n", tests, 1.0)
    assert v.outcome == "compile_error" and "mismatched types" in v.detail
    v = harness.evaluate("fn main(){ std::process::exit(3); }\n", tests, 1.0)
    assert v.outcome == "runtime_error"
    assert harness.evaluate("   ", tests, 1.0).outcome == "no_code"
    assert harness.outputs_match("1  2\n3\n", "1 2 3") and not harness.outputs_match("1 2", "1 2 0")


@needs_rustc
def test_links_a_program_plants_in_its_folder_lead_the_harness_nowhere(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("untouched\n")
    plant = ("use std::io::Read;\nuse std::os::unix::fs::symlink;\nfn main(){let mut s=String::new();"
             "std::io::stdin().read_to_string(&mut s).unwrap();"
             f"for n in [\"input.txt\",\"output.txt\",\"rustc.log\",\"main.rs\"] {{ let _ = std::fs::remove_file(n); "
             f"let _ = symlink(\"{target}\", n); }}"
             "let v:Vec<i64>=s.split_whitespace().map(|x|x.parse().unwrap()).collect();println!(\"{}\",v[0]+v[1]);}\n")
    v = harness.evaluate(plant, [{"input": "1 2\n", "output": "3"}, {"input": "5 5\n", "output": "10"}], 1.0)
    assert v.outcome == "passed", v
    assert target.read_text() == "untouched\n"


@needs_rustc
def test_programs_are_confined_to_their_descriptors(tmp_path):
    c = harness.confinement()
    if not c.available:
        pytest.skip(c.reason)
    leak = tmp_path / "leak"
    prog = ("use std::io::{Read, Write};\nfn main(){let mut s=String::new();std::io::stdin().read_to_string(&mut s).unwrap();"
            f"let f=std::fs::File::create(\"{leak}\").map(|_|\"FILE-OK\").unwrap_or(\"FILE-DENIED\");"
            "let n=std::net::TcpStream::connect(\"127.0.0.1:9\").map(|_|\"NET-OK\").unwrap_or(\"NET-DENIED\");"
            "let e=std::net::TcpStream::connect(\"127.0.0.1:9\").err().and_then(|e|e.raw_os_error()).unwrap_or(0);"
            "let r=std::fs::read_to_string(\"/etc/hostname\").map(|_|\"READ-OK\").unwrap_or(\"READ-DENIED\");"
            "let t=std::thread::spawn(||1).join().unwrap();"
            "println!(\"{} {} {} {} {}\",f,n,e,r,t);std::io::stdout().flush().unwrap();}\n")
    with harness.Workdir(parent=str(tmp_path)) as wd:
        assert harness.compile_rust(prog, wd)[0] == "ok"
        status, printed, _s = harness.run_test(wd, "x\n", 2.0)
    assert status == "ok" and printed.split() == ["FILE-DENIED", "NET-DENIED", "1", "READ-OK", "1"], printed
    assert not leak.exists()  # EPERM (1) from socket(): refused by the filter, not a closed port


def _inotify_watch(path: str):
    """A real inotify watch on ``path`` (open and access events), as a participant's helper would
    set one; returns a function that says how many events it has seen."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)
    assert fd >= 0 and libc.inotify_add_watch(fd, path.encode(), 0x20 | 0x01) >= 0  # IN_OPEN | IN_ACCESS

    def events() -> int:
        n = 0
        while True:
            try:
                data = os.read(fd, 65536)
            except BlockingIOError:
                return n
            n += len(data) // 16 if data else 0  # at least one record per 16+ bytes; 0 is what matters

    return events


@pytest.mark.skipif(os.geteuid() != 0, reason="running programs as another user in a folder of their own needs root")
def test_a_judged_program_opens_nothing_another_process_can_watch(tmp_path):
    """The judge (root, programs as nobody) runs each program in its own build folder as its whole
    filesystem: a program that tries to signal its hidden input by opening world-readable files
    reaches none of them, so a participant's inotify watch on them sees nothing."""
    import shutil as _shutil
    import tempfile

    shared = tempfile.mkdtemp(prefix="rcc-watch-", dir="/tmp")  # pytest's own folders are root-only
    try:
        os.chmod(shared, 0o755)
        beacon = os.path.join(shared, "beacon")
        with open(beacon, "w") as fh:
            fh.write("world-readable\n")
        os.chmod(beacon, 0o644)
        prog = ("use std::io::Read;\nfn main(){let mut s=String::new();std::io::stdin().read_to_string(&mut s).unwrap();"
                f"let mut seen=0;for _ in 0..s.trim().len(){{if std::fs::read(\"{beacon}\").is_ok(){{seen+=1;}}}}"
                "let p=std::fs::read_to_string(\"/proc/self/status\").map(|_|\"PROC-OK\").unwrap_or(\"PROC-NONE\");"
                "println!(\"{} {}\",seen,p);}\n")
        events = _inotify_watch(beacon)
        nobody = (65534, 65534)
        with harness.Workdir(nobody, shared) as wd:
            assert harness.compile_rust(prog, wd)[0] == "ok"  # (as root: this machine's rustc may be root's own)
            events()  # (the compiler's own reads, if any, are not the program's)
            status, printed, _s = harness.run_test(wd, "secret\n", 2.0, run_as=nobody)
        assert status == "ok" and printed.split() == ["0", "PROC-NONE"], printed
        assert events() == 0, "a watch on a world-readable file saw the judged program"
    finally:
        _shutil.rmtree(shared, ignore_errors=True)


# -- the scorer end to end ----------------------------------------------------------------------
@pytest.fixture(scope="module")
def layout(tmp_path_factory):
    """A home and a protected folder laid out as in the container, with the smoke assets."""
    root = tmp_path_factory.mktemp("rcc")
    out = root / "prepared"
    r = subprocess.run([sys.executable, str(ENV / "prepare.py"), "--profile", "smoke", "--mode", "synthetic",
                        "--out", str(out), "--work", str(root / "work")], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    home, protected = root / "home", root / "protected"
    shutil.copytree(ENV / "protected", protected)
    shutil.copytree(ENV / "solution", protected / "starting_solution")
    shutil.copytree(out / "protected", protected / "assets")
    shutil.copytree(out / "workspace", home / "assets")
    return home, protected


def _score(layout, solve_source: str | None, model_url: str) -> dict:
    home, protected = layout
    sol = home / "solution"
    shutil.rmtree(sol, ignore_errors=True)
    shutil.copytree(ENV / "solution", sol)
    if solve_source is not None:
        (sol / "solve.py").write_text(solve_source)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("REBENCH_", "CODE_MODEL_"))}
    env.update(REBENCH_HOME=str(home), REBENCH_PROTECTED=str(protected), REBENCH_PROFILE="smoke",
               REBENCH_MODEL_URL=model_url, PYTHONDONTWRITEBYTECODE="1", REBENCH_SCORER_LIB=str(LIB))
    r = subprocess.run([sys.executable, str(protected / "score.py")], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.slow
@needs_rustc
def test_the_scorer_reproduces_the_smoke_figures_through_the_proxy(layout, model_chain):
    _upstream, proxied = model_chain
    start = _score(layout, None, proxied)
    assert start["details"]["model_endpoint"]["started_by"] == "service"
    assert start["score"] == pytest.approx(SMOKE["start_score"], abs=1e-9), start["message"]
    assert start["message"]["n_problems"] == 8 and start["message"]["n_successes"] == 0
    assert {r["outcome"] for r in start["details"]["per_problem"]} == {"wrong_answer", "timeout", "compile_error"}
    ref = _score(layout, (ENV / "reference" / "solve.py").read_text(), proxied)
    assert ref["score"] == pytest.approx(SMOKE["reference_score"], abs=1e-9), ref["details"]["per_problem"]
    assert ref["message"]["n_successes"] == 7
    assert ref["message"]["standard_error"] == pytest.approx(math.sqrt(0.875 * 0.125 / 8), abs=1e-6)
    failed = [r["name"] for r in ref["details"]["per_problem"] if r["outcome"] != "passed"]
    assert failed == ["Booking Blocks"]  # its bad program passes the examples: testing cannot catch it


@pytest.mark.slow  # three scorings that each wait for a model service that never answers
@needs_rustc
def test_a_broken_scaffold_scores_nan_with_the_traceback(layout):
    # no service answers here: the scorer starts the stand-in itself (and says so)
    broken = _score(layout, "import os\ndef solve(problem:\n    return ''\n", "http://127.0.0.1:9/v1")
    assert broken["score"] == "NaN"
    assert "SyntaxError" in broken["message"]["error"] and "Traceback" in broken["message"]["traceback"]
    assert broken["details"]["model_endpoint"]["started_by"] == "scorer (stand-in)"
    raising = _score(layout, "def solve(problem):\n    raise RuntimeError('no model today')\n", "http://127.0.0.1:9/v1")
    assert raising["score"] == "NaN" and "no model today" in raising["message"]["error"]
    dies = _score(layout, "import os\ndef solve(problem):\n    os._exit(4)\n", "http://127.0.0.1:9/v1")
    assert dies["score"] == "NaN" and "exit status 4" in dies["message"]["error"]


class _JudgeOnly:
    """The harness as judge_all asks it (one CPU, confinement available); each test gives its own ``evaluate``."""

    def available_cpus(self):
        return 1

    def confinement(self):
        return type("C", (), {"available": True, "reason": ""})()

    def standard_error(self, k, n):
        return 0.0


def test_score_details_say_what_failed_without_quoting_the_expected_output(score_mod):
    """A judged program that only looks answers up needs the expected outputs: they must not reach
    the record (the participant reads it). What the program printed stays (it is the program's)."""

    class Harness(_JudgeOnly):
        def evaluate(self, code, tests, limit, **kw):
            return harness.Verdict("wrong_answer", f"test 0: expected {tests[0]['output']!r}, got 'PRINTED'", 0, 1)

    problems = [{"name": "a", "tests": [{"input": "in", "output": "SECRET-OUT"}]}]
    details: dict = {}
    score_mod.judge_all(problems, {0: {"status": "ok", "code": "fn main(){}"}}, Harness(), None, "/tmp", details)
    (row,) = details["per_problem"]
    assert "SECRET-OUT" not in json.dumps(details)
    assert row["outcome"] == "wrong_answer" and row["detail"].startswith("test 0: wrong answer") and "PRINTED" in row["detail"]


def test_in_a_scoring_room_nothing_the_scaffold_or_its_programs_wrote_is_in_the_details(score_mod, monkeypatch):
    """In a room the scaffold and its programs hold the held-out problems, and the participant reads
    the result: a problem's name, what a program printed, the compiler's messages (they quote the
    program) and what solve() raised stay out; the scorer's own words and the sizes stay in."""

    class Harness(_JudgeOnly):
        def evaluate(self, code, tests, limit, **kw):
            if code == "compile":
                return harness.Verdict("compile_error", "error[E0425]: `SECRET-IN-SOURCE` not found", tests_total=1)
            return harness.Verdict("wrong_answer", f"test 0: expected {tests[0]['output']!r}, got 'SECRET-INPUT-ECHO'", 0, 1)

    monkeypatch.setattr(score_mod, "HELD", True)
    problems = [{"name": f"SECRET-NAME-{i}", "tests": [{"input": "SECRET-INPUT-ECHO", "output": "SECRET-OUT"}]} for i in range(3)]
    records = {0: {"status": "ok", "code": "fn main(){}"}, 1: {"status": "ok", "code": "compile"},
               2: {"status": "error", "error": "SECRET-RAISED"}}
    details: dict = {}
    score_mod.judge_all(problems, records, Harness(), None, "/tmp", details)
    assert "SECRET" not in json.dumps(details), details
    rows = details["per_problem"]
    assert [r["problem"] for r in rows] == [0, 1, 2] and not any("name" in r for r in rows)
    assert [r["outcome"] for r in rows] == ["wrong_answer", "compile_error", "scaffold_error"]
    assert rows[0]["detail"].startswith("test 0: wrong answer") and "withheld" in rows[0]["detail"]
    assert "(19 characters)" in rows[0]["detail"]  # 'SECRET-INPUT-ECHO' with its quotes: the size stays
    assert "compile error" in rows[1]["detail"] and "withheld" in rows[2]["detail"]
    value, message = score_mod.judge_all(problems, {i: {"status": "error", "error": "SECRET-RAISED", "traceback": "T" * 9}
                                                    for i in range(3)}, Harness(), None, "/tmp", {})
    assert math.isnan(value) and message["error"] == "solve() raised on every problem"
    kept = score_mod.withhold(message, score_mod.PARTICIPANT_TEXT, score_mod.WITHHELD_NOTE)
    assert "SECRET" not in json.dumps(kept) and kept["traceback"]["chars"] == 9 and "evaluate.py" in kept["first_error"]["withheld"]
