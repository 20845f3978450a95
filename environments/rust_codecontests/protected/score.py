"""Scorer for rust_codecontests: the fraction of held-out problems the participant's scaffold solves.

Run by the workstation as root with REBENCH_HOME, REBENCH_PROTECTED, REBENCH_PROFILE and the
profile's env (REBENCH_MODEL_URL). Prints one JSON line last on stdout:

    {"score": n_successes / n_problems or "NaN", "message": {...}, "details": {...}}

Steps
1. Read the held-out problems ($REBENCH_PROTECTED/assets/test.jsonl) and the compile/run harness
   from the pristine starting solution ($REBENCH_PROTECTED/starting_solution/rust_harness.py),
   both as root.
2. Make sure the code model answers at REBENCH_MODEL_URL (the profile's service: the loopback
   proxy that adds the API key, or in smoke the stand-in behind it). If it does not, start the
   same server inside this process on a free loopback port (smoke: the stand-in; gpu: the proxy,
   configured from $REBENCH_PROTECTED/secrets.env) and give the scaffold that URL instead.
3. Run the scaffold: scaffold_runner.py executes as the owner of the home folder (agent; no
   protected group, a clean environment without secrets), imports solution/solve.py and calls
   solve(problem) on each problem without its hidden tests, PARALLEL at a time, each within
   SOLVE_SECONDS. If solve.py cannot be imported, the runner dies, or solve() raises on every
   problem, the score is NaN with the reason.
4. Judge each returned program with rust_harness.evaluate as the user nobody (in a container):
   rustc -O with 3 s of CPU time, every test with the problem's time limit, outputs compared
   after splitting on whitespace; as many programs at once as there are CPUs.
5. Score = solved / problems. The message has n_problems, n_successes, standard_error
   (sqrt(p(1-p)/n)) and counts of each outcome; per-problem verdicts stay in the details.
"""

from __future__ import annotations

import importlib.util
import json
import math
import os
import pwd
import queue
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.request
from concurrent.futures import ThreadPoolExecutor

HERE = os.path.dirname(os.path.abspath(__file__))
PROFILES = {
    # solve_seconds: budget of one solve() call; parallel: solve() calls at once
    "gpu": {"solve_seconds": 120.0, "parallel": 20},
    "smoke": {"solve_seconds": 30.0, "parallel": 4},
}
DEFAULT_MODEL_URL = "http://127.0.0.1:8701/v1"
STARTUP_SLACK = 60.0  # on top of the solve budgets: importing the scaffold, starting threads
HEALTH_WAIT = 10.0  # a service started with the container may still be coming up
DEFAULT_TIME_LIMIT = 2.0
_RESULT_OUT = None


class SetupError(Exception):
    """Not the participant's fault: missing data or harness, no model endpoint."""


def emit(score: float, message: dict, details: dict | None = None) -> None:
    line = json.dumps({"score": score if math.isfinite(score) else "NaN", "message": message, "details": details or {}})
    out = _RESULT_OUT or sys.stdout
    sys.stderr.flush()
    out.write(line + "\n")
    out.flush()
    os._exit(0)


def load_module(name: str, path: str):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    saved, sys.dont_write_bytecode = sys.dont_write_bytecode, True
    try:
        spec.loader.exec_module(module)
    finally:
        sys.dont_write_bytecode = saved
    return module


# -- the model endpoint -------------------------------------------------------------------------
def healthy(url: str, wait: float) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    deadline = time.monotonic() + wait
    while True:
        try:
            with opener.open(url.rstrip("/") + "/models", timeout=3) as resp:
                if resp.status == 200:
                    return True
        except OSError:
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.5)


