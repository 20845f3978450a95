"""Commands run through the supervisor: timeouts and cancels stop the whole process group."""

import os
from pathlib import Path
import threading
import time

import pytest

from rebench_tui.catalog import load_catalog
from rebench_tui.runtime.base import SandboxSpec
from rebench_tui.runtime.supervision import StatusFilter
from rebench_tui.runtime.local import LocalRuntime
from tests.conftest import FIXTURE_ENVS, KNOWN_IMAGES


@pytest.fixture
def sandbox(tmp_path):
    env = load_catalog(FIXTURE_ENVS, KNOWN_IMAGES).get("toy_score")
    ws = tmp_path / "ws"
    ws.mkdir()
    spec = SandboxSpec("s1", env, env.profile("smoke"), ws, tmp_path / "state")
    return LocalRuntime().create(spec, None, lambda m: None)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie still answers kill 0; read its state
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


def test_output_and_exit_code(sandbox):
    r = sandbox.exec(["sh", "-c", "echo out; echo err >&2; exit 3"])
    assert (r.exit_code, r.stdout, r.stderr.strip()) == (3, "out\n", "err")
    assert not r.timed_out and not r.cancelled


def test_timeout_kills_the_whole_group(sandbox, tmp_path):
    pidfile = tmp_path / "bg.pid"
    t0 = time.monotonic()
    r = sandbox.exec(["sh", "-c", f"sleep 300 & echo $! > {pidfile}; sleep 300"], timeout=1)
    assert r.timed_out and r.exit_code == 137
    assert time.monotonic() - t0 < 10
    assert not _alive(int(pidfile.read_text()))


def test_stragglers_are_killed_after_a_normal_exit(sandbox, tmp_path):
    pidfile = tmp_path / "bg.pid"
    r = sandbox.exec(["sh", "-c", f"sleep 300 & echo $! > {pidfile}; exit 0"])
    assert r.exit_code == 0
    time.sleep(0.2)
    assert not _alive(int(pidfile.read_text()))


def test_a_tree_of_hundreds_that_left_the_group_is_ended_whole(sandbox):
    """Processes in sessions of their own (out of the command's group) are found by their parentage
    and killed, hundreds of them as a fork bomb leaves, before the command's result comes back."""
    marker = "300.4242"
    r = sandbox.exec(["sh", "-c", f"for i in $(seq 250); do setsid sh -c 'sleep {marker} & sleep {marker}' & done; "
                                  f"while [ $(pgrep -fc 'sleep {marker}') -lt 500 ]; do sleep 0.1; done; exit 0"],
                     timeout=120)
    assert r.exit_code == 0 and not r.timed_out, r.stderr
    left = []
    for name in filter(str.isdigit, os.listdir("/proc")):
        try:
            argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker.encode() in argv and _alive(int(name)):
            left.append(int(name))
    assert left == []


def test_cancel(sandbox):
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    t0 = time.monotonic()
    r = sandbox.exec(["sleep", "300"], cancel=cancel)
    assert r.cancelled and time.monotonic() - t0 < 10


def test_sigkill_is_137_and_not_a_timeout(sandbox):
    r = sandbox.exec(["sh", "-c", "kill -9 $$"])
    assert r.exit_code == 137 and not r.timed_out


def test_missing_program(sandbox):
    r = sandbox.exec(["/no/such/program"])
    assert r.exit_code == 127 and "cannot start" in r.stderr


def test_streaming_output(sandbox):
    seen = []
    sandbox.exec(["sh", "-c", "for i in 1 2 3; do echo line$i; done"], on_output=lambda s, b: seen.append((s, b)))
    assert b"".join(b for s, b in seen if s == "stdout") == b"line1\nline2\nline3\n"


