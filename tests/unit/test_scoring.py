import json
import math

import pytest

from rebench_tui.scoring import (
    Aggregation,
    attempt_fingerprint,
    counting_attempt,
    counting_score,
    group_attempts,
    json_score,
    normalize,
    parse_scorer_output,
    running_counting,
)


def line(score, message=None, details=None):
    return json.dumps({"score": score, "message": message or {}, "details": details or {}})


def test_parses_the_last_result_line_and_keeps_other_output():
    out = "compiling...\n" + line(1.0, {"a": 1}) + "\nmore noise\n" + line(0.5, {"time": 2}, {"seed": 7}) + "\n"
    r = parse_scorer_output(out, out, "warning: x", 0)
    assert r.score == 0.5 and r.valid
    assert r.message == {"time": 2}
    assert r.details["seed"] == 7
    assert "compiling" in r.details["stdout_tail"] and r.details["stderr_tail"] == "warning: x"
    assert line(0.5, {"time": 2}, {"seed": 7}) not in r.details["stdout_tail"]


@pytest.mark.parametrize("value", ["NaN", "nan", None, float("nan")])
def test_nan_spellings_are_invalid(value):
    out = json.dumps({"score": value, "message": {"why": "bad"}}) if value == value else '{"score": NaN, "message": {"why": "bad"}}'
    r = parse_scorer_output(out, out, "", 0)
    assert math.isnan(r.score) and not r.valid
    assert r.message["why"] == "bad"


def test_timeout_and_oom_are_named():
    t = parse_scorer_output(line(1.0), line(1.0), "", 137, timed_out=True)
    assert math.isnan(t.score) and t.message == {"timeout": True}
    o = parse_scorer_output("", "", "Killed", 137)
    assert math.isnan(o.score) and o.message == {"out_of_memory": True}


@pytest.mark.parametrize("stdout, code, reason", [
    ("", 0, "no result line"),
    ("not json at all\n{broken", 0, "no result line"),
    ('{"message": {}}', 0, "no result line"),
    ("", 3, "status 3"),
])
def test_unparseable_output_is_nan_with_reason(stdout, code, reason):
    r = parse_scorer_output(stdout, stdout, "", code)
    assert math.isnan(r.score)
    assert reason in r.message["error"]


def test_nonzero_exit_invalidates_a_reported_score():
    r = parse_scorer_output(line(0.3), line(0.3), "Traceback", 1)
    assert math.isnan(r.score)
    assert r.details["reported_score"] == 0.3


def test_non_numeric_score_and_non_object_message():
    r = parse_scorer_output('{"score": "fast", "message": "hello"}', '', "", 0)
    assert math.isnan(r.score)
    assert r.message["value"] == "hello" and "not a number" in r.message["error"]


def test_long_output_is_cut_to_a_tail():
    r = parse_scorer_output("x" * 100_000 + "\n" + line(1.0), "x" * 100_000 + "\n" + line(1.0), "", 0)
    assert len(r.details["stdout_tail"]) <= 4001


def test_normalize_lower_is_better():
    assert normalize(2.2, 2.2, 0.26) == 0
    assert normalize(0.26, 2.2, 0.26) == pytest.approx(1)
    assert normalize(1.23, 2.2, 0.26) == pytest.approx(0.5)
    assert normalize(3.0, 2.2, 0.26) == 0  # worse than start clips to 0
    assert normalize(-0.71, 2.2, 0.26) == pytest.approx(1.5)  # above 1 is kept
    assert normalize(3.0, 2.2, 0.26, clip=False) == pytest.approx(-0.8 / 1.94)  # a session's own: the real value
    assert str(normalize(2.2, 2.2, 0.26, clip=False)) == "0.0"  # not -0.0 (shown as -0.00)


def test_normalize_higher_is_better_and_nan():
    assert normalize(0.54, 0.54, 0.85) == 0
    assert normalize(0.85, 0.54, 0.85) == pytest.approx(1)
    assert math.isnan(normalize(math.nan, 0.54, 0.85))
    with pytest.raises(ValueError):
        normalize(1.0, 0.5, 0.5)


