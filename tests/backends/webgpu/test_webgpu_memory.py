"""webgrad.webgpu's memory counters (torch.cuda's meanings), and a soak test: 1,000 replayed and 300 eager
MLP steps on the CI adapter with process memory and memory_allocated() flat."""

import gc
import os
import sys
import time

import pytest

pytest.importorskip("wgpu")

import webgrad as wg  # noqa: E402
import webgrad.nn as nn  # noqa: E402
import webgrad.webgpu as webgpu  # noqa: E402
from webgrad._backends.webgpu.memory import size_class  # noqa: E402
from webgrad.examples.models import training_step  # noqa: E402


@pytest.fixture(scope="module", autouse=True)
def gpu():
    if not webgpu.is_available():  # pragma: no cover - no Vulkan driver on this machine
        pytest.skip("no WebGPU adapter")


def _settled():
    gc.collect()
    webgpu.synchronize()
    return webgpu.memory_allocated()


def test_more_than_the_device_binds_is_torchs_out_of_memory_error():
    """A tensor past maxStorageBufferBindingSize raises OutOfMemoryError, a RuntimeError as torch's (and
    torch.cuda's, which is the same class), naming the limit; nothing is allocated."""
    limit = wg.device("webgpu").backend.runtime.limits["max_storage_buffer_binding_size"]
    before = webgpu.memory_allocated()
    with pytest.raises(wg.OutOfMemoryError, match="maxStorageBufferBindingSize") as info:
        wg.empty(limit // 4 + 1, device="webgpu")
    assert isinstance(info.value, RuntimeError) and isinstance(info.value, MemoryError)
    assert wg.cuda.OutOfMemoryError is wg.OutOfMemoryError
    assert webgpu.memory_allocated() == before


def test_allocated_follows_live_tensors_and_the_peak_is_kept():
    base = _settled()
    webgpu.reset_peak_memory_stats()
    assert webgpu.max_memory_allocated() == base
    a = wg.zeros(1000, device="webgpu")  # 4000 bytes: pooled in the 4096-byte class
    assert webgpu.memory_allocated() == base + size_class(4000) == base + 4096
    b = wg.zeros(10, 10, dtype=wg.uint8, device="webgpu")  # 100 bytes: the 256-byte minimum
    assert webgpu.memory_allocated() == base + 4096 + 256
    del a, b
    assert _settled() == base
    assert webgpu.max_memory_allocated() == base + 4096 + 256
    assert webgpu.memory_reserved() >= base + 4096 + 256  # freed buffers stay in the pool
    webgpu.reset_peak_memory_stats()
    assert webgpu.max_memory_allocated() == base


def test_empty_cache_returns_free_buffers_and_keeps_tensors():
    # Graphs other tests left alive hold free buffers that empty_cache() must keep (a replay writes into
    # them): measure that slack first, so the test holds whatever ran before it.
    _settled()
    webgpu.empty_cache()
    slack = webgpu.memory_reserved() - webgpu.memory_allocated()
    keep = wg.arange(5000, device="webgpu").float()
    scratch = [wg.ones(3000 + i, device="webgpu") for i in range(8)]
    del scratch
    allocated = _settled()
    assert webgpu.memory_reserved() > allocated + slack
    webgpu.empty_cache()
    assert webgpu.memory_allocated() == allocated
    assert webgpu.memory_reserved() == allocated + slack  # every other reserved byte is a live tensor's
    assert keep[4999].item() == 4999.0  # tensors survive, and new ones allocate again
    assert (wg.ones(3000, device="webgpu") * 2).sum().item() == 6000.0


def test_a_graph_holds_its_buffers_until_released():
    base = _settled()
    w = wg.ones(64, 64, device="webgpu", requires_grad=True)

    @wg.replayable
    def step(x):
        loss = (x @ w).relu().sum()
        w.grad = None
        loss.backward()
        return loss

    x = wg.ones(8, 64, device="webgpu")
    for _ in range(3):
        assert step(x).item() == 8 * 64 * 64
    during = _settled()
    assert during > base  # w, its grad, x and the graph's own tensors
    del step
    after = _settled()
    assert after < during
    w = x = None  # noqa: F841 (the graph kept them alive until it went)
    assert _settled() == base


def _rss_mib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/self/statm")
def test_soak_memory_stays_flat_over_1300_training_steps():
    """1,000 replayed and 300 eager steps of the MNIST MLP (batch 8). On lavapipe, Mesa 22.3's uniform
    inlining once grew the process by ~1.8 MiB per matmul dispatch (see native.py); anything that
    grows per step shows here as RSS or as memory_allocated()."""
    wg.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Linear(128, 10)).to("webgpu")
    opt = wg.optim.Adam(model.parameters(), lr=1e-3)
    eager = training_step(model, opt)
    replayed = wg.replayable(eager)
    x = wg.rand(8, 1, 28, 28, device="webgpu")
    y = wg.randint(0, 10, (8,), device="webgpu").int()
    figures = {}
    start = time.perf_counter()
    for name, step, steps in (("replayed", replayed, 1000), ("eager", eager, 300)):
        for _ in range(20):  # warm-up: pipelines, pool size classes, the capture
            step(x, y).item()
        allocated, rss = _settled(), _rss_mib()
        for i in range(steps):
            loss = step(x, y)
            if i % 50 == 0:
                loss.item()
        final = loss.item()
        del loss  # an eager step's loss is a new tensor: drop it before counting
        figures[name] = (_settled() - allocated, _rss_mib() - rss)
        assert final == final and final < 2.5  # finite, and training
        assert figures[name][0] == 0, f"{name}: memory_allocated grew by {figures[name][0]} bytes"
        assert figures[name][1] < 50, f"{name}: RSS grew by {figures[name][1]:.1f} MiB over {steps} steps"
    del replayed
    print(f"\nsoak: replayed 1000 steps RSS {figures['replayed'][1]:+.1f} MiB, eager 300 steps RSS "
          f"{figures['eager'][1]:+.1f} MiB, memory_allocated +0 bytes, {time.perf_counter() - start:.1f} s")
