"""tools/conv_sweep.py (the conv_gemm tile sweep run on the GPU machine) as a smoke test on the local
adapter: one small case per product, two configurations, each candidate's output compared with the
planner's (lavapipe's timestamps are not GPU times: only that it runs and agrees is checked here)."""

import pytest

from helpers import DEVICES

pytestmark = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")


def test_quick_sweep_runs_and_agrees(capsys, monkeypatch):
    from tools import conv_sweep
    from webgrad._backends.webgpu.runtime import default_runtime

    monkeypatch.setattr(default_runtime(), "software", default_runtime().software)  # the tool sets it
    conv_sweep.main(["--quick", "--configs", "32x32", "--cases", "fwd:8-16-8-s2", "dgrad:8-16-8-s2",
                     "wgrad:8-8-8"])
    out = capsys.readouterr().out
    for name in ("fwd:8-16-8-s2", "dgrad:8-16-8-s2", "wgrad:8-8-8"):
        assert f"\n{name} x1" in out, out
    assert out.count("  best: ") == 3, out
    assert "WRONG" not in out and "failed" not in out, out
    assert "32x32" in out and "+reduce" in out, out  # the second phase's split ran with its reduction