def final_index(scores, aggregation, fingerprints=None):
    a = counting_attempt(scores, aggregation, fingerprints)
    return None if a is None else a.representative


def test_without_fingerprints_every_scoring_is_its_own_attempt():
    """Old sessions (no fingerprints) keep the plain rule: best valid, or last valid."""
    scores = [3.0, math.nan, 1.0, 2.0, math.nan]
    assert final_index(scores, Aggregation.MIN) == 2
    assert final_index(scores, Aggregation.MAX) == 0
    assert final_index(scores, Aggregation.LAST) == 3
    assert final_index([math.nan], Aggregation.MIN) is None
    assert final_index([], Aggregation.LAST) is None
    assert counting_score(scores, Aggregation.MIN) == 1.0 and math.isnan(counting_score([], Aggregation.MIN))
    assert [a.number for a in group_attempts(scores)] == [1, 2, 3, 4, 5]
    assert final_index(scores, Aggregation.MIN, [None] * 5) == 2  # a row without a fingerprint: its own attempt


def test_running_counting_without_fingerprints_is_best_so_far():
    s = [math.nan, 3.0, 4.0, 1.0, math.nan, 2.0]
    r = running_counting(s, Aggregation.MIN)
    assert math.isnan(r[0]) and r[1:] == [3.0, 3.0, 1.0, 1.0, 1.0]
    assert running_counting(s, Aggregation.MAX)[1:] == [3.0, 4.0, 4.0, 4.0, 4.0]
    assert running_counting(s, Aggregation.LAST)[1:] == [3.0, 4.0, 1.0, 1.0, 2.0]


def test_three_rescores_of_unchanged_files_count_with_their_median():
    """The reported case: one unchanged starting solution scored three times."""
    scores = [-1.462, -1.663, -1.628]
    fps = ["a"] * 3
    a = counting_attempt(scores, Aggregation.MIN, fps)
    assert a.median == -1.628 and a.n == 3 and (a.low, a.high) == (-1.663, -1.462)
    assert a.representative == 2  # the median scoring itself
    assert counting_score(scores, Aggregation.MIN, fps) == -1.628  # not the luckiest draw, -1.663
    assert counting_score(scores, Aggregation.MIN) == -1.663  # what the old rule gave
    # after each scoring: the first alone, then the median of two (their mean), then of three
    assert running_counting(scores, Aggregation.MIN, fps) == [-1.462, (-1.462 + -1.663) / 2, -1.628]


def test_best_attempt_by_median_and_ties_go_to_the_earliest():
    scores = [5.0, 1.0, 9.0, 3.0, 3.0, 2.0]
    fps = ["x", "x", "x", "y", "y", "z"]
    # x: median 5 of (5, 1, 9); y: 3; z: 2 (one scoring counts as itself)
    assert [(a.number, a.fingerprint, a.median) for a in group_attempts(scores, fps)] == [(1, "x", 5.0), (2, "y", 3.0), (3, "z", 2.0)]
    assert counting_attempt(scores, Aggregation.MIN, fps).fingerprint == "z"
    assert counting_attempt(scores, Aggregation.MAX, fps).fingerprint == "x"
    tie = counting_attempt([2.0, 1.0, 3.0, 2.0], Aggregation.MIN, ["a", "b", "b", "c"])
    assert tie.fingerprint == "a" and tie.median == 2.0  # a (2) and b (median 2) tie: the earlier attempt
    assert running_counting([2.0, 1.0, 3.0, 2.0], Aggregation.MIN, ["a", "b", "b", "c"]) == [2.0, 1.0, 2.0, 2.0]


def test_even_count_median_is_the_mean_of_the_middle_two():
    a = counting_attempt([4.0, 1.0, 2.0, 10.0], Aggregation.MIN, ["f"] * 4)
    assert a.median == 3.0 and a.representative == 0  # 4.0 and 2.0 are as near: the earlier one


