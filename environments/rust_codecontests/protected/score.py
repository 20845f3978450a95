"""Scorer for rust_codecontests: the fraction of held-out problems the participant's scaffold solves.

Run by the workstation as root with REBENCH_HOME, REBENCH_PROTECTED, REBENCH_PROFILE and the
profile's env (REBENCH_MODEL_URL). The result goes out through rebench_scorer.result (the
supervisor's result channel; the line is also printed on stdout for people):

    {"score": n_successes / n_problems or "NaN", "message": {...}, "details": {...}}

Steps
1. Read the held-out problems ($REBENCH_PROTECTED/assets/test.jsonl) and the compile/run harness
   from the pristine starting solution ($REBENCH_PROTECTED/starting_solution/rust_harness.py),
   both as root; neither is ever given to the participant's code.
2. Make sure the code model answers at REBENCH_MODEL_URL (the profile's service: the loopback
   proxy that adds the API key, or in smoke the stand-in behind it). If it does not, start the
   same server inside this process on a free loopback port (smoke: the stand-in; gpu: the proxy,
   configured from $REBENCH_PROTECTED/secrets.env) and give the scaffold that URL instead.
3. Run the scaffold: scaffold_runner.py, started with rebench_scorer.participant (the home's
   owner, no protected group, a clean environment without secrets, its own output, a new
   session), imports solution/solve.py and says it is ready. The scorer then sends it one
   problem at a time (without the hidden tests), PARALLEL outstanding at once, and keeps the
   clock itself: an answer must come within SOLVE_SECONDS of its problem being sent. Answers are
   untrusted data: anything but a program (a string of at most MAX_SOURCE_BYTES) for a problem
   that is outstanding is ignored or counted as no program. If solve.py cannot be imported, the
   process dies or breaks the protocol, or solve() raises on every problem, the score is NaN with
   the reason. Then the process group is killed.
4. Judge each returned program with rust_harness.evaluate as the user nobody (in a container):
   rustc -O with 3 s of CPU time, every test with the problem's time limit, outputs compared
   after splitting on whitespace; as many programs at once as there are CPUs. The tests reach a
   program only on its stdin; its output comes back through a file only the scorer can open.
5. Score = solved / problems. The message has n_problems, n_successes, standard_error
   (sqrt(p(1-p)/n)) and counts of each outcome; per-problem verdicts stay in the details.

In a scoring room (REBENCH_ISOLATED=1) the participant reads the result, and the scaffold and its
programs held the held-out problems: what they printed, raised or failed to compile with could
spell the problems and their test inputs out. So once the first problem is sent (HELD) the result
keeps only the scorer's own words and the sizes of the rest (PARTICIPANT_TEXT, ``theirs``), and
names each problem by its number, not its name; a scaffold that fails before that (solve.py does
not import) is shown whole. The local runtime has no room and shows everything.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.environ.get("REBENCH_SCORER_LIB", "/opt/rebench/lib"))
from rebench_scorer import result  # noqa: E402  (first: it takes the result channel out of reach)
from rebench_scorer import participant  # noqa: E402
from rebench_scorer.channel import ChannelError  # noqa: E402
from rebench_scorer.withhold import withhold  # noqa: E402

import importlib.util  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import pwd  # noqa: E402
import shutil  # noqa: E402
import signal  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import urllib.request  # noqa: E402
from collections import deque  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
PROFILES = {
    # solve_seconds: budget of one solve() call; parallel: solve() calls at once
    "gpu": {"solve_seconds": 120.0, "parallel": 20},
    "smoke": {"solve_seconds": 30.0, "parallel": 4},
}
DEFAULT_MODEL_URL = "http://127.0.0.1:8701/v1"
STARTUP_SECONDS = 60.0  # importing solve.py
HEALTH_WAIT = 10.0  # a service started with the container may still be coming up
SEND_TIMEOUT = 30.0  # the runner reads its messages in a thread of its own; a runner that stops reading is broken
MAX_PROBLEM_MESSAGE = 3 << 20  # a problem sent to the runner (the channel takes at most 4 MiB a message)
JUNK_LIMIT = 1000  # messages that answer nothing outstanding, before the scaffold counts as broken
DEFAULT_TIME_LIMIT = 2.0
STATUSES = ("ok", "error", "bad_return", "too_big")
# Fields of the result that hold what the scaffold or its programs wrote: withheld in a room.
PARTICIPANT_TEXT = ("fatal", "traceback", "scaffold_output_tail", "participant_stdout_tail", "participant_stderr_tail",
                    "first_error")
WITHHELD_NOTE = ("withheld: written by your scaffold or a program it returned while they held the held-out problems, "
                 "and nothing of theirs leaves the scoring room (run `python3 evaluate.py` in your shell to see it on "
                 "the validation problems)")
IN_ROOM = False  # set in score(): this scoring runs in a room of its own
HELD = False  # set once the first problem is sent in a room: from then on the participant's text stays there


def theirs(text: str, what: str) -> str:
    """A sentence of the scorer's about ``what`` the participant's code said, with the text itself
    where it may be shown."""
    return f"{what} is withheld: it may quote the held-out problems ({len(text)} characters)" if HELD else f"{what}: {text}"


class SetupError(Exception):
    """Not the participant's fault: missing data or harness, no model endpoint."""