def model_endpoint(profile: str, details: dict) -> str:
    url = os.environ.get("REBENCH_MODEL_URL") or DEFAULT_MODEL_URL
    if healthy(url, HEALTH_WAIT):
        details["model_endpoint"] = {"url": url, "started_by": "service"}
        return url
    if profile == "smoke":
        server = load_module("rcc_model_server", os.path.join(HERE, "model_server.py")).serve("127.0.0.1", 0)
        how = "scorer (stand-in)"
    else:
        proxy = load_module("rcc_model_proxy", os.path.join(HERE, "model_proxy.py"))
        s = proxy.settings_from_env()
        if not s["upstream"]:
            raise SetupError(f"no model answers at {url} and the scorer has no CODE_MODEL_BASE_URL to start a proxy")
        server = proxy.serve("127.0.0.1", 0, s["upstream"], s["key"], s["model"])
        how = "scorer (proxy)"
    local = f"http://127.0.0.1:{server.server_address[1]}/v1"
    details["model_endpoint"] = {"url": local, "started_by": how, "service_url_not_answering": url}
    return local


# -- the scaffold ---------------------------------------------------------------------------
def users(home: str, details: dict) -> tuple[tuple[int, int] | None, tuple[int, int] | None]:
    """(scaffold user, program user): the home's owner and nobody in a container; None elsewhere."""
    if os.environ.get("REBENCH_ISOLATED") != "1" or os.geteuid() != 0:
        details["users"] = "not isolated: the scaffold and the programs run as the scorer's user"
        return None, None
    st = os.stat(home)
    if st.st_uid == 0:
        raise SetupError(f"{home} is owned by root; the scaffold must not run as root")
    try:
        nobody = pwd.getpwnam("nobody")
        program = (nobody.pw_uid, nobody.pw_gid)
    except KeyError:
        program = (st.st_uid, st.st_gid)
    details["users"] = {"scaffold_uid": st.st_uid, "program_uid": program[0]}
    return (st.st_uid, st.st_gid), program


def scaffold_env(home: str, profile: str, url: str, cfg: dict, isolated: bool) -> dict[str, str]:
    env = {
        "HOME": home, "USER": "agent", "LOGNAME": "agent", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1",
        "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "REBENCH_HOME": home, "REBENCH_PROFILE": profile, "REBENCH_MODEL_URL": url, "REBENCH_SCORING": "1",
        "REBENCH_SOLVE_SECONDS": f"{cfg['solve_seconds']:g}", "REBENCH_PARALLEL": str(cfg["parallel"]),
    }
    if not isolated:  # the local runtime: keep the user's PATH and rustup working
        for key in ("PATH", "RUSTUP_HOME", "CARGO_HOME", "RUSTUP_TOOLCHAIN", "USER", "LOGNAME"):
            if key in os.environ:
                env[key] = os.environ[key]
        # rustup finds its toolchains under the real home, which HOME no longer names
        real_home = os.path.expanduser("~")
        for key, name in (("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")):
            if key not in env and os.path.isdir(os.path.join(real_home, name)):
                env[key] = os.path.join(real_home, name)
    return env


def tail(path: str, n: int = 3000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - n))
            return fh.read().decode("utf-8", "replace")
    except OSError:
        return ""


