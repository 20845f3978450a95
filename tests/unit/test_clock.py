import pytest

from rebench_tui.clock import ClockState, FakeClock, WorkingClock, crossed_warnings, format_hms, parse_duration


def test_counts_working_time_from_the_clock_not_ticks(fake_clock):
    wc = WorkingClock.new(3600, fake_clock)
    fake_clock.advance(125.5)
    assert wc.used() == pytest.approx(125.5)
    assert wc.remaining() == pytest.approx(3600 - 125.5)


def test_pauses_are_excluded(fake_clock):
    wc = WorkingClock.new(3600, fake_clock)
    fake_clock.advance(100)
    assert wc.pause() is True
    assert wc.pause() is False
    fake_clock.advance(1000)
    assert wc.used() == pytest.approx(100)
    assert wc.resume() is True
    fake_clock.advance(50)
    assert wc.used() == pytest.approx(150)


def test_limit_caps_used_time(fake_clock):
    wc = WorkingClock.new(60, fake_clock)
    fake_clock.advance(90)
    assert wc.used() == 60
    assert wc.remaining() == 0
    assert wc.expired


def test_wall_clock_steps_do_not_move_a_running_clock(fake_clock):
    wc = WorkingClock.new(3600, fake_clock)
    fake_clock.advance(10)
    fake_clock.jump_wall(-3000)  # NTP step backwards: monotonic time is what counts in-process
    assert wc.used() == pytest.approx(10)


def test_state_round_trip_resumes_to_the_second_while_running(fake_clock):
    wc = WorkingClock.new(8 * 3600, fake_clock)
    fake_clock.advance(1234)
    st = wc.state()
    fake_clock.advance(600)  # the app was closed for 10 minutes with the clock running
    again = WorkingClock(st, fake_clock)
    assert again.running
    assert again.used() == pytest.approx(1834)


def test_state_round_trip_while_paused_adds_nothing(fake_clock):
    wc = WorkingClock.new(8 * 3600, fake_clock)
    fake_clock.advance(100)
    wc.pause()
    st = wc.state()
    assert st == ClockState(limit_s=8 * 3600, banked_s=pytest.approx(100), running_since_wall=None)
    fake_clock.advance(5000)
    again = WorkingClock(st, fake_clock)
    assert not again.running
    assert again.used() == pytest.approx(100)


def test_crossed_warnings():
    assert crossed_warnings(7201, 7199) == [7200]
    assert crossed_warnings(3700, 200) == [3600, 900, 300]
    assert crossed_warnings(200, 100) == []
    assert crossed_warnings(300, 300) == []  # equal before: already crossed at the previous read


@pytest.mark.parametrize("text, seconds", [("8h", 28800), ("90m", 5400), ("1h30m", 5400), ("45s", 45), ("3600", 3600), (12, 12),
                                          ("0.5h", 1800)])
def test_parse_duration(text, seconds):
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "h", "8 hours", "-5", "0", "1d"])
def test_parse_duration_rejects(text):
    with pytest.raises(ValueError):
        parse_duration(text)


def test_format_hms():
    assert format_hms(0) == "0:00:00"
    assert format_hms(8 * 3600) == "8:00:00"
    assert format_hms(3599.9) == "0:59:59"
    assert format_hms(-5) == "0:00:00"


def test_fake_clock_moves_only_when_told():
    c = FakeClock(wall=100.0, mono=5.0)
    assert (c.time(), c.monotonic()) == (100.0, 5.0)
    c.advance(2)
    assert (c.time(), c.monotonic()) == (102.0, 7.0)