class ScaffoldFailed(Exception):
    """The scaffold as a whole failed: NaN with this message."""

    def __init__(self, message: dict) -> None:
        super().__init__(message.get("error", ""))
        self.message = message


def load_module(name: str, path: str):
    """One of the scorer's own files (root-owned, in the protected folder): never the participant's."""
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
def program_user(home: str, details: dict) -> tuple[int, int] | None:
    """The user the programs run as: nobody in a container; None (the scorer's user) elsewhere."""
    if os.environ.get("REBENCH_ISOLATED") != "1" or os.geteuid() != 0:
        details["users"] = "not isolated: the programs run as the scorer's user"
        return None
    st = os.stat(home)
    if st.st_uid == 0:
        raise SetupError(f"{home} is owned by root; the scaffold must not run as root")
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        raise SetupError("there is no user nobody to run the programs as") from None
    if nobody.pw_uid in (0, st.st_uid):
        raise SetupError("the user nobody is root or the participant")
    details["users"] = {"scaffold_uid": st.st_uid, "program_uid": nobody.pw_uid}
    return nobody.pw_uid, nobody.pw_gid


def scaffold_env(profile: str, url: str, cfg: dict, isolated: bool) -> dict[str, str]:
    """What the runner gets on top of rebench_scorer.participant's clean environment."""
    env = {
        "LANG": "C.UTF-8", "REBENCH_MODEL_URL": url, "REBENCH_SCORING": "1", "REBENCH_PROFILE": profile,
        "REBENCH_SOLVE_SECONDS": f"{cfg['solve_seconds']:g}", "REBENCH_PARALLEL": str(cfg["parallel"]),
        # the helper package this scorer imported (readable by everyone): the runner's channel
        "REBENCH_SCORER_LIB": os.path.dirname(os.path.dirname(os.path.abspath(result.__file__))),
    }
    if not isolated:  # the local runtime: keep rustup working (it finds its toolchains under the real home)
        real_home = os.path.expanduser("~")
        for key, name in (("RUSTUP_HOME", ".rustup"), ("CARGO_HOME", ".cargo")):
            if os.environ.get(key):
                env[key] = os.environ[key]
            elif os.path.isdir(os.path.join(real_home, name)):
                env[key] = os.path.join(real_home, name)
        if os.environ.get("RUSTUP_TOOLCHAIN"):
            env["RUSTUP_TOOLCHAIN"] = os.environ["RUSTUP_TOOLCHAIN"]
    return env


