"""bench train/scale/dawn's timing (webgrad.bench.train.time_loop): the median of several windows, each
grown until it is long enough to trust, so one stall does not decide a figure."""
import time

import pytest

from webgrad.bench import train


class Loss:
    def item(self):
        return 0.0


@pytest.fixture
def quick(monkeypatch):
    monkeypatch.setattr(train, "WARMUP_SECONDS", 0.0)
    monkeypatch.setattr(train, "MIN_WINDOW_SECONDS", 0.02)


def step_sleeping(durations):
    """A step that sleeps durations(call index) seconds."""
    calls = []

    def step(x):
        time.sleep(durations(len(calls)))
        calls.append(x)
        return Loss()
    return step, calls


def test_one_stalled_window_does_not_decide_the_figure(quick):
    # warm-up 2 calls; then windows of 10 steps each (0.02 s); the second window has a 0.1 s stall
    step, calls = step_sleeping(lambda i: 0.1 if i == 2 + 10 + 3 else 0.002)
    seconds = train.time_loop(step, [(0,)], 10, lambda: None, warmup=2, windows=3)
    assert len(calls) == 2 + 3 * 10
    assert 10 * 0.002 <= seconds < 10 * 0.002 * 2, seconds  # the median window: no stall in it


def test_short_windows_grow_before_they_count(quick):
    step, calls = step_sleeping(lambda i: 0.001)
    seconds = train.time_loop(step, [(0,)], 2, lambda: None, warmup=0, windows=1)
    # 2 steps (~2 ms) is under the 20 ms floor: the window grew until its steps took 20 ms, its time given per 2
    # steps. A 1 ms sleep takes longer on a loaded host, so fewer than 20 steps may fill the floor (19 did in CI).
    assert len(calls) >= 10
    assert 2 * 0.001 <= seconds < 2 * 0.001 * 3, seconds


def test_interleaved_runs_share_the_hosts_drift(quick):
    """Two runs of equal steps, timed by turns while the host slows down for a stretch: both medians see the
    same conditions, so their ratio stays near 1 (one run timed entirely in the slow stretch would read 0.5)."""
    clock = {"calls": 0}

    def step_of(calls):
        def step(x):
            clock["calls"] += 1
            slow = 150 <= clock["calls"] < 450  # a stretch of the host at half speed
            time.sleep(0.002 if slow else 0.001)
            calls.append(x)
            return Loss()
        return step
    a_calls, b_calls = [], []
    seconds = train.interleaved_seconds({"a": (step_of(a_calls), [(0,)], lambda: None),
                                         "b": (step_of(b_calls), [(0,)], lambda: None)}, 10, rounds=5, warmup=2)
    assert set(seconds) == {"a", "b"} and a_calls and b_calls
    assert 0.75 < seconds["a"] / seconds["b"] < 1.33, seconds


def test_windows_must_be_positive():
    with pytest.raises(SystemExit, match="--windows"):
        train.set_windows(0)


class NoGpu:
    """A backend stand-in for bench kernels' _time_backend: nothing to wait for."""

    def synchronize(self):
        pass


def test_backend_timing_keeps_the_gpu_busy_before_it_times():
    # bench kernels' backend add/sum: an idle gap (NumPy making the inputs) clocked an H100 down, so on a
    # discrete GPU each op first runs untimed for BACKEND_WARM_UP seconds
    from webgrad.bench import kernels

    calls = []

    def op():
        time.sleep(0.001)
        calls.append(time.perf_counter())

    start = time.perf_counter()
    kernels._time_backend(NoGpu(), op, iters=5, warm_up=0.05)
    timed = 3 * 5  # 3 timed rounds of 5 calls, after one untimed call
    assert len(calls) > 1 + timed
    assert calls[-timed] - start >= 0.05  # the first timed call ended after the warm-up's 0.05 s
    quiet = []
    kernels._time_backend(NoGpu(), lambda: quiet.append(0), iters=5)  # no warm-up asked: no extra calls
    assert len(quiet) == 1 + timed
    assert kernels.BACKEND_WARM_UP > 0
