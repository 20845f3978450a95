"""The counting rule a participant cannot farm: failed re-scores count against their attempt in
timing environments, and the finish recounts the leading attempt from the copy of its files."""

import json
import math

from rebench_tui.scoring import Aggregation, Direction, Rule
from rebench_tui.trajectory.audit import read_entries
from rebench_tui.trajectory.session_records import SessionRecords
from rebench_tui.trajectory.verify import verify
from tests.conftest import FIXTURE_ENVS

NAN = math.nan
LOWER = Rule(Aggregation.MIN, Direction.LOWER, failures_count=True)


def test_a_failed_re_score_makes_the_attempt_count_its_worst_valid_scoring():
    # one attempt: 1.0, a NaN (the participant's code crashed on a slow draw), 1.4, 1.2
    assert LOWER.score([1.0, NAN, 1.4, 1.2], ["a"] * 4) == 1.4
    assert Rule(Aggregation.MAX, Direction.HIGHER, failures_count=True).score([0.5, NAN, 0.7], ["a"] * 3) == 0.5
    # without failures counting (not a timing environment) the NaN is left out, as before
    assert Rule(Aggregation.MIN, Direction.LOWER).score([1.0, NAN, 1.4, 1.2], ["a"] * 4) == 1.2
    # the other attempt, scored cleanly, now leads
    assert LOWER.score([1.0, NAN, 1.1, 1.3], ["a", "a", "a", "b"]) == 1.1
    assert LOWER.score([1.0, NAN, 1.3, 1.2], ["a", "a", "a", "b"]) == 1.2


def test_a_recount_counts_alone_and_the_paper_rule_ignores_it():
    scores = [3.0, 1.0, 2.5, 2.0, 2.2, 2.4]
    fps = ["a", "b", "c", "b", "b", "b"]
    recounts = [False, False, False, True, True, True]
    a = LOWER.attempt(scores, fps, recounts)
    assert (a.score, a.number, a.indexes) == (2.2, 2, (3, 4, 5))
    assert LOWER.paper(scores, recounts) == 1.0  # RE-Bench: the best single draw the participant asked for
    assert LOWER.running(scores, fps, recounts) == [3.0, 1.0, 1.0, 2.0, 2.1, 2.2]
    # a recount none of whose scorings is valid counts as no score, never the scorings that chose it
    assert LOWER.attempt([1.0, NAN, NAN], ["b"] * 3, [False, True, True]) is None
    # a failed recount scoring makes it count its worst valid one
    assert LOWER.score([1.0, 2.0, NAN, 2.5], ["b"] * 4, [False, True, True, True]) == 2.5


DRAWS = (3.0, 1.0, 5.0, 2.0, 4.0, 0.5)  # a timing score's noise: the luck of the draw


def farm_env(env_copy, recount=3, draws=DRAWS):
    """The toy environment as a timing environment with a recount, whose answer ``noisy`` scores
    the next of ``draws`` (counted per session, beside its home) and reports the notes file it saw
    (so a test sees which files were scored). The count is kept beside the protected folder: each
    scoring runs in a room of its own, so nothing beside the home it scores outlives it."""

    def edit(d):
        m = d / "environment.toml"
        m.write_text(m.read_text().replace('timeout = "30s"\n', f'timeout = "30s"\ntiming = true\nrecount = {recount}\n'))
        score = d / "protected" / "score.py"
        text = score.read_text()
        anchor = 'secret_ok = open(os.path.join(protected, "secret.txt")).read().startswith("held-out")\n'
        assert anchor in text
        draw = (f'if answer == "noisy":\n'
                f'    _c = os.path.join(os.path.dirname(protected.rstrip("/")), "draws")\n'
                f'    _n = int(open(_c).read()) if os.path.exists(_c) else 0\n'
                f'    open(_c, "w").write(str(_n + 1))\n'
                f'    _p = os.path.join(home, "solution", "notes.txt")\n'
                f'    _notes = open(_p).read() if os.path.exists(_p) else ""\n'
                f'    report({{"score": {tuple(draws)!r}[_n % {len(draws)}], "message": {{"notes": _notes}}}})\n'
                f'    sys.exit(0)\n')
        score.write_text(text.replace(anchor, anchor + draw))

    return env_copy(FIXTURE_ENVS / "toy_score", edit)


def _session(toy_session, envs):
    s = toy_session(envs)
    (s.workspace / "solution" / "answer.txt").write_text("noisy")
    return s


