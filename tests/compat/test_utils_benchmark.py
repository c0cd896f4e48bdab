"""torch.utils.benchmark's Timer and Measurement (webgrad/utils/benchmark.py) against PyTorch's: how many times a
statement runs, what a Measurement holds and prints, and the errors."""

import re
import statistics

import pytest

import webgrad
from webgrad.utils import benchmark

torch = pytest.importorskip("torch")
from torch.utils import benchmark as torch_benchmark  # noqa: E402


def _count_runs(module, method, *args, **kwargs):
    calls = {"n": 0}

    def tick():
        calls["n"] += 1
    timer = module.Timer(stmt="tick()", globals={"tick": tick}, label="tick", sub_label="a")
    measurement = getattr(timer, method)(*args, **kwargs)
    return calls["n"], measurement


def test_timeit_warms_up_then_times_number_runs_as_torch():
    for number in (1, 5, 250):
        ours, m = _count_runs(benchmark, "timeit", number)
        theirs, t = _count_runs(torch_benchmark, "timeit", number)
        assert ours == theirs == number + max(number // 100, 2)
        assert m.number_per_run == t.number_per_run == number
        assert len(m.times) == len(t.times) == 1 and m.times[0] == m.raw_times[0] / number


def test_a_measurement_prints_and_summarises_as_torchs():
    _, m = _count_runs(benchmark, "blocked_autorange", min_run_time=0.05)
    _, t = _count_runs(torch_benchmark, "blocked_autorange", min_run_time=0.05)
    assert sum(m.raw_times) >= 0.05 and m.title == t.title == "tick: a"
    ours, theirs = repr(m).splitlines(), repr(t).splitlines()
    assert ours[1] == theirs[1] == "tick: a"
    shape = r"  (Median: )?[\d.]+ (ns|us|ms|s)"
    assert re.fullmatch(shape, ours[2]) and re.fullmatch(shape, theirs[2])
    counts = r"  \d+ measurements?, \d+ runs (per measurement,|,) 1 thread"
    assert any(re.fullmatch(counts, line) for line in ours) and any(re.fullmatch(counts, line) for line in theirs)
    assert m.median == pytest.approx(statistics.median(m.times))
    assert 1 <= m.significant_figures <= 4
    merged = benchmark.Measurement.merge([m, m])
    assert len(merged) == 1 and merged[0].number_per_run == 1 and len(merged[0].times) == 2 * len(m.times)


def test_globals_get_torch_and_bad_arguments_are_refused_as_torch():
    m = benchmark.Timer(stmt="torch.ones(2).sum()").timeit(3)
    assert m.number_per_run == 3 and benchmark.Timer(stmt="pass")._globals["torch"] is webgrad
    for module in (benchmark, torch_benchmark):
        with pytest.raises(ValueError, match="only a `str` stmt"):
            module.Timer(stmt=lambda: None)
        with pytest.raises(NotImplementedError, match="blocked_autorange"):
            module.Timer().repeat()
        with pytest.raises(ValueError, match="global_setup is C\\+\\+ only"):
            module.Timer(global_setup="#include <x>")
    assert benchmark.select_unit(2.5e-6) == torch_benchmark.utils.common.select_unit(2.5e-6)
    assert benchmark.select_unit(3.0) == torch_benchmark.utils.common.select_unit(3.0)
