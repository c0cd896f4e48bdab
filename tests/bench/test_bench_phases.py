"""webgrad.bench.eager_phases (`python -m webgrad.bench phases`): the host time of an eager step by phase.
Figures are printed, never asserted on; what is checked is that every phase is timed for every step and
that the step recorded its dispatches (its Pyodide twin: e2e/test_bench_dawn.py)."""

import pytest

from helpers import DEVICES

pytestmark = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")


def test_every_phase_timed_for_every_step():
    from webgrad.bench import eager_phases

    times, dispatches = eager_phases.phase_times("mlp", 4, steps=5, warmup=2)
    assert list(times) == list(eager_phases.PHASES)
    assert all(len(v) == 5 and all(t > 0 for t in v) for v in times.values())
    # The MLP's eager step on any binding (e2e/test_bench_dawn.py: in Pyodide): 17 kernels, and the optimizer's
    # device_error_flag, since cross-entropy's check of its targets may set the error word the step is gated on.
    assert dispatches == 18
    line = eager_phases.report("mlp", 4, times, dispatches)
    assert line.startswith("mlp") and "submit" in line and "(18 dispatches)" in line


def test_cli(capsys):
    from webgrad.bench.__main__ import main

    assert main(["phases", "--models", "cnn", "--batch-sizes", "2", "--steps", "3"]) == 0
    out = capsys.readouterr().out
    assert "eager step phases on" in out and out.splitlines()[-1].startswith("cnn")