def problem_message(i: int, public: dict) -> dict:
    """{"solve": i, "problem": ...}, its examples cut if it would not fit in one message."""
    msg = {"solve": i, "problem": dict(public)}
    while len(json.dumps(msg)) > MAX_PROBLEM_MESSAGE and msg["problem"].get("public_tests"):
        msg["problem"]["public_tests"] = msg["problem"]["public_tests"][:-1]
    return msg


def checked_answer(msg: dict, max_bytes: int) -> dict:
    """A runner's answer as data the scorer may use: status, and code only when it is a program."""
    status = msg.get("status")
    if status not in STATUSES:
        return {"status": "bad_answer", "error": "the answer has no known status"}
    rec: dict = {"status": status}
    for key, limit in (("error", 1000), ("traceback", 3000)):
        if isinstance(msg.get(key), str):
            rec[key] = msg[key][-limit:] if key == "traceback" else msg[key][:limit]
    if status == "ok":
        code = msg.get("code")
        if not isinstance(code, str):
            return {"status": "bad_answer", "error": "the answer's code is not a string"}
        try:
            size = len(code.encode("utf-8"))
        except UnicodeEncodeError:
            return {"status": "bad_answer", "error": "the program is not valid UTF-8 text"}
        if size > max_bytes:
            return {"status": "too_big", "error": f"the program has {size} bytes, more than {max_bytes}"}
        rec["code"] = code
    return rec


def run_scaffold(problems: list[dict], harness, home: str, profile: str, url: str, cfg: dict,
                 details: dict) -> dict[int, dict]:
    """{index: answer} for every problem (timeouts included); raises ScaffoldFailed."""
    solution = os.path.join(home, "solution")
    if not os.path.isdir(solution):
        raise ScaffoldFailed({"error": f"{solution} does not exist"})
    with open(os.path.join(HERE, "scaffold_runner.py"), encoding="utf-8") as fh:
        runner = fh.read()
    publics = [harness.public_view(p) for p in problems]
    budget, parallel = cfg["solve_seconds"], cfg["parallel"]
    started = time.monotonic()
    proc = participant.start([sys.executable, "-c", runner], cwd=solution, who=participant.account(home),
                             env=scaffold_env(profile, url, cfg, IN_ROOM), control=True)
    ch = proc.channel
    global HELD
    records: dict[int, dict] = {}
    outstanding: dict[int, tuple[float, float]] = {}  # index -> (sent at, deadline)
    pending = deque(range(len(problems)))
    junk = 0

    def failed(error: str, **extra) -> ScaffoldFailed:
        proc.kill()
        report = proc.report()
        details.update({k: v for k, v in report.items()})
        message = {"error": error, **extra}
        out = (report.get("participant_stdout_tail", "") + report.get("participant_stderr_tail", ""))[-1500:]
        if out.strip():
            message["scaffold_output_tail"] = out
        return ScaffoldFailed(message)

    def fatal(msg: dict) -> ScaffoldFailed:
        said = str(msg.get("fatal"))[:2000]
        return failed(said if not HELD else "the scaffold process reported a fatal error", fatal=said,
                      traceback=str(msg.get("traceback", ""))[-1500:])

    def gone(exc: Exception) -> ScaffoldFailed:
        rc = proc.wait(2)
        if rc is None:
            return failed(f"the scaffold process broke the protocol of its channel ({exc})")
        code = 128 - rc if rc < 0 else rc
        left = len(problems) - len(records)
        return failed(f"the scaffold process ended (exit status {code}) before answering {left} of {len(problems)} problems")

    def receive(timeout: float) -> dict | None:
        try:
            msg, fds = ch.recv(timeout=max(0.01, timeout))
        except ChannelError as exc:
            if "no answer in time" in str(exc) and proc.alive():
                return None
            raise gone(exc) from None
        for fd in fds:  # nothing is expected to ride along
            os.close(fd)
        return msg

    try:
        # 1. import
        deadline = started + STARTUP_SECONDS
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise failed(f"solve.py was not imported within {STARTUP_SECONDS:g} s")
            msg = receive(left)
            if msg is None:
                continue
            if "fatal" in msg:
                raise fatal(msg)
            if msg.get("ready") is True:
                break
            junk += 1
            if junk > JUNK_LIMIT:
                raise failed(f"the scaffold process sent more than {JUNK_LIMIT} messages that answer nothing")
        details["scaffold_import_seconds"] = round(time.monotonic() - started, 3)
        # 2. the problems, PARALLEL at a time, each within the budget
        while pending or outstanding:
            while pending and len(outstanding) < parallel:
                i = pending.popleft()
                HELD = HELD or IN_ROOM  # until now it held nothing hidden: an import error is shown whole
                ch.sock.settimeout(SEND_TIMEOUT)
                try:
                    ch.send(problem_message(i, publics[i]))
                except ChannelError as exc:
                    raise gone(exc) from None
                now = time.monotonic()
                outstanding[i] = (now, now + budget)
            msg = receive(min(d for _, d in outstanding.values()) - time.monotonic())
            now = time.monotonic()
            if msg is not None:
                i = msg.get("index")
                if "fatal" in msg:
                    raise fatal(msg)
                if type(i) is int and i in outstanding and now <= outstanding[i][1]:
                    records[i] = {**checked_answer(msg, harness.MAX_SOURCE_BYTES),
                                  "seconds": round(now - outstanding.pop(i)[0], 3)}
                else:
                    junk += 1
                    if junk > JUNK_LIMIT:
                        raise failed(f"the scaffold process sent more than {JUNK_LIMIT} messages that answer nothing")
            for i, (sent, deadline) in list(outstanding.items()):
                if now > deadline:
                    records[i] = {"status": "timeout", "seconds": round(now - sent, 3),
                                  "error": f"no answer within {budget:g} s"}
                    del outstanding[i]
        try:
            ch.sock.settimeout(1.0)
            ch.send({"stop": True})
        except (ChannelError, OSError):
            pass
    finally:
        proc.kill()  # the runner and anything it started in its group; what escaped it, the supervisor ends
    details["scaffold_seconds"] = round(time.monotonic() - started, 3)
    details["scaffold_junk_messages"] = junk
    details.update(proc.report())
    return records