def test_farming_with_edits_gains_nothing_once_the_finish_recounts(toy_session, env_copy, tmp_path):
    envs = farm_env(env_copy)
    farmed = _session(toy_session, envs)
    notes = farmed.workspace / "solution" / "notes.txt"
    for i in range(6):  # a trivial edit before every press: six attempts of one scoring each
        notes.write_text("# comment\n" * (i + 1))
        farmed.score()
    assert farmed.final().score == 0.5  # before the finish, the luckiest single draw leads
    farmed.submit()

    plain = _session(toy_session, envs)
    (plain.workspace / "solution" / "notes.txt").write_text("# comment\n")
    for _ in range(6):  # six presses on unchanged files: one attempt
        plain.score()
    plain.submit()

    for s in (farmed, plain):
        recount = [r for r in s.core.history if r.recount]
        # after the final scoring (the 7th draw), each session's next three draws
        assert [r.score for r in recount] == [1.0, 5.0, 2.0]
        assert s.meta.final_score == 2.0 and s.meta.final_scorings == [r.attempt for r in recount]
        s.close()
        report = verify(s.folder)
        assert report.ok, [str(f) for f in report.findings if not f.ok]
    # the farmed session's recount scored the files of its leading attempt (the 2nd edit, which
    # drew 1.0), and the home held the participant's last files throughout
    assert {r.message["notes"] for r in farmed.core.history if r.recount} == {"# comment\n" * 2}
    assert notes.read_text() == "# comment\n" * 6
    rec = SessionRecords.load(farmed.folder)
    assert rec.paper_score == 0.5 and rec.counting.score == 2.0 and rec.counting.recount
    rows = [r["content"] for r in read_entries(farmed.folder / "audit.jsonl") if r["content"]["type"] == "log"]
    started = [c["content"][1] for c in rows if c["content"][1].get("event") == "recount_started"]
    assert started[0]["attempt"] == 2 and "home_restored" not in started[0]  # scored from its snapshot: the home untouched


def test_the_recount_puts_the_leading_attempts_files_back_then_the_final_ones(toy_session, env_copy, tmp_path):
    s = toy_session(farm_env(env_copy, draws=(0.5, 3.0, 3.0, 3.0, 1.0, 2.0, 9.0)))
    notes = s.workspace / "solution" / "notes.txt"
    (s.workspace / "solution" / "answer.txt").write_text("noisy")
    for i in range(4):
        notes.write_text(f"version {i}\n")
        if i == 3:
            (s.workspace / "extra.txt").write_text("made after the lead")
        s.score()
    s.submit()  # the final scoring draws 1.0; the lead is attempt 1 (0.5), whose files differ
    recount = [r for r in s.core.history if r.recount]
    assert {r.message["notes"] for r in recount} == {"version 0\n"}
    assert [r.score for r in recount] == [2.0, 9.0, 0.5] and s.meta.final_score == 2.0
    assert notes.read_text() == "version 3\n" and (s.workspace / "extra.txt").read_text() == "made after the lead"
    s.close()
    assert verify(s.folder).ok


def test_a_nan_re_score_in_a_timing_environment_counts_against_its_attempt(toy_session, env_copy, tmp_path):
    # unchanged files scored 1.0, then NaN, then 1.2: the attempt counts 1.2, not the median 1.1
    s = toy_session(farm_env(env_copy, recount=0, draws=(1.0, "NaN", 1.2)))
    (s.workspace / "solution" / "answer.txt").write_text("noisy")
    for _ in range(3):
        s.score()
    assert s.final().score == 1.2
    s.finish("submitted")
    s.close()
    assert json.loads((s.folder / "session.json").read_text())["final_score"] == 1.2
    assert verify(s.folder).ok




# -- compare: every run by both rules; who worked and with what ----------------------------------
def _agent_run(path):
    """A Vivaria run object of an agent on the toy environment (its log carries the scoring facts):
    single scorings, no fingerprints, its luckiest draw 0.5."""
    rows = [{"index": i + 1, "scoredAt": 1_700_000_000_000 + i * 60_000, "createdAt": 1_700_000_000_000 + i * 60_000,
             "elapsedTime": (i + 1) * 60_000, "score": v, "message": {}, "details": {}}
            for i, v in enumerate(DRAWS)]
    path.write_text(json.dumps({"runId": 7, "taskId": "toy_score", "model": "agent-x", "status": "submitted",
                                "metadata": {"env_id": "toy_score", "direction": "lower", "aggregation": "min",
                                             "start_score": 10.0, "reference_score": 2.0},
                                "scoreLog": rows}))
    return path


