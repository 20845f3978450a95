"""triton_cumsum's scorer: the hand-over correction's arithmetic and its guards, on real objects
of the scorer (a CPU Harness, its own reference), with figures chosen so a wrong subtraction, a
wrong median or a missing guard would show. The whole path (a trusted worker, then the solution's)
runs in tests/integration/test_triton_handover.py and, on a GPU, reference/harness_timing.sh."""

from __future__ import annotations

import time

import pytest

from tests.conftest import ROOT
from tests.modules import load_file

torch = pytest.importorskip("torch")  # the local runtime's library, not this project's own module

PROTECTED = ROOT / "environments" / "triton_cumsum" / "protected"


@pytest.fixture(scope="module")
def score(monkeypatch_module):
    monkeypatch_module.setenv("REBENCH_SCORER_LIB", str(ROOT / "rebench_tui" / "runtime" / "lib"))
    return load_file("tc_score_under_test", PROTECTED / "score.py")


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def harness(score):
    return score.Harness("cpu", torch.Generator().manual_seed(1), time.monotonic() + 60)


CFG = {"k": 4, "n": 1000}


def test_the_trusted_workers_kernel_gives_the_scorers_reference_values(score):
    kernel = score.trusted_kernel((PROTECTED / "worker.py").read_text())  # worker's main() runs only as __main__
    rows = [*torch.randint(-10, 10, (3, 5000), dtype=torch.int32), torch.full((4000,), 9, dtype=torch.int32),
            torch.full((4000,), -10, dtype=torch.int32), torch.tensor([1, -10, 9, 0, 3, -1, 2], dtype=torch.int32)]
    for row in rows:
        got = kernel(row)
        assert got.dtype == torch.int32 and torch.equal(got, score.reference(row))


@pytest.mark.slow
def test_the_trusted_kernel_stays_exact_where_the_sums_are_largest(score):
    """The largest partial sum the scorer's inputs allow at the gpu size: one positive, then 10^8
    values of -10, every one of them counted (the count of positives before stays odd): about
    -10^9, which int32 holds."""
    kernel = score.trusted_kernel((PROTECTED / "worker.py").read_text())
    x = torch.full((score.PROFILES["gpu"]["n"],), -10, dtype=torch.int32)
    x[0] = 1
    got, want = kernel(x)[-1000:], score.reference(x)[-1000:]
    assert int(want[-1]) < -999_999_000 and torch.equal(got, want)


def point(calls: int, harness_ms: list[float], inprocess_ms: list[float]) -> dict:
    """A trusted batch length as handover() returns it: per-call ms through the harness (as
    seconds per batch on the clock) and in this process."""
    return {"calls": calls, "seconds": [t * calls / 1000 for t in harness_ms], "inprocess_ms": inprocess_ms, "phases": []}


def test_the_hand_over_comes_off_every_batch_and_both_figures_are_kept(score):
    h = harness(score)
    # one batch length: 1.0 ms a call in this process, 1.3 / 1.25 / 1.4 ms through the harness
    trusted = [point(4, [1.3, 1.25, 1.4], [1.0, 1.1, 0.9])]
    scored, figures = score.corrected(h, CFG, trusted, [2.0e-3 * 4, 2.2e-3 * 4, 2.1e-3 * 4])
    assert figures["handover"]["per_call_ms"] == pytest.approx(0.3)
    assert figures["handover"]["through_harness_ms"] == pytest.approx(1.3)
    assert figures["handover"]["in_process_ms"] == pytest.approx(1.0)
    assert figures["handover"]["per_kernel_ms"] == 0.0
    assert figures["per_call_uncorrected_ms"] == pytest.approx([2.0, 2.2, 2.1])
    assert scored == pytest.approx([1.7, 1.9, 1.8])