# -- judging --------------------------------------------------------------------------------
def kill_user_processes(uid: int) -> int:
    """Programs may leave processes behind; as root, end every process of the programs' user
    (again and again while any is left: one may fork while the others die)."""
    killed = 0
    for _round in range(50):
        found = 0
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/status") as fh:
                    uids = next(line for line in fh if line.startswith("Uid:")).split()[1:]
                if uid in (int(uids[0]), int(uids[1])):
                    os.kill(int(pid), signal.SIGKILL)
                    found += 1
            except (OSError, StopIteration, ValueError):
                pass
        killed += found
        if not found:
            break
        time.sleep(0.05)
    return killed


def public_detail(v) -> str:
    """A program's verdict as the record shows it: what failed and what the program printed (in a
    room, only how much), never the held-out test's expected output (a program that only looked
    answers up in the record scored 1.0 while it was quoted)."""
    if v.outcome == "wrong_answer":
        printed = v.detail.rsplit(", got ", 1)[-1] if ", got " in v.detail else "?"
        return theirs(printed, f"test {v.tests_passed}: wrong answer (the expected output is not shown); what it printed")[:1500]
    if v.outcome.startswith("compile"):  # the compiler's messages quote the program
        return theirs(v.detail, f"{v.outcome.replace('_', ' ')}; what the compiler said")[:1500] if HELD else v.detail[:1500]
    return v.detail[:1500]


