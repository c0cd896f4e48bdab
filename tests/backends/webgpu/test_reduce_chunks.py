"""Long reductions over few outputs take reduce.py's two-pass route (chunks of a row folded by separate
workgroups, then the partials): every op of it against NumPy, on rows long enough to be split, planned
for a GPU (Runtime.software off) and for a software adapter, whichever adapter runs the test."""

import numpy as np
import pytest

import webgrad as wg
from webgrad._backends.webgpu import runtime
from webgrad._backends.webgpu.reduce import split

from helpers import DEVICES


@pytest.mark.skipif("webgpu" not in DEVICES, reason="no WebGPU adapter")
@pytest.mark.parametrize("software", [False, True], ids=["gpu", "software"])
@pytest.mark.parametrize("shape,dim", [((200_003,), 0), ((3, 70_001), 1), ((40_000, 2), 0)])
def test_chunked_reductions_match_numpy(shape, dim, software, monkeypatch):
    monkeypatch.setattr(runtime.default_runtime(), "software", software)
    outer = int(np.prod(shape[:dim]))
    inner = int(np.prod(shape[dim + 1:]))
    assert split(outer, shape[dim], inner, software)[1] > 1  # these rows are split into chunks
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    t = wg.tensor(x, device="webgpu")
    np.testing.assert_allclose(t.sum(dim).numpy(), x.astype(np.float64).sum(dim), rtol=1e-4, atol=1e-3)
    np.testing.assert_allclose(t.mean(dim).numpy(), x.astype(np.float64).mean(dim), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(t.amax(dim).numpy(), x.max(dim))
    np.testing.assert_array_equal(t.argmax(dim).numpy(), x.argmax(dim))
    np.testing.assert_array_equal(t.argmin(dim).numpy(), x.argmin(dim))