def test_two_batch_lengths_give_a_line_that_maps_each_trusted_batch_onto_its_in_process_time(score):
    # 4 calls: 1.5 ms a call through the harness, 1.0 here (2.0 ms a batch of hand-over on 4 ms of
    # kernel); 1 call: 2.5 through, 1.0 here (1.5 ms on 1 ms): slope 1/6, 4/3 ms fixed
    trusted = [point(4, [1.5, 1.5, 1.5], [1.0, 1.0, 1.0]), point(1, [2.5, 2.5], [1.0, 1.0])]
    scored, figures = score.corrected(harness(score), CFG, trusted, [1.5e-3 * 4, 2.5e-3 / 4 * 4, 2.0e-3 * 4])
    ho = figures["handover"]
    assert ho["fixed_per_batch_ms"] == pytest.approx(4 / 3, abs=1e-4) and ho["per_kernel_ms"] == pytest.approx(1 / 6, abs=1e-5)
    assert [p["calls"] for p in ho["points"]] == [4, 1]
    assert ho["full_batches_per_call_ms"] == pytest.approx(0.5)  # what one length alone would have taken off
    # a batch as long as the trusted 4-call batch comes out at the trusted kernel's own time, and so
    # does one whose length is the 1-call batch's; past the longer one the hand-over stays at its
    # 2.0 ms a batch (the line is not carried beyond what was measured)
    assert scored[0] == pytest.approx(1.0) and scored[1] * 4 == pytest.approx(1.0)
    assert scored[2] == pytest.approx((8.0 - 2.0) / 4) and ho["level_from_kernel_ms"] == pytest.approx(4.0)
    assert ho["per_call_ms"] == pytest.approx((6.0 - 4.0) / 4, abs=1e-4)  # at the median batch (6 ms -> 4 ms)


@pytest.mark.parametrize(("long_ms", "short_ms", "fixed", "slope"), [
    (1.2, 2.5, 1.5, 0.0),    # the longer batch loses less than the shorter one: no slope, the short figure
    (6.0, 1.1, 0.0, 0.1),    # a line that would cross zero: proportional, through the short figure
])
def test_the_line_never_slopes_down_or_goes_below_zero(score, long_ms, short_ms, fixed, slope):
    trusted = [point(4, [long_ms], [1.0]), point(1, [short_ms], [1.0])]
    _scored, figures = score.corrected(harness(score), CFG, trusted, [3.0e-3 * 4])
    ho = figures["handover"]
    assert ho["fixed_per_batch_ms"] == pytest.approx(fixed) and ho["per_kernel_ms"] == pytest.approx(slope)


@pytest.mark.parametrize("batch_ms", [0.5, 1.0, 2.0, 4.0, 5.99, 6.0, 6.01, 9.0, 50.0])
def test_the_kernel_time_solves_the_hand_over_line_and_grows_with_the_batch(score, batch_ms):
    fixed, slope, upto = 4 / 3, 1 / 6, 4.0
    b = score.kernel_ms(batch_ms, fixed, slope, upto)
    assert b + fixed + slope * min(b, upto) == pytest.approx(batch_ms)
    assert score.kernel_ms(batch_ms + 0.01, fixed, slope, upto) > b


def test_the_trusted_batch_lengths(score):
    assert score.handover_calls({"k": 20, "handover_k": 4}) == [20, 4]
    assert score.handover_calls({"k": 20}) == [20, 4] and score.handover_calls({"k": 2}) == [2, 1]
    assert score.handover_calls({"k": 1}) == [1] and score.handover_calls({"k": 4, "handover_k": 8}) == [4]


def test_a_trusted_kernel_faster_through_the_harness_takes_nothing_off(score):
    trusted = [point(4, [0.8], [1.0])]
    scored, figures = score.corrected(harness(score), CFG, trusted, [2.0e-3 * 4])
    assert figures["handover"]["per_call_ms"] == 0.0 and scored == pytest.approx([2.0])


def test_a_hand_over_longer_than_the_solutions_time_is_no_score(score):
    trusted = [point(4, [5.0], [1.0])]
    with pytest.raises(score.Invalid) as caught:
        score.corrected(harness(score), CFG, trusted, [2.0e-3 * 4])
    assert "cannot be trusted" in caught.value.message["error"]


def test_without_a_measurement_nothing_comes_off(score):
    scored, figures = score.corrected(harness(score), CFG, None, [2.0e-3 * 4])
    assert scored == pytest.approx([2.0]) and "handover" not in figures


def test_the_in_process_figure_is_per_call(score):
    h = harness(score)
    slow = lambda x: (time.sleep(0.01), score.reference(x))[1]  # noqa: E731
    assert 10 <= h.inprocess_ms(slow, 100, 3) < 100


@pytest.mark.parametrize(("given", "kept"), [
    ({"handover": "0"}, {"handover": 0}), ({"handover": 7}, {"handover": 7}), ({"handover": "21"}, {}),
    ({"handover": True}, {}), ({"handover": "-1"}, {}), ({"k": "64", "ipc": "torch"}, {"k": 64, "ipc": "torch"}),
    ({"k": 0, "ipc": "shm"}, {}), ("handover=5", {}), ({"handover_k": "4"}, {"handover_k": 4}), ({"handover_k": 0}, {}),
])
def test_overrides_are_checked(score, given, kept):
    assert score.checked_overrides(given) == kept