def test_status_filter_splits_across_chunks():
    got = []
    f = StatusFilter(lambda s, b: got.append(b))
    for chunk in [b"warn \x1e not ours\n", b"more\n\x1ereben", b'ch-exec {"returncode": 5, "timed_out": true}\n']:
        f.feed("stderr", chunk)
    f.finish()
    assert f.status == {"returncode": 5, "timed_out": True}
    assert b"".join(got) == b"warn \x1e not ours\nmore\n"
    r = f.result(0, 1.0)
    assert r.exit_code == 5 and r.timed_out


def test_status_filter_keeps_only_a_tail():
    f = StatusFilter(None, keep=10)
    f.feed("stdout", b"0123456789abcdef")
    f.finish()
    assert f.text("stdout").endswith("6789abcdef")
    assert "6 earlier bytes not kept" in f.text("stdout")


def _guarded(tmp_path, script: str):
    """The supervisor's run verb with --guard-links, as a container's exec runs it."""
    import subprocess
    import sys

    from rebench_tui.runtime.base import SUPERVISOR
    from rebench_tui.runtime.supervision import supervisor_argv

    home, secret = tmp_path / "home", tmp_path / "protected"
    home.mkdir(exist_ok=True)
    secret.mkdir(exist_ok=True)
    (secret / "answers.txt").write_text("held-out")
    argv = supervisor_argv(sys.executable, str(SUPERVISOR), "tok", ["sh", "-c", script], user=None, workdir=str(home),
                           timeout=30, state_dir=str(tmp_path / "state"), guard=(str(home), [str(secret)]))
    p = subprocess.run(argv, capture_output=True)
    sink = StatusFilter(None)
    sink.feed("stdout", p.stdout)
    sink.feed("stderr", p.stderr)
    sink.finish()
    return home, secret, sink.result(p.returncode, 0.0)


def test_a_guarded_run_refuses_while_a_link_leads_into_a_forbidden_folder(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / "peek").symlink_to(tmp_path / "protected" / "answers.txt")
    home, _secret, r = _guarded(tmp_path, "touch ran")
    assert r.refused_links == [[str(home / "peek"), str(tmp_path / "protected" / "answers.txt")]]
    assert not (home / "ran").exists() and r.exit_code == 126


def test_a_guarded_run_reports_links_made_while_it_ran(tmp_path):
    home, secret, r = _guarded(tmp_path, f"touch ran && ln -s {tmp_path / 'protected'} sneaky")
    assert (home / "ran").exists() and r.exit_code == 0 and r.refused_links == []
    assert r.late_links == [[str(home / "sneaky"), str(secret)]]


def test_a_guarded_run_without_links_reports_none(tmp_path):
    _home, _secret, r = _guarded(tmp_path, "echo fine")
    assert r.ok and r.stdout == "fine\n" and r.refused_links == [] and r.late_links == []


@pytest.mark.skipif(os.geteuid() != 0, reason="the supervisor only changes a root command's environment when run as root")
def test_a_root_command_gets_a_private_tmpdir_and_writes_no_bytecode(tmp_path):
    import subprocess
    import sys

    from rebench_tui.runtime.base import SUPERVISOR
    from rebench_tui.runtime.supervision import supervisor_argv

    script = "import os, stat; t = os.environ['TMPDIR']; print(os.environ.get('PYTHONDONTWRITEBYTECODE'), oct(stat.S_IMODE(os.stat(t).st_mode)), t)"
    argv = supervisor_argv(sys.executable, str(SUPERVISOR), "tok", [sys.executable, "-c", script], user="root", workdir=str(tmp_path),
                           timeout=30, state_dir=str(tmp_path / "state"))
    p = subprocess.run(argv, capture_output=True, text=True)
    flag, mode, tmpdir = p.stdout.split()
    assert (flag, mode) == ("1", "0o700")
    assert not os.path.exists(tmpdir)  # removed afterwards