def judge_all(problems: list[dict], records: dict[int, dict], harness, run_as: tuple[int, int] | None, work: str,
              details: dict) -> tuple[float, dict]:
    errors = [r for r in records.values() if r.get("status") == "error"]
    if errors and len(errors) == len(problems):
        first = errors[0].get("error", "")
        return math.nan, {"error": "solve() raised on every problem" + ("" if HELD else f"; the first: {first}"),
                          "first_error": first, "traceback": errors[0].get("traceback", "")[-1500:]}
    cpus = harness.available_cpus()
    details["judge_parallel"] = cpus
    confined = harness.confinement()
    details["program_confinement"] = "seccomp" if confined.available else f"none: {confined.reason}"

    def judge(i: int) -> dict:
        p = problems[i]
        rec = records.get(i, {"status": "timeout"})
        row = {"problem": i, **({} if HELD else {"name": p.get("name", f"problem {i}")}),
               "solve_status": rec.get("status"), "solve_seconds": rec.get("seconds")}
        if rec.get("status") != "ok":
            outcome = {"timeout": "scaffold_timeout", "error": "scaffold_error"}.get(rec.get("status"), "no_code")
            said = rec.get("error", "")
            return {**row, "outcome": outcome, "detail": (theirs(said, "what solve() raised") if rec.get("status") == "error"
                                                          else said)[:500]}
        try:
            v = harness.evaluate(rec["code"], p["tests"], float(p.get("time_limit") or DEFAULT_TIME_LIMIT),
                                 memory_bytes=p.get("memory_limit_bytes"), run_as=run_as, tmp_parent=work)
        except Exception as exc:  # noqa: BLE001 - one program's trouble is that program's, not the whole scoring's
            return {**row, "outcome": "runtime_error",
                    "detail": f"the harness failed: {type(exc).__name__}" + ("" if HELD else f": {exc}"[:500])}
        return {**row, "outcome": v.outcome, "detail": public_detail(v), "tests_passed": v.tests_passed,
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


# -- main -----------------------------------------------------------------------------------
def score(details: dict) -> tuple[float, dict]:
    global IN_ROOM
    IN_ROOM = os.environ.get("REBENCH_ISOLATED") == "1"
    profile = os.environ.get("REBENCH_PROFILE", "gpu")
    cfg = PROFILES.get(profile)
    if cfg is None:
        return math.nan, {"error": f"unknown profile {profile!r}"}
    details.update({"profile": profile, **cfg})
    home = os.environ.get("REBENCH_HOME", "/home/agent")
    protected = os.environ.get("REBENCH_PROTECTED", "/protected")
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
    run_as = program_user(home, details)
    url = model_endpoint(profile, details)
    details["n_problems"] = len(problems)

    try:
        records = run_scaffold(problems, harness, home, profile, url, cfg, details)
    except ScaffoldFailed as exc:  # the whole scaffold failed: NaN, with the end of its traceback and output
        return math.nan, exc.message
    # Under /tmp itself, not $TMPDIR: the supervisor gives root commands a private 0700 TMPDIR,
    # which the programs (run as nobody) could not traverse. 0711: they pass through to their
    # own build folder, and list nothing.
    work = tempfile.mkdtemp(prefix="rcc-score-", dir="/tmp")
    os.chmod(work, 0o711)
    try:
        return judge_all(problems, records, harness, run_as, work, details)
    finally:
        if run_as is not None:
            details["leftover_processes_killed"] = kill_user_processes(run_as[0])
        shutil.rmtree(work, ignore_errors=True)


def main() -> None:
    started = time.monotonic()
    details: dict = {}
    try:
        value, message = score(details)
    except SetupError as exc:
        value, message = math.nan, {"error": "the scorer could not set up; tell the organisers"}
        details["setup_error"] = str(exc)
    except Exception as exc:  # noqa: BLE001
        value, message = math.nan, {"error": "the scorer failed; tell the organisers"}
        details.update({"setup_error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()[-3000:]})
    details["seconds"] = round(time.monotonic() - started, 3)
    if HELD:
        details["problems_named"] = "by number: the held-out problems' names stay in the scoring room"
        message, details = (withhold(fields, PARTICIPANT_TEXT, WITHHELD_NOTE) for fields in (message, details))
    result.emit(value, message, details)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # the stand-in or proxy this process may have started runs in daemon threads


if __name__ == "__main__":
    main()
