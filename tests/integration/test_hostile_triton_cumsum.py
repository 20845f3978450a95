"""triton_cumsum's scorer against hostile solutions, in a real container (smoke profile).

Each solution in environments/triton_cumsum/reference/hostile/ tries one way to a score it did not
earn. Each must end as NaN with a reason, or as a score no better than the honest starting
solution's (they all compute the answer honestly after their trick, with the same slow PyTorch
code as the starting solution). The same files run on the GPU in reference/harness_hostile.sh, where
the ones aimed at the GPU hand-over (watch_input, same_buffer, returns_input, answer_first,
gpu_daemon) have their real target; here they must at least do no better than honest.
"""

from __future__ import annotations

import math
import time

import pytest

from rebench_tui.runtime.docker_room import find_rooms
from rebench_tui.scoring import Direction
from tests.conftest import ROOT
from tests.hostile import (arena_fixture, assert_no_fake_best, check_aftermath, participant_processes, protected_listing,
                           scored_once)

pytestmark = [pytest.mark.docker, pytest.mark.timed]  # CPU-timed scorings: run with nothing beside them

HOSTILE = ROOT / "environments" / "triton_cumsum" / "reference" / "hostile"
arena = arena_fixture("triton_cumsum")
# Timing noise on the smoke profile (CPU, a shared 2-core machine under other load): the same code
# measured 1.2 ms and 5 ms within minutes here. A hostile solution runs the honest code after its
# trick, so it may come out faster by chance; a trick that worked would read as microseconds or
# less (ln < -7). SLACK (ln units, a factor of 4.5) separates the two.
SLACK = 1.5


@pytest.fixture(scope="module")
def honest(arena):
    arena.reset()
    arena.write({"solution/solution.py": (HOSTILE / "_honest.py").read_text() + "\n\ndef prefix_sum(x):\n    return honest(x)\n"})
    runs = [arena.score() for _ in range(2)]
    for r in runs:
        assert math.isfinite(r.score) and r.message["results_match"] is True, r
    return min(r.score for r in runs)


@scored_once  # a CPU scoring of this environment takes 10-80 s here, the fork bomb's the longest
def run_hostile(arena, name: str):
    arena.reset()
    arena.write({"solution/solution.py": (HOSTILE / f"{name}.py").read_text(),
                 "solution/_honest.py": (HOSTILE / "_honest.py").read_text()})
    before = protected_listing(arena)
    record = arena.score()
    check_aftermath(arena, before)
    assert record.details.get("scorer_matches_catalog") is True, record.details
    return record


@pytest.mark.parametrize("name", ["fake_result_exit", "frame_walk", "memoize", "kill_scorer", "fork_bomb"])
def test_hostile_solution_ends_as_nan_with_a_reason(arena, honest, name):
    record = run_hostile(arena, name)
    assert math.isnan(record.score), (name, record.score, record.message)
    assert record.message.get("error") or record.message.get("results_match") is False, record.message


@pytest.mark.parametrize("name", ["patch_timers", "result_fd", "forged_status", "protected_writer", "daemon", "early_done",
                                  "watch_input", "same_buffer", "returns_input", "answer_first", "gpu_daemon"])
def test_hostile_solution_scores_no_better_than_honest(arena, honest, name):
    record = run_hostile(arena, name)
    assert_no_fake_best(record, honest, Direction.LOWER, slack=SLACK)
    # these compute the right answer after their trick and leave the exchange alone, so they keep
    # an honest score (result_fd also scribbles over its own control socket, answer_first hands
    # back outputs before it has written them: NaN is their due)
    if name not in ("early_done", "result_fd", "answer_first"):
        assert math.isfinite(record.score), record.message


def test_fake_result_lines_are_kept_as_the_participants_output(arena, honest):
    record = run_hostile(arena, "fake_result_exit")
    assert '"score": -9.0' in record.details.get("participant_stdout_tail", "")
    assert record.details["participant_uid"] == 1000


