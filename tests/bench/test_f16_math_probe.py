"""tools/f16_math_probe.py (half math against float32, run on the GPU machine) as a smoke test on the local
adapter: the f16-math product kernel must agree with float64 within half precision's bounds (lavapipe's rates
mean nothing and are not checked)."""

import re

import pytest

from helpers import DEVICES

pytestmark = pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")


def test_probe_products_agree(capsys):
    from tools import f16_math_probe
    from webgrad._backends.webgpu.runtime import default_runtime

    if not default_runtime().has_f16:
        pytest.skip("the adapter has no shader-f16")
    probe = f16_math_probe.Probe(reps=1, warm=0.0)
    probe.product(128, 256, 64)
    probe.fma(groups=1)
    out = capsys.readouterr().out
    rounding = float(re.search(r"half alone: max error (\S+)", out).group(1))
    errors = [float(e) for e in re.findall(r"TFLOP/s, max error (\S+)", out)]
    assert len(errors) == 5 and errors[0] <= 1.01 * rounding  # f32 sums: only the output's rounding
    assert all(e < 8 * rounding for e in errors[1:]), out  # f16 sums over 8-32 k: a few roundings more
    assert out.count("\nfma vec") == 3, out