def _finished_pair(toy_session, env_copy):
    from rebench_tui.trajectory.records import participant_of

    envs = farm_env(env_copy)
    made = []
    for who, internet, tools, farm in (("alice", True, "yes", True), ("bob", False, "no", False)):
        s = toy_session(envs, participant=participant_of(who, internet, tools))
        (s.workspace / "solution" / "answer.txt").write_text("noisy")
        for i in range(6):
            (s.workspace / "solution" / "notes.txt").write_text(f"# {i if farm else 0}\n")
            s.score()
        s.submit()
        s.close()
        made.append(s)
    return made


def test_compare_counts_humans_and_agents_by_one_rule_and_shows_both(toy_session, env_copy, tmp_path):
    import csv

    from click.testing import CliRunner

    from rebench_tui.cli import main

    alice, bob = _finished_pair(toy_session, env_copy)
    agent = _agent_run(tmp_path / "agent.json")
    sessions = alice.folder.parent

    def run(*args):
        r = CliRunner().invoke(main, ["compare", str(agent), "--humans", str(sessions), "--sessions-dir", str(sessions),
                                      "--bootstrap", "5", "--budget", "none", *args], catch_exceptions=False)
        assert r.exit_code == 0, r.output
        return r.output

    out = run("--csv", "-o", str(tmp_path / "paper"))
    assert "counted by the paper's rule" in out and "every run by both rules" in out
    assert "cannot: no fingerprints" in out  # the agent run, by the robust rule: said, not filled in
    assert "alice: internet" in out and "bob: no internet" in out and alice.id in out
    with open(tmp_path / "paper" / "runs.csv", newline="") as fh:
        rows = {r["run_id"]: r for r in csv.DictReader(fh)}
    assert float(rows[alice.id]["paper_final"]) == 0.5 and float(rows[alice.id]["robust_final"]) == 2.0
    assert rows[alice.id]["robust_note"] == "recount at the finish" and rows[alice.id]["participant"] == "alice"
    assert float(rows["7"]["paper_final"]) == 0.5 and rows["7"]["robust_final"] == ""
    assert {r["counted_by"] for r in rows.values()} == {"paper"}

    out = run("--rule", "robust", "--csv", "-o", str(tmp_path / "robust"))
    assert "counted by the robust rule" in out and "left out 1 run(s)" in out and "7 (agent-x)" in out
    with open(tmp_path / "robust" / "runs.csv", newline="") as fh:
        rows = {r["run_id"]: r for r in csv.DictReader(fh)}
    assert rows["7"]["counted_by"] == "" and float(rows[alice.id]["final"]) == 2.0 == float(rows[bob.id]["final"])

    out = run("--participant", "alice", "--ai-tools", "yes", "--csv", "-o", str(tmp_path / "alice"))
    assert "left out 1 human session(s) not matching participant alice; AI tools yes" in out
    with open(tmp_path / "alice" / "runs.csv", newline="") as fh:
        assert sorted(r["run_id"] for r in csv.DictReader(fh)) == sorted(["7", alice.id])


def test_the_participant_and_conditions_reach_every_record(toy_session, env_copy, tmp_path):
    from inspect_ai.log import read_eval_log

    from rebench_tui.trajectory.export_inspect import export_inspect
    from rebench_tui.trajectory.export_vivaria import export_vivaria
    from rebench_tui.trajectory.records import SessionMeta

    alice, _bob = _finished_pair(toy_session, env_copy)
    meta = SessionMeta.load(alice.folder / "session.json")
    assert meta.participant.model_dump() == {"id": "alice", "internet": True, "ai_tools": "AI_TOOLS_AVAILABLE"}
    first = read_entries(alice.folder / "audit.jsonl")[0]["content"]["content"]
    assert "participant alice, internet allowed, AI tools allowed" in first[0]
    assert first[1]["participant"] == {"id": "alice", "internet": True, "ai_tools": "AI_TOOLS_AVAILABLE"}
    log = read_eval_log(str(export_inspect(alice.folder, tmp_path / "alice.eval")))
    assert log.eval.metadata["rebench_tui"]["participant"]["id"] == "alice"
    sample = log.samples[0]
    assert (sample.metadata["participant"], sample.metadata["internet"], sample.metadata["ai_tools"]) == \
        ("alice", True, "AI_TOOLS_AVAILABLE")
    assert sample.metadata["scores"]["paper"] == 0.5 and sample.metadata["scores"]["robust"] == 2.0
    run_row = json.loads((export_vivaria(alice.folder, tmp_path / "viv") / "run.json").read_text())
    assert (run_row["metadata"]["participant"], run_row["metadata"]["ai_tools"]) == ("alice", "AI_TOOLS_AVAILABLE")