def test_files_changed_back_rejoin_their_attempt():
    scores = [3.0, 1.0, 5.0]
    fps = ["v1", "v2", "v1"]
    attempts = group_attempts(scores, fps)
    assert [a.indexes for a in attempts] == [(0, 2), (1,)]
    assert counting_score(scores, Aggregation.MAX, fps) == 4.0  # v1: median of 3 and 5
    assert counting_score(scores, Aggregation.MIN, fps) == 1.0


def test_nan_rescores_do_not_enter_the_median_and_an_all_nan_attempt_never_counts():
    nan = math.nan
    scores = [2.0, nan, 4.0, nan, nan, 0.5]
    fps = ["a", "a", "a", "b", "b", None]
    attempts = group_attempts(scores, fps)
    a, b, c = attempts
    assert a.indexes == (0, 1, 2) and a.valid_indexes == (0, 2) and a.n == 2 and a.median == 3.0
    assert not b.valid and math.isnan(b.median) and b.representative is None
    assert c.fingerprint is None and c.median == 0.5
    assert counting_attempt(scores, Aggregation.MIN, fps) == c
    assert counting_attempt(scores, Aggregation.MAX, fps) == a
    assert counting_attempt([nan, nan], Aggregation.MIN, ["a", "a"]) is None
    assert math.isnan(counting_score([nan], Aggregation.LAST, ["a"]))
    r = running_counting(scores, Aggregation.MAX, fps)
    assert r[0] == 2.0 and r[1] == 2.0 and r[2] == 3.0 and r[3:] == [3.0, 3.0, 3.0]


def test_last_counts_the_median_of_the_last_valid_scorings_attempt():
    nan = math.nan
    scores = [0.2, 0.5, 0.7, 0.4, nan]
    fps = ["a", "b", "b", "a", "c"]
    # the last valid scoring (0.4) is a re-score of a: a's median (0.2, 0.4) counts
    assert counting_score(scores, Aggregation.LAST, fps) == pytest.approx(0.3)
    assert running_counting(scores, Aggregation.LAST, fps) == [0.2, 0.5, 0.6, pytest.approx(0.3), pytest.approx(0.3)]


def test_running_counting_agrees_with_counting_score_on_every_prefix():
    import random

    rng = random.Random(7)
    for _ in range(300):
        n = rng.randrange(0, 12)
        scores = [rng.choice([math.nan, float(rng.randrange(5))]) for _ in range(n)]
        fps = [rng.choice(["a", "b", "c", None]) for _ in range(n)]
        for agg in Aggregation:
            run = running_counting(scores, agg, fps)
            for k in range(n):
                want = counting_score(scores[: k + 1], agg, fps[: k + 1])
                assert (math.isnan(want) and math.isnan(run[k])) or want == run[k], (scores, fps, agg, k)


def test_attempt_fingerprint_reads_only_a_well_formed_value():
    assert attempt_fingerprint({"attempt": {"fingerprint": "ab12", "n_files": 3}}) == "ab12"
    for bad in (None, {}, {"attempt": None}, {"attempt": "ab12"}, {"attempt": {"fingerprint": ""}},
                {"attempt": {"fingerprint": 5}}, "details"):
        assert attempt_fingerprint(bad) is None
    with pytest.raises(ValueError):
        group_attempts([1.0, 2.0], ["a"])


def test_json_score():
    assert json_score(math.nan) == "NaN"
    assert json_score(math.inf) == "Infinity"
    assert json_score(-math.inf) == "-Infinity"
    assert json_score(1.5) == 1.5


def test_a_result_line_on_stdout_does_not_count():
    """Only the scorer's result channel carries a result: the same line printed on stdout (by
    participant code, say) is output, and the scoring is NaN with the reason."""
    r = parse_scorer_output(None, line(-9.0), "", 0)
    assert math.isnan(r.score)
    assert "result channel" in r.message["error"]
    honest = parse_scorer_output(line(0.5), line(-9.0) + "\n" + line(0.5), "", 0)
    assert honest.score == 0.5