def run_scaffold(problems: list[dict], harness, home: str, profile: str, url: str, cfg: dict,
                 scaffold_user: tuple[int, int] | None, work: str, details: dict) -> tuple[dict[int, dict], str | None, str]:
    """({index: record}, fatal error or None, the runner's stderr tail)."""
    folder = tempfile.mkdtemp(prefix="scaffold-", dir=work)
    problems_path = os.path.join(folder, "problems.json")
    with open(problems_path, "w", encoding="utf-8") as fh:
        json.dump([harness.public_view(p) for p in problems], fh)
    if scaffold_user is not None:
        for path in (folder, problems_path):
            os.chown(path, *scaffold_user)
    stderr_path = os.path.join(work, "scaffold_stderr.log")
    with open(os.path.join(HERE, "scaffold_runner.py"), encoding="utf-8") as fh:
        runner = fh.read()
    kwargs = {} if scaffold_user is None else {"user": scaffold_user[0], "group": scaffold_user[1], "extra_groups": []}
    solution = os.path.join(home, "solution")
    if not os.path.isdir(solution):
        return {}, f"{solution} does not exist", ""
    env = scaffold_env(home, profile, url, cfg, scaffold_user is not None or os.environ.get("REBENCH_ISOLATED") == "1")
    deadline = cfg["solve_seconds"] * math.ceil(len(problems) / cfg["parallel"]) + STARTUP_SLACK
    details["scaffold_deadline_s"] = deadline
    started = time.monotonic()
    with open(stderr_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, "-c", runner, problems_path], cwd=solution, env=env,
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err, start_new_session=True, **kwargs)
    lines: queue.Queue = queue.Queue()

    def read() -> None:
        for raw in proc.stdout:
            lines.put(raw)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    records: dict[int, dict] = {}
    fatal, done = None, False
    while not done and fatal is None:
        left = deadline - (time.monotonic() - started)
        if left <= 0:
            break
        try:
            raw = lines.get(timeout=min(left, 1.0))
        except queue.Empty:
            continue
        if raw is None:
            break
        try:
            msg = json.loads(raw)
        except ValueError:
            continue
        if "fatal" in msg:
            fatal = msg["fatal"]
            details["scaffold_traceback"] = msg.get("traceback", "")
        elif msg.get("done"):
            done = True
        elif isinstance(msg.get("index"), int) and 0 <= msg["index"] < len(problems):
            records.setdefault(msg["index"], msg)
    try:
        os.killpg(proc.pid, 9)  # the runner and anything it started in its group
    except (ProcessLookupError, PermissionError):
        pass
    rc = proc.wait()
    details["scaffold_seconds"] = round(time.monotonic() - started, 3)
    if fatal is None and not done:
        missing = len(problems) - len(records)
        if time.monotonic() - started >= deadline:
            for i in range(len(problems)):
                records.setdefault(i, {"index": i, "status": "timeout", "error": "the scaffold's overall deadline passed"})
            details["scaffold_deadline_hit"] = True
        else:
            fatal = (f"the scaffold process ended (exit status {rc}) before answering {missing} of "
                     f"{len(problems)} problems")
    return records, fatal, tail(stderr_path)


# -- judging --------------------------------------------------------------------------------
def kill_user_processes(uid: int) -> int:
    """Programs may leave processes behind; as root, end every process of the programs' user."""
    killed = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/status") as fh:
                uids = next(line for line in fh if line.startswith("Uid:")).split()[1:]
            if int(uids[0]) == uid or int(uids[1]) == uid:
                os.kill(int(pid), 9)
                killed += 1
        except (OSError, StopIteration, ValueError):
            pass
    return killed


def main() -> None:
    global _RESULT_OUT
    _RESULT_OUT = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # anything else printed goes to stderr; the result line to the real stdout

    started = time.monotonic()
    profile = os.environ.get("REBENCH_PROFILE", "gpu")
    cfg = PROFILES.get(profile)
    if cfg is None:
        emit(math.nan, {"error": f"unknown profile {profile!r}"})
    home = os.environ.get("REBENCH_HOME", "/home/agent")
    protected = os.environ.get("REBENCH_PROTECTED", "/protected")
    details: dict = {"profile": profile, **cfg}
    setup_msg = {"error": "the scorer could not set up; tell the organisers"}

    try:
        harness_path = os.path.join(protected, "starting_solution", "rust_harness.py")
        if not os.path.isfile(harness_path):
            raise SetupError(f"{harness_path} is missing")
        harness = load_module("rcc_harness", harness_path)
        test_path = os.path.join(protected, "assets", "test.jsonl")
        if not os.path.isfile(test_path):
            raise SetupError(f"the held-out problems {test_path} are missing (prepare the environment's assets: "
                             f"rebench-tui prepare rust_codecontests)")
        problems = harness.load_problems(test_path)
        if not problems:
            raise SetupError(f"{test_path} holds no problems")
        if shutil.which("rustc") is None:
            raise SetupError("rustc is not installed where the scorer runs")
        scaffold_user, program_user = users(home, details)
        url = model_endpoint(profile, details)
    except SetupError as exc:
        emit(math.nan, setup_msg, {**details, "setup_error": str(exc)})
    except Exception as exc:  # noqa: BLE001
        emit(math.nan, setup_msg, {**details, "setup_error": f"{type(exc).__name__}: {exc}",
                                   "traceback": traceback.format_exc()[-3000:]})
    details["n_problems"] = len(problems)

    # Under /tmp itself, not $TMPDIR: the supervisor gives root commands a private 0700 TMPDIR,
    # which the scaffold (run as agent) and the programs (run as nobody) could not traverse.
    work = tempfile.mkdtemp(prefix="rcc-score-", dir="/tmp")
    os.chmod(work, 0o711)  # the scaffold's and the programs' own folders below are theirs, 0700
    try:
        score, message = score_scaffold(problems, harness, home, profile, url, cfg, scaffold_user, program_user, work,
                                        details)
    finally:
        if program_user is not None and program_user[0] != (scaffold_user or (None,))[0]:
            details["leftover_processes_killed"] = kill_user_processes(program_user[0])
        shutil.rmtree(work, ignore_errors=True)
    details["seconds"] = round(time.monotonic() - started, 3)
    emit(score, message, details)


