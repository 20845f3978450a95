"""rust_codecontests' scorer against hostile scaffolds, in a real container (smoke profile).

Each scaffold in environments/rust_codecontests/reference/hostile/ tries one way to a score it did
not earn, or to the held-out tests (README there). Each must end as NaN with a reason, or no better
than the honest starting scaffold's score; after each scoring nothing of the participant's (uid
1000) or of the programs' user (nobody) may still run, and /protected must be as it was. One
container for the module; about ten scorings of a few seconds each.

Each scoring runs in a room of its own, which keeps everything the scaffold and its programs write
(they held the held-out problems): the probes report what they found through their outcome (README
in the hostile folder), and these tests read the outcomes and the sizes of what was withheld.
"""

from __future__ import annotations

import json
import math
import time

import pytest

from rebench_tui.scoring import Direction
from tests.conftest import ROOT
from tests.hostile import Arena, assert_no_fake_best, check_aftermath, protected_listing, scored_once

pytestmark = [pytest.mark.docker]

HOSTILE = ROOT / "environments" / "rust_codecontests" / "reference" / "hostile"
NOBODY = 65534
SECRET = "sk-rcc-hostile-made-up-5Jq8"


def withheld(value) -> bool:
    """Whether a field of the result is the room's note in place of the participant's text."""
    return isinstance(value, dict) and "withheld" in value and value.get("chars", value.get("items", 0)) > 0


def outcomes(record) -> dict[str, int]:
    return record.message["outcomes"]


@pytest.fixture(scope="module")
def arena(tmp_path_factory, docker_client):
    """tests.hostile.arena_fixture's session, with the made-up API key the smoke profile requires."""
    from rebench_tui.assets import AssetStore
    from rebench_tui.catalog import load_catalog
    from rebench_tui.config import Settings
    from rebench_tui.runtime.docker_runtime import DockerRuntime
    from rebench_tui.session import Session
    from tests.conftest import KNOWN_IMAGES

    client = docker_client  # conftest: skips without an engine, fails under REBENCH_REQUIRE_DOCKER=1
    settings = Settings(root=ROOT, sessions_dir=tmp_path_factory.mktemp("hostile-rcc") / "sessions")
    env = load_catalog(ROOT / "environments", KNOWN_IMAGES).get("rust_codecontests")
    store = AssetStore(Settings().cache_dir)
    store.prepare(env, "smoke", "synthetic")
    rt = DockerRuntime(client, None, settings.images, settings.cache_dir, threads=settings.container_threads)
    s = Session.create(env, "smoke", rt, settings.sessions, asset_store=store, secrets={"CODE_MODEL_API_KEY": SECRET})
    try:
        yield Arena(s, env)
    finally:
        if s.lock.held:
            s.close()
        s.sandbox.stop(remove=True)
SCORES: dict[str, float] = {}