def test_the_supervisors_command_line_grammar():
    from rebench_tui.runtime.supervise import parse

    a = parse(["run", "--token", "t", "--state-dir=/s", "--forbid", "/p", "--forbid=/q", "--timeout", "2.5",
               "--user", "root", "--", "python3", "--version"])
    assert (a.verb, a.token, a.state_dir, a.forbid, a.timeout, a.user, a.argv) == \
        ("run", "t", "/s", ["/p", "/q"], 2.5, "root", ["python3", "--version"])
    assert parse(["cancel", "--token", "t", "--state-dir", "/s"]).verb == "cancel"
    for bad in (["run", "--token", "t", "--state-dir", "/s"],  # nothing to run
                ["run", "--token", "t", "--state-dir", "/s", "--bogus", "1", "--", "true"],
                ["run", "--token", "t", "--state-dir"],
                ["explode"]):
        with pytest.raises(SystemExit):
            parse(bad)


def test_a_command_started_as_another_user_runs_as_that_user_in_its_own_session(tmp_path):
    """The supervisor forks and execs by itself: the command gets its own session (process group)
    and, run as root, the account it was given."""
    import json
    import subprocess
    import sys

    from rebench_tui.runtime.base import SUPERVISOR
    from rebench_tui.runtime.supervision import supervisor_argv

    if os.geteuid() != 0 or not os.path.exists("/usr/bin/python3"):
        pytest.skip("dropping to another user needs root (and a system python3 that user may run)")
    import shutil
    import tempfile

    shared = Path(tempfile.mkdtemp(prefix="rebench-sup-", dir="/tmp"))  # pytest's own folders are root-only
    os.chmod(shared, 0o777)
    out = shared / "ids"
    script = f"import os; open({str(out)!r}, 'w').write(repr((os.getuid(), os.getgid(), os.getsid(0) == os.getpid(), os.getcwd())))"
    argv = supervisor_argv(sys.executable, str(SUPERVISOR), "tok", ["/usr/bin/python3", "-c", script], user="nobody",
                           workdir=str(shared), timeout=10, state_dir=str(tmp_path / "state"))
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        ids = out.read_text() if out.exists() else ""
    finally:
        shutil.rmtree(shared)
    status = json.loads(r.stderr.rsplit("\x1erebench-exec ", 1)[1])
    assert status["returncode"] == 0, r.stderr
    import pwd

    nobody = pwd.getpwnam("nobody")
    assert eval(ids) == (nobody.pw_uid, nobody.pw_gid, True, str(shared))  # noqa: S307 - our own file


@pytest.mark.parametrize("value", [
    {"returncode": 0, "timed_out": False, "cancelled": True, "duration_s": 0.123456, "late_links": []},
    {"refused_links": [["/home/agent/a\nb\x1erebench-exec {}", "/protected/x"], ["/home/agent/\udcff.py", "/protected"]]},
    {"s": 'quote " backslash \\ tab \t bell \x07 é 😀 \u2028', "n": None, "big": 12345678901234567890, "neg": -1.5e-9},
])
def test_the_status_line_is_json_that_reads_back_exactly(value):
    import json

    from rebench_tui.runtime.supervise import _json

    text = _json(value)
    assert text.isascii() and "\n" not in text and "\x1e" not in text
    assert json.loads(text) == value


def test_a_daemon_that_left_the_group_is_ended(sandbox, tmp_path):
    """A process that forks twice and starts its own session escapes a group kill; the
    supervisor is its subreaper and ends it all the same."""
    pidfile = tmp_path / "daemon.pid"
    code = ("import os, time\n"
            "if os.fork() == 0:\n"
            "    os.setsid()\n"
            "    if os.fork() == 0:\n"
            f"        open({str(pidfile)!r}, 'w').write(str(os.getpid()))\n"
            "        time.sleep(300)\n"
            "    os._exit(0)\n"
            "os.wait()\n")
    r = sandbox.exec(["python3", "-c", code])
    assert r.exit_code == 0
    for _ in range(50):
        if pidfile.exists() and pidfile.read_text():
            break
        time.sleep(0.05)
    assert not _alive(int(pidfile.read_text()))


