"""Cross-entropy over wide rows (a language model's vocabulary): one pass over the logits forward (cross_entropy.wgsl,
rows of any alignment read in vec4s), each row's log-sum-exp kept, and a backward that reads the logits once and
writes their gradient once. PyTorch parity on every device and both WebGPU variants, the kernels a step runs, and
bad targets."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES, VARIANTS, variant as _variant

RNG = np.random.default_rng(6)
WEBGPU = "webgpu" in DEVICES




@pytest.mark.parametrize("device,software", VARIANTS)
@pytest.mark.parametrize("rows,cols", [(6, 10), (5, 1001), (3, 50257)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.1])
def test_matches_torch(device, software, rows, cols, reduction, smoothing):
    x = (RNG.standard_normal((rows, cols)) * 3).astype(np.float32)
    t = RNG.integers(0, cols, rows)
    t[1] = -1  # nanoGPT's ignore_index
    tx = torch.tensor(x, requires_grad=True)
    tl = torch.nn.functional.cross_entropy(tx, torch.tensor(t), ignore_index=-1, reduction=reduction,
                                           label_smoothing=smoothing)
    g = RNG.standard_normal(tuple(tl.shape)).astype(np.float32)
    (tl * torch.tensor(g)).sum().backward()
    with _variant(device, software):
        wx = wg.tensor(x, device=device, requires_grad=True)
        wl = wg.nn.functional.cross_entropy(wx, wg.tensor(t, device=device), ignore_index=-1, reduction=reduction,
                                            label_smoothing=smoothing)
        (wl * wg.tensor(g, device=device)).sum().backward()
    np.testing.assert_allclose(wl.detach().cpu().numpy(), tl.detach().numpy(), rtol=2e-6, atol=2e-5)
    np.testing.assert_allclose(wx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-4, atol=3e-6)


@pytest.mark.parametrize("device,software", VARIANTS)
def test_a_row_at_any_offset(device, software):
    """Rows of a view at an offset that is no multiple of 4 (a slice of logits): heads and tails around the vec4s."""
    x = (RNG.standard_normal((4, 1030)) * 2).astype(np.float32)
    t = RNG.integers(0, 1029, 4)
    tx = torch.tensor(x, requires_grad=True)
    torch.nn.functional.cross_entropy(tx[:, 1:], torch.tensor(t)).backward()
    with _variant(device, software):
        wx = wg.tensor(x, device=device, requires_grad=True)
        wl = wg.nn.functional.cross_entropy(wx[:, 1:], wg.tensor(t, device=device))
        wl.backward()
    np.testing.assert_allclose(wl.item(), torch.nn.functional.cross_entropy(torch.tensor(x)[:, 1:],
                                                                             torch.tensor(t)).item(), rtol=1e-6)
    np.testing.assert_allclose(wx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-4, atol=3e-7)


@pytest.mark.skipif(not WEBGPU, reason="no WebGPU adapter")
@pytest.mark.parametrize("software", [True, False])
def test_the_backward_reads_the_saved_log_sum_exp(software):
    """Forward: the per-row pass (with its pairs' sum, division and count copy for a wide problem); backward: the
    upstream gradient's division, then one cross_entropy_backward_lse pass."""
    from webgrad._backends.webgpu.runtime import default_runtime
    rt = default_runtime()
    with _variant("webgpu", software):
        x = wg.randn(64, 2000, device="webgpu", requires_grad=True)
        t = wg.randint(0, 2000, (64,), device="webgpu")
        records = []
        with rt.capture() as graph:
            loss = wg.nn.functional.cross_entropy(x, t)
            loss.backward()
        names = [d.kernel.entry for d in rt.describe(graph.records) if d.kernel is not None]
        graph.release()
    assert names[0].startswith("cross_entropy_online") and "cross_entropy_backward_lse" in names
    assert not any(n.startswith("cross_entropy_backward") and n != "cross_entropy_backward_lse" for n in names)
    del records


@pytest.mark.parametrize("device", DEVICES)
def test_a_target_out_of_range_raises(device):
    x = wg.randn(3, 5000, device=device)
    t = wg.tensor([1, 5000, 2], device=device)
    with pytest.raises(IndexError):
        wg.nn.functional.cross_entropy(x, t, reduction="none").tolist()