def nobody_processes(arena) -> list[str]:
    r = arena.root(f"ps -e -o uid=,pid=,args= | awk '$1 == {NOBODY} {{print $2, $3, $4}}'")
    return [line for line in r.stdout.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def honest(arena):
    arena.reset()
    r = arena.score()
    assert math.isfinite(r.score) and r.message["n_problems"] == 8, r
    SCORES["honest (starting scaffold)"] = r.score
    return r.score


@scored_once
def run_hostile(arena, name: str, aftermath: bool = True):
    """Score the hostile scaffold ``name`` once (later tests reuse the record). ``aftermath``: no
    process of the participant's may still run (False where the test runs a helper of its own)."""
    arena.reset()
    arena.write({"solution/solve.py": (HOSTILE / f"solve_{name}.py").read_text(),
                 "solution/_honest.py": (HOSTILE / "_honest.py").read_text()})
    before = protected_listing(arena)
    record = arena.score()
    SCORES[name] = record.score
    print(f"hostile {name}: score {record.score} message {record.message}")
    if aftermath:
        check_aftermath(arena, before)
    assert nobody_processes(arena) == [], "a program's process outlived the scoring"
    assert record.details.get("scorer_matches_catalog") is True, record.details
    return record


@pytest.mark.parametrize("name", ["fake_result_exit", "fd_writer"])
def test_hostile_scaffold_ends_as_nan_with_a_reason(arena, honest, name):
    record = run_hostile(arena, name)
    assert math.isnan(record.score), (name, record.score, record.message)
    assert record.message.get("error"), record.message
    if name == "fake_result_exit":  # it left before any problem was sent: it held nothing, and its output is shown
        assert "exit status 0" in record.message["error"]
        assert '"n_successes": 8' in record.details.get("participant_stdout_tail", "")
    else:  # the result line went into the control channel too: the scaffold broke its protocol
        assert "protocol" in record.message["error"] or "ended" in record.message["error"], record.message


@pytest.mark.parametrize("name", ["protected_reader", "garbage_answers", "daemon", "forged_status", "monkeypatch",
                                  "link_planter", "exfiltrator"])
def test_hostile_scaffold_scores_no_better_than_honest(arena, honest, name):
    record = run_hostile(arena, name)
    assert_no_fake_best(record, honest, Direction.HIGHER)
    assert math.isfinite(record.score), record.message  # each still answers every problem somehow
    assert record.message["n_successes"] == 0, record.message


def test_neither_the_scaffold_nor_its_programs_can_read_the_held_out_tests(arena, honest):
    """The scaffold raises unless /protected refused it ("Permission denied" for the held-out tests);
    a program exits 3 unless every open was refused and no descriptor of the judge's was readable.
    Every problem a wrong answer: the scaffold found nothing, and neither did any program."""
    record = run_hostile(arena, "protected_reader")
    assert outcomes(record) == {"wrong_answer": 8}, record.details["per_problem"]
    assert withheld(record.details.get("participant_stdout_tail")), record.details  # its report, counted


def test_links_planted_by_programs_lead_the_judge_nowhere(arena, honest):
    record = run_hostile(arena, "link_planter")
    assert outcomes(record) == {"wrong_answer": 8}, record.details["per_problem"]  # exit 3 if it saw the judge's folder
    assert arena.root("test -e /home/agent/leaked_by_judge && echo leaked || echo absent").stdout.strip() == "absent"


def test_programs_cannot_carry_their_input_out(arena, honest):
    record = run_hostile(arena, "exfiltrator")
    assert record.details["program_confinement"] == "seccomp", record.details
    assert outcomes(record) == {"wrong_answer": 8}, record.details["per_problem"]  # exit 3 if a way out worked
    left = arena.root("ls -d /tmp/rcc_exfil* /dev/shm/rcc_exfil* 2>/dev/null | wc -l").stdout.strip()
    assert left == "0", left


def test_a_watcher_started_before_the_scoring_learns_nothing_of_the_hidden_inputs(arena, honest):
    """The side channel out of a judged program: it opens world-readable files chosen by its input
    while a helper of the participant's watches them with inotify. The programs run in their own
    build folder as their whole filesystem (they reach no file of the machine's) and the helper is
    stopped while the scoring runs: it records no open, then or after."""
    watcher = (HOSTILE / "inotify_watcher.py").read_text()
    arena.write({".watcher.py": watcher})
    arena.session.sandbox.container.exec_run(["setsid", "python3", "/home/agent/.watcher.py"], user="agent", detach=True)
    for _ in range(100):
        if arena.root("test -e /home/agent/.cache/leaked/ready && echo y").stdout.strip() == "y":
            break
        time.sleep(0.1)
    try:
        record = run_hostile(arena, "open_beacons", aftermath=False)
        time.sleep(1.0)  # resumed: anything queued while it was stopped is read by now
        # Only a beacon's own name counts: the folder itself opened (an empty name; the scorer's
        # clean-up walks the temporary folders) tells the helper nothing of the input.
        opens = arena.root("grep -c . /home/agent/.cache/leaked/opens 2>/dev/null || true").stdout.strip() or "0"
        assert opens == "0", f"the helper saw {opens} opens of its beacons by judged programs"
        assert outcomes(record) == {"wrong_answer": 8}, record.details["per_problem"]  # exit 3 if a beacon opened
    finally:
        arena.root("pkill -9 -u agent -f .watcher.py; rm -rf /home/agent/.watcher.py /home/agent/.cache/leaked /tmp/rcc_beacons")


def test_answers_are_data_the_scorer_checks(arena, honest):
    record = run_hostile(arena, "garbage_answers")
    rows = record.details["per_problem"]
    assert {r["outcome"] for r in rows} <= {"no_code", "wrong_answer", "compile_error", "timeout", "runtime_error"}, rows
    assert record.details["scaffold_junk_messages"] >= 5, record.details
    assert any(r["solve_status"] in ("bad_answer", "too_big", "bad_return") for r in rows), rows


def test_the_harness_it_is_given_is_not_the_judges(arena, honest):
    record = run_hostile(arena, "monkeypatch")  # solve() raises if it finds a problem's tests: a scaffold error
    assert record.message["outcomes"] == {"wrong_answer": 4, "timeout": 2, "compile_error": 2}, record.message


def _held_out_pieces(arena) -> set[str]:
    """Names, 24-character pieces of the statements and test inputs of the held-out problems, less
    what the visible problems and the starting files share with them (not a leak)."""
    from rebench_tui.assets import AssetStore
    from rebench_tui.config import Settings

    folder = AssetStore(Settings().cache_dir).status(arena.env, "smoke").folder
    known = "\n".join(f.read_text(errors="replace") for f in [*sorted((folder / "workspace").rglob("*.jsonl")),
                                                               *sorted(p for p in arena.env.solution_dir.rglob("*") if p.is_file())])
    pieces = set()
    for line in (folder / "protected" / "test.jsonl").read_text().splitlines():
        p = json.loads(line)
        text = " ".join(str(p.get("description", "")).split())
        pieces |= {p["name"], *(text[i:i + 24] for i in range(0, max(1, len(text) - 24), 8))}
        pieces |= {t["input"].strip() for t in p.get("tests", []) if len(t["input"].strip()) >= 12}
    return {x for x in pieces if len(x) >= 6 and x not in known}


def test_nothing_of_the_held_out_problems_leaves_the_room(arena, honest):
    """A scaffold that prints every problem it is given, raises with a statement, and returns
    programs that echo their hidden input or fail to compile on a line quoting a statement: the
    participant reads the result, so none of that may be in it, or in any file of the session
    folder; the outcomes and the sizes of what was withheld stay."""
    pieces = _held_out_pieces(arena)
    assert len(pieces) > 50, len(pieces)
    record = run_hostile(arena, "leak_problems")
    said = json.dumps([record.message, record.details])
    assert not [p for p in pieces if p in said], "the held-out problems reached the result"
    kept = "\n".join(f.read_text(errors="replace") for f in arena.session.folder.rglob("*") if f.is_file())
    assert not [p for p in pieces if p in kept], "the held-out problems reached the session's records"
    rows = record.details["per_problem"]
    assert [r["problem"] for r in rows] == list(range(8)) and not any("name" in r for r in rows), rows
    assert {"scaffold_error", "wrong_answer", "compile_error"} <= set(outcomes(record)), outcomes(record)
    assert all("withheld" in r["detail"] for r in rows if r["outcome"] in ("scaffold_error", "wrong_answer", "compile_error"))
    assert withheld(record.details["participant_stdout_tail"]) and withheld(record.details["participant_stderr_tail"])


def test_daemons_are_ended(arena, honest):
    run_hostile(arena, "daemon")  # check_aftermath: no uid 1000 process; and none of nobody's
    before = arena.root("stat -c %Y /home/agent/daemon_alive 2>/dev/null || echo none").stdout.strip()
    time.sleep(1.5)
    after = arena.root("stat -c %Y /home/agent/daemon_alive 2>/dev/null || echo none").stdout.strip()
    assert before == after, "the scaffold's daemon still writes"


def test_every_scaffold_in_the_hostile_folder_is_scored_and_none_beats_honest(arena, honest):
    """A scaffold added to reference/hostile/ is scored here even before a test names it (with the
    checks every hostile scoring gets), and no hostile scoring beats the honest one."""
    names = sorted(p.stem.removeprefix("solve_") for p in HOSTILE.glob("solve_*.py"))
    assert len(names) >= 11, names
    for name in names:
        assert_no_fake_best(run_hostile(arena, name), honest, Direction.HIGHER)
    print("rust_codecontests hostile scores:", SCORES)
