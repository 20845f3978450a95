import json
import math

import pytest

from rebench_tui.scoring import (
    Aggregation,
    final_index,
    json_score,
    normalize,
    parse_scorer_output,
    running_final,
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


def test_normalize_higher_is_better_and_nan():
    assert normalize(0.54, 0.54, 0.85) == 0
    assert normalize(0.85, 0.54, 0.85) == pytest.approx(1)
    assert math.isnan(normalize(math.nan, 0.54, 0.85))
    with pytest.raises(ValueError):
        normalize(1.0, 0.5, 0.5)


def test_final_index_by_rule():
    scores = [3.0, math.nan, 1.0, 2.0, math.nan]
    assert final_index(scores, Aggregation.MIN) == 2
    assert final_index(scores, Aggregation.MAX) == 0
    assert final_index(scores, Aggregation.LAST) == 3
    assert final_index([math.nan], Aggregation.MIN) is None
    assert final_index([], Aggregation.LAST) is None


def test_running_final():
    s = [math.nan, 3.0, 4.0, 1.0, math.nan, 2.0]
    r = running_final(s, Aggregation.MIN)
    assert math.isnan(r[0]) and r[1:] == [3.0, 3.0, 1.0, 1.0, 1.0]
    assert running_final(s, Aggregation.MAX)[1:] == [3.0, 4.0, 4.0, 4.0, 4.0]
    assert running_final(s, Aggregation.LAST)[1:] == [3.0, 4.0, 1.0, 1.0, 2.0]


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