def test_result_channel_is_read_back_and_printed_lines_are_not_it(sandbox):
    code = ("import os, sys\n"
            "print('{\"score\": -9}')\n"
            "os.write(int(os.environ['REBENCH_RESULT_FD']), b'{\"score\": 1.5}\\n')\n")
    r = sandbox.exec(["python3", "-c", code])
    assert r.result == '{"score": 1.5}\n'
    assert '"score": -9' in r.stdout


def test_a_printed_status_line_is_not_taken_for_the_supervisors(sandbox):
    """Without the exec's nonce a forged status line (claiming a result) is plain output."""
    forged = '\\x1erebench-exec {"returncode": 0, "result": "{\\"score\\": -9}"}'
    r = sandbox.exec(["python3", "-c", f"import sys; sys.stderr.write('{forged}\\n'); sys.exit(4)"])
    assert r.exit_code == 4 and r.result is None
    assert "rebench-exec" in r.stderr


def test_nonce_is_not_in_the_commands_environment(sandbox):
    r = sandbox.exec(["sh", "-c", "env | grep -c REBENCH_EXEC_NONCE || true"])
    assert r.stdout.strip() == "0"


UNUSED_UID = 54321  # a uid no process of this machine has: freezing it touches nothing but the test's own


def _sleeper_as(uid: int) -> int:
    """A ``sleep`` running as ``uid`` (a process the participant started before the scoring)."""
    import subprocess

    return subprocess.Popen(["sleep", "60"], user=uid, group=uid, extra_groups=[], start_new_session=True).pid


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as fh:
        return fh.read().rsplit(") ", 1)[1][0]


@pytest.mark.skipif(os.geteuid() != 0, reason="stopping another user's processes needs root")
def test_a_scoring_stops_the_participants_processes_while_it_runs_and_resumes_them(tmp_path):
    """A guarded run (a scoring) stops every process of the home's owner before it starts the
    command (nothing started earlier can watch, feed or end it) and resumes them afterwards."""
    (tmp_path / "home").mkdir()
    os.chown(tmp_path / "home", UNUSED_UID, UNUSED_UID)
    pid = _sleeper_as(UNUSED_UID)
    try:
        _home, _secret, r = _guarded(tmp_path, f"sed 's/.*) \\(.\\).*/\\1/' /proc/{pid}/stat")
        assert r.exit_code == 0 and r.stdout.strip() == "T", (r.stdout, r.stderr)  # stopped during the command
        assert _state(pid) in "SR", _state(pid)  # running again after it
        assert not list((tmp_path / "state").glob("*.frozen"))
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)


@pytest.mark.skipif(os.geteuid() != 0, reason="stopping another user's processes needs root")
def test_processes_a_killed_supervisor_left_stopped_are_resumed_by_the_next_call(tmp_path):
    import signal

    from rebench_tui.runtime.supervise import freeze_user, status_of

    state = tmp_path / "state"
    state.mkdir()
    pid = _sleeper_as(UNUSED_UID)
    try:
        assert freeze_user(UNUSED_UID, str(state / "tok.frozen")) == [pid]
        time.sleep(0.1)
        assert _state(pid) == "T"
        (state / "tok.sup").write_text("999999999")  # its supervisor is gone without a status
        assert '"gone"' in status_of(str(state), "tok")
        time.sleep(0.1)
        assert _state(pid) in "SR" and not (state / "tok.frozen").exists()
    finally:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)