def test_the_solution_cannot_touch_the_scorer(arena, honest):
    record = run_hostile(arena, "protected_writer")
    out = record.details.get("participant_stdout_tail", "")
    assert "wrote " not in out, out
    assert "/protected: Permission denied" in out


def test_a_fork_bomb_stops_at_the_process_limit_and_the_container_lives(arena, honest):
    """The container has a process limit and the participant's processes the highest OOM score:
    the bomb's copies are what the kernel ends, never the scorer, which reports NaN with why."""
    limits = arena.session.sandbox.container.attrs["HostConfig"]
    assert limits["PidsLimit"] == arena.session.profile.pids
    assert {u["Name"]: u["Hard"] for u in limits["Ulimits"]}["nofile"] == arena.session.profile.open_files
    record = run_hostile(arena, "fork_bomb")
    assert math.isnan(record.score) and "ended" in record.message["error"], record.message
    assert record.details["scorer_sha256"], "the scorer itself survived and wrote the result"
    assert participant_processes(arena) == []
    assert arena.root("echo alive").stdout.strip() == "alive"


# -- a scoring in a clean room: its processes import only what the scorer means ---------------

PLANT_PYC = """
import importlib.util, os, py_compile, struct
src = '/home/agent/solution/solution.py'
pyc = importlib.util.cache_from_source(src)
py_compile.compile('/home/agent/planted.py', cfile=pyc, dfile=src, doraise=True)
st = os.stat(src)
data = bytearray(open(pyc, 'rb').read())
data[8:16] = struct.pack('<II', int(st.st_mtime) & 0xFFFFFFFF, st.st_size & 0xFFFFFFFF)
open(pyc, 'wb').write(data)
os.unlink('/home/agent/planted.py')
print(pyc)
"""


def doors(arena) -> str:
    return arena.root("cat /home/agent/.door-* 2>/dev/null; rm -f /home/agent/.door-*").stdout


def test_a_planted_pyc_never_runs_in_place_of_the_recorded_source(arena, honest):
    """Python prefers a __pycache__ file stamped like its source; those files are not in the record,
    so they are not in the snapshot the scoring room gets either: the recorded solution.py runs."""
    arena.reset()
    arena.write({"solution/_honest.py": (HOSTILE / "_honest.py").read_text(),
                 "planted.py": (HOSTILE / "planted_pyc.py").read_text(), "plant.py": PLANT_PYC})
    planted = arena.agent("python3 /home/agent/plant.py; rc=$?; rm -f /home/agent/plant.py; exit $rc")
    assert planted.exit_code == 0 and "__pycache__" in planted.stdout, planted
    doors(arena)
    record = arena.score()
    assert doors(arena) == "", "the planted bytecode ran in the scorer's worker"
    assert math.isfinite(record.score) and record.message["results_match"] is True, record.message
    kept = arena.session.scorer.store.load(record.fingerprint).manifest
    assert not [p for p in kept if "__pycache__" in p or p.endswith(".pyc")], sorted(kept)
    arena.root("rm -rf /home/agent/solution/__pycache__")


