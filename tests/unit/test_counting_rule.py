"""The counting rule a participant cannot farm: failed re-scores count against their attempt in
timing environments, and the finish recounts the leading attempt from the copy of its files."""

import json
import math

import pytest

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
    (so a test sees which files were scored)."""

    def edit(d):
        m = d / "environment.toml"
        m.write_text(m.read_text().replace('timeout = "30s"\n', f'timeout = "30s"\ntiming = true\nrecount = {recount}\n'))
        score = d / "protected" / "score.py"
        text = score.read_text()
        anchor = 'secret_ok = open(os.path.join(protected, "secret.txt")).read().startswith("held-out")\n'
        assert anchor in text
        draw = (f'if answer == "noisy":\n'
                f'    _c = os.path.join(os.path.dirname(home.rstrip("/")), "draws")\n'
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
    # drew 1.0), and the home holds the participant's last files again
    assert {r.message["notes"] for r in farmed.core.history if r.recount} == {"# comment\n" * 2}
    assert notes.read_text() == "# comment\n" * 6
    rec = SessionRecords.load(farmed.folder)
    assert rec.paper_score == 0.5 and rec.counting.score == 2.0 and rec.counting.recount
    rows = [r["content"] for r in read_entries(farmed.folder / "audit.jsonl") if r["content"]["type"] == "log"]
    started = [c["content"][1] for c in rows if c["content"][1].get("event") == "recount_started"]
    assert started[0]["attempt"] == 2 and started[0]["home_restored"] is True


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


@pytest.mark.parametrize("flag", ["timing", "recount"])
def test_the_session_records_how_its_scorings_count(toy_session, env_copy, tmp_path, flag):
    s = toy_session(farm_env(env_copy))
    assert (s.meta.timing, s.meta.recount_runs) == (True, 3)
    s.close()