@pytest.mark.skipif(os.geteuid() != 0, reason="stopping another user's processes needs root")
def test_a_shells_terminal_and_a_suspended_job_are_as_they_were_after_a_scoring(tmp_path):
    """The app's shell is the participant's bash under ``script`` run by root, which stops itself
    when its child stops: after the scoring the terminal must run again (it hung for good before),
    and a job the participant had suspended (Ctrl-Z) must stay suspended."""
    import signal
    import subprocess

    from rebench_tui.runtime.supervise import _uids, freeze_user, thaw

    state = tmp_path / "state"
    state.mkdir()
    term = subprocess.Popen(["script", "-q", "-f", "-e", "-c", f"exec setpriv --reuid={UNUSED_UID} --regid={UNUSED_UID} "
                             "--clear-groups sleep 60", "/dev/null"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                            start_new_session=True)
    job = _sleeper_as(UNUSED_UID)
    try:
        deadline = time.monotonic() + 10
        while not (shell := [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) != job
                             and UNUSED_UID in _uids(int(n))]) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert shell, "the shell under script did not start"
        os.kill(job, signal.SIGSTOP)  # suspended by the participant before the scoring
        time.sleep(0.1)
        assert sorted(freeze_user(UNUSED_UID, str(state / "tok.frozen"))) == shell
        time.sleep(0.3)
        assert _state(term.pid) == "T"  # script followed its child into the stop
        thaw(str(state))
        time.sleep(0.3)
        assert _state(term.pid) in "SR" and all(_state(p) in "SR" for p in shell), (_state(term.pid), shell)
        assert _state(job) == "T"  # still suspended, as the participant left it
    finally:
        for pid in (job, term.pid):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(job, 0)
        term.wait(timeout=10)
        for n in os.listdir("/proc"):  # the shell script started
            if n.isdigit() and UNUSED_UID in _uids(int(n)):
                os.kill(int(n), signal.SIGKILL)


@pytest.mark.skipif(os.geteuid() != 0, reason="stopping another user's processes needs root")
def test_what_the_scored_run_leaves_in_shared_temporary_folders_is_removed(tmp_path):
    """Files the participant's user makes under /tmp during a scoring (a cache for the next one)
    are gone after it; the user's older files stay."""
    import shutil
    import tempfile

    from rebench_tui.runtime.supervise import sweep

    shared = Path(tempfile.mkdtemp(prefix="rebench-sweep-", dir="/tmp"))
    try:
        old = shared / "older"
        old.write_text("theirs")
        os.chown(old, UNUSED_UID, UNUSED_UID)
        since = time.time_ns()
        time.sleep(0.02)
        (shared / "cache").mkdir()
        (shared / "cache" / "weights").write_text("memo")
        (shared / "link").symlink_to("/etc/passwd")
        for p in (shared / "cache", shared / "cache" / "weights", shared / "link"):
            os.chown(p, UNUSED_UID, UNUSED_UID, follow_symlinks=False)
        assert sweep(UNUSED_UID, since, (str(shared),)) == 3
        assert sorted(p.name for p in shared.iterdir()) == ["older"] and os.path.exists("/etc/passwd")
    finally:
        shutil.rmtree(shared)


def test_the_participants_bytecode_files_are_removed_and_nothing_else(tmp_path):
    from rebench_tui.runtime.supervise import purge_bytecode

    home = tmp_path / "home"
    (home / "solution" / "__pycache__").mkdir(parents=True)
    planted = home / "solution" / "__pycache__" / "solution.cpython-311.pyc"
    planted.write_bytes(b"planted")
    (home / "solution" / "solution.py").write_text("x = 1\n")
    (home / "legacy.pyc").write_bytes(b"sourceless")
    (home / "link.pyc").symlink_to("/etc/passwd")
    uid = os.getuid()
    assert purge_bytecode(uid, (str(home),)) == 3
    assert not planted.exists() and not (home / "legacy.pyc").exists() and not (home / "link.pyc").is_symlink()
    assert (home / "solution" / "solution.py").exists() and os.path.exists("/etc/passwd")
    planted.write_bytes(b"planted again")
    assert purge_bytecode(uid + 1, (str(home),)) == 0 and planted.exists()  # another user's files are not touched