def test_the_broker_imports_nothing_from_the_participants_home(arena, honest):
    """The GPU side runs as the participant's user: a ~/statistics.py or a usercustomize in the user
    site must not load into it, nor into the trusted worker the broker starts to measure its own
    hand-over. Tried on the CPU through REBENCH_TRITON_BROKER=1 (the broker path of the gpu
    profile, with the smoke sizes) and REBENCH_TRITON_HANDOVER=2 (two trusted batches, of one length:
    on a CPU a line through two lengths' noisy figures could take off a fast kernel's whole time)."""
    from rebench_tui.scoring import parse_scorer_output

    arena.reset()
    shadow = (HOSTILE / "stdlib_shadow.py").read_text()
    site = arena.agent("python3 -c 'import site; print(site.getusersitepackages())'").stdout.strip()
    assert site.startswith("/home/agent/"), site
    rel_site = site[len("/home/agent/"):]
    arena.write({"statistics.py": shadow, f"{rel_site}/usercustomize.py": shadow})
    doors(arena)
    try:
        sandbox = arena.session.sandbox
        r = sandbox.exec([sandbox.python, f"{sandbox.protected}/score.py"], user="root", workdir=sandbox.home,
                         env={"REBENCH_TRITON_BROKER": "1", "REBENCH_TRITON_HANDOVER": "2", "REBENCH_TRITON_HANDOVER_K": "2"},
                         timeout=300)
        parsed = parse_scorer_output(r.result, r.stdout, r.stderr, r.exit_code)
    finally:
        arena.root(f"rm -rf /home/agent/statistics.py /home/agent/{rel_site.split('/')[0]}")
    # (the solution's own worker may load them: it runs the participant's code anyway)
    opened = doors(arena)
    assert "--broker" not in opened, "a file of the participant's home ran inside the scorer's GPU side"
    assert "trusted" not in opened, "a file of the participant's home ran inside the scorer's trusted worker"
    broker = parsed.details.get("gpu_broker") or {}
    assert broker.get("isolated") is True and broker.get("cwd") == "/" and broker.get("dumpable") is False, broker
    assert not broker["home"].startswith("/home/agent"), broker
    assert not any(p == "" or p.startswith("/home/agent") for p in broker.get("path", [])), broker
    assert parsed.message.get("results_match") is True, parsed.message
    points = parsed.details["handover"]["points"]
    assert [len(p["in_process_each_ms"]) for p in points] == [2], parsed.details
    median = sorted(parsed.details["per_call_ms"])[len(parsed.details["per_call_ms"]) // 2]
    assert parsed.message["time_ms"] == pytest.approx(median, rel=1e-3), (parsed.message, parsed.details["per_call_ms"])


def test_nothing_started_before_the_scoring_can_watch_it(arena, honest):
    """A helper started from the participant's shell before the scoring looks for the scorer's
    worker every 10 ms: the scoring runs in a room of its own (another container, another PID
    namespace) while the participant's container is frozen, so it never sees one, and it is
    running again afterwards."""
    arena.reset()
    helper = ("echo $$ > /home/agent/watcher.pid; while :; do "
              "pgrep -u agent -f 'rebench[_]scorer' >/dev/null && echo seen >> /home/agent/watcher.log; sleep 0.01; done")
    arena.session.sandbox.container.exec_run(["setsid", "bash", "-c", helper], user="agent", detach=True)
    pid_file = arena.workspace / "watcher.pid"
    for _ in range(100):
        if pid_file.is_file() and pid_file.read_text().strip():
            break
        time.sleep(0.1)
    pid = int(pid_file.read_text())
    try:
        time.sleep(0.3)
        assert arena.root("cat /home/agent/watcher.log 2>/dev/null | wc -l").stdout.strip() == "0"  # it sees nothing else
        record = arena.score()
        assert math.isfinite(record.score), record.message
        seen = arena.root("cat /home/agent/watcher.log 2>/dev/null | wc -l").stdout.strip()
        assert seen == "0", f"a process started before the scoring watched it ({seen} sightings)"
        assert record.details["room"]["container"] != arena.session.sandbox.container.id[:12], record.details
        state = arena.root(f"ps -o stat= -p {pid}").stdout.strip()
        assert state and not state.startswith("T"), f"the helper was not resumed after the scoring: {state!r}"
    finally:
        arena.root(f"kill -9 {pid}; rm -f /home/agent/watcher.pid /home/agent/watcher.log; true")
        for _ in range(50):  # its last `sleep 0.01` ends by itself
            if not participant_processes(arena):
                break
            time.sleep(0.1)


def test_nothing_the_scored_run_leaves_in_shared_temporary_folders_survives_it(arena, honest):
    record = run_hostile(arena, "tmp_leftover")
    assert math.isfinite(record.score), record.message
    left = arena.root("ls -d /tmp/rebench-memo /dev/shm/rebench-memo 2>/dev/null").stdout.split()
    assert left == [], f"the scored run left {left} for the next scoring"
    # they were made in the scoring room's own /tmp and /dev/shm, removed with the room
    assert find_rooms(arena.session.sandbox.runtime.client, arena.session.meta.id) == []