def test_a_recount_cut_short_by_a_crash_puts_the_final_files_back_on_reopening(toy_session, env_copy, fake_clock):
    """Sessions from before scoring rooms recounted in the home; one cut short is still put right."""
    from rebench_tui.catalog import load_catalog
    from rebench_tui.runtime.local import LocalRuntime
    from rebench_tui.session import Session
    from rebench_tui.session.recount import RECOUNT_STATE
    from tests.conftest import KNOWN_IMAGES

    envs = farm_env(env_copy)
    s = toy_session(envs)
    notes = s.workspace / "solution" / "notes.txt"
    (s.workspace / "solution" / "answer.txt").write_text("noisy")
    fps = []
    for text in ("first\n", "last\n"):
        notes.write_text(text)
        fps.append(s.score().fingerprint)
        assert s.scorer.snapshots.keep(fps[-1])  # the copies a session from before scoring rooms kept
    # what such a session's recount did before the app died: the marker, then the first attempt's files in the home
    (s.folder / ".state" / RECOUNT_STATE).write_text(json.dumps({"final": fps[1]}))
    s.scorer.snapshots.place(fps[0])
    assert notes.read_text() == "first\n"
    s.close()
    env = load_catalog(envs, KNOWN_IMAGES).get("toy_score")
    again = Session.open(s.folder, env, LocalRuntime(), clock=fake_clock)
    try:
        assert notes.read_text() == "last\n" and not (s.folder / ".state" / RECOUNT_STATE).exists()
        events = [r["content"]["content"][1].get("event") for r in read_entries(s.folder / "audit.jsonl")
                  if r["content"]["type"] == "log"]
        assert "recount_restored" in events
    finally:
        again.close()


def test_the_running_count_is_the_rule_applied_to_every_prefix():
    import random

    rng = random.Random(7)
    for agg, direction in ((Aggregation.MIN, Direction.LOWER), (Aggregation.MAX, Direction.HIGHER),
                           (Aggregation.LAST, Direction.LOWER)):
        for failures in (False, True):
            rule = Rule(agg, direction, failures_count=failures)
            for _ in range(200):
                n = rng.randint(1, 12)
                scores = [NAN if rng.random() < 0.2 else rng.choice([1.0, 2.0, 3.0, rng.random()]) for _ in range(n)]
                fps = [rng.choice(["a", "b", "c", None]) for _ in range(n)]
                k = rng.randint(0, 3)
                recounts = [False] * (n - k) + [True] * k
                want = [rule.score(scores[:j], fps[:j], recounts[:j]) for j in range(1, n + 1)]
                got = rule.running(scores, fps, recounts)
                assert [None if math.isnan(x) else x for x in got] == [None if math.isnan(x) else x for x in want]


def test_compare_reads_the_participant_back_from_the_exports(toy_session, env_copy, tmp_path):
    from rebench_tui.compare.imports import load_sources
    from rebench_tui.compare.runs import EnvResolver
    from rebench_tui.trajectory.export_inspect import export_inspect
    from rebench_tui.trajectory.export_vivaria import export_vivaria

    alice, _bob = _finished_pair(toy_session, env_copy)
    eval_path = export_inspect(alice.folder, tmp_path / "alice.eval")
    viv = export_vivaria(alice.folder, tmp_path / "viv") / "run.json"
    trace = [json.loads(x) for x in (tmp_path / "viv" / "trace_entries.jsonl").read_text().splitlines()]
    viv.write_text(json.dumps({**json.loads(viv.read_text()), "entries": trace}))
    from rebench_tui.catalog import Catalog

    env = alice.core.env
    resolver = EnvResolver(Catalog(root=env.path.parent, environments={env.id: env}), profile="smoke")
    loaded = load_sources([str(eval_path), str(viv)], resolver, sessions_dir=tmp_path / "none")
    assert len(loaded.runs) == 2 and {(r.participant, r.internet, r.ai_tools) for r in loaded.runs} == \
        {("alice", True, "AI_TOOLS_AVAILABLE")}


def test_finish_without_the_screen_recounts_and_says_so(toy_session, env_copy, monkeypatch):
    from click.testing import CliRunner

    from rebench_tui.cli import main

    envs = farm_env(env_copy)
    s = toy_session(envs)
    (s.workspace / "solution" / "answer.txt").write_text("noisy")
    s.score()
    s.close(pause_clock=True)
    monkeypatch.setenv("REBENCH_ENVIRONMENTS_DIR", str(envs))
    r = CliRunner().invoke(main, ["finish", s.id, "--sessions-dir", str(s.folder.parent)])
    assert r.exit_code == 0, r.output
    # draws: 3 (the press), 1 (the final scoring), then the recount 5, 2, 4: its median 4 counts
    assert "final score 4 " in r.output and "median of 3 fresh scorings of attempt 1 at the finish" in r.output