def score_scaffold(problems: list[dict], harness, home: str, profile: str, url: str, cfg: dict,
                   scaffold_user: tuple[int, int] | None, program_user: tuple[int, int] | None, work: str,
                   details: dict) -> tuple[float, dict]:
    records, fatal, stderr_tail = run_scaffold(problems, harness, home, profile, url, cfg, scaffold_user, work, details)
    details["scaffold_stderr_tail"] = stderr_tail
    if fatal is not None:  # the whole scaffold failed: NaN, with the end of its traceback and output
        message = {"error": fatal}
        if details.get("scaffold_traceback"):
            message["traceback"] = details["scaffold_traceback"][-1500:]
        message["scaffold_output_tail"] = stderr_tail[-1500:]
        return math.nan, message
    errors = [r for r in records.values() if r.get("status") == "error"]
    if errors and len(errors) == len(problems):
        return math.nan, {"error": f"solve() raised on every problem; the first: {errors[0].get('error', '')}",
                          "traceback": errors[0].get("traceback", "")[-1500:]}

    cpus = harness.available_cpus()
    details["judge_parallel"] = cpus

    def judge(i: int) -> dict:
        p = problems[i]
        rec = records.get(i, {"status": "timeout"})
        row = {"name": p.get("name", f"problem {i}"), "solve_status": rec.get("status"), "solve_seconds": rec.get("seconds")}
        status = rec.get("status")
        if status != "ok":
            outcome = {"timeout": "scaffold_timeout", "error": "scaffold_error"}.get(status, "no_code")
            return {**row, "outcome": outcome, "detail": rec.get("error", "")[:500]}
        v = harness.evaluate(rec.get("code"), p["tests"], float(p.get("time_limit") or DEFAULT_TIME_LIMIT),
                             memory_bytes=p.get("memory_limit_bytes"), run_as=program_user, tmp_parent=work)
        return {**row, "outcome": v.outcome, "detail": v.detail[:1500], "tests_passed": v.tests_passed,
                "tests_total": v.tests_total, "compile_seconds": v.compile_seconds, "run_seconds": v.run_seconds}

    t0 = time.monotonic()
    with ThreadPoolExecutor(cpus) as pool:
        rows = list(pool.map(judge, range(len(problems))))
    details["judge_seconds"] = round(time.monotonic() - t0, 3)
    n = len(problems)
    k = sum(1 for r in rows if r["outcome"] == "passed")
    outcomes: dict[str, int] = {}
    for r in rows:
        outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
    details["per_problem"] = rows
    return k / n, {"n_problems": n, "n_successes": k, "standard_error": round(harness.standard_error(k, n), 6),
                   "outcomes": outcomes}


if __name__ == "__main__":
    main()
