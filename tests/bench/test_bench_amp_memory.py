"""`python -m webgrad.bench amp-memory`: the peaks of a replayed step in float32 and under autocast, and their
ratio, with a GPU's kernel variants on a software adapter when asked (the runtime's variants are put back)."""

import re

import pytest

pytest.importorskip("wgpu")

import webgrad as wg  # noqa: E402
from webgrad.bench import amp_memory  # noqa: E402


def test_prints_both_peaks_and_their_ratio(capsys, monkeypatch):
    rt = wg.device("webgpu").backend.runtime
    if not rt.has_f16:
        pytest.skip("needs an adapter with shader-f16")
    monkeypatch.setattr(rt, "software", rt.software)  # --gpu-kernels changes it: restored after the test
    assert amp_memory.main(["--models", "transformer", "--batch", "2", "--gpu-kernels"]) == 0
    out = capsys.readouterr().out
    assert "GPU kernel variants" in out
    (f32, amp, ratio), = re.findall(r"^transformer\s+2 \|\s+([\d.]+)\s+([\d.]+) \|\s+([\d.]+)x$", out, re.M)
    assert float(f32) > 0 and float(amp) > 0 and abs(float(amp) / float(f32) - float(ratio)) < 1e-2  # (rounded figures)
