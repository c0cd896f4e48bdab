"""3-D pooling on the webgpu torch device (F.max_pool3d with indices, avg_pool3d, the adaptive ones, max_unpool),
wholly on webgrad's kernels (strict mode: no CPU fallback), values, indices and gradients against PyTorch on the
CPU."""

import pytest

from helpers import import_torch_device

torch, td = import_torch_device()

import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402


DEV = "webgpu"


def _check(fn, x, *others):
    """fn(x, *others) on the CPU and on the device: outputs (all of a tuple) equal, x's gradient close."""
    results = []
    for device in ("cpu", DEV):
        leaf = x.detach().to(device).requires_grad_()
        rest = [o.to(device) for o in others]
        with td.strict():
            out = fn(leaf, *rest)
            outs = out if isinstance(out, tuple) else (out,)
            seed = torch.linspace(-1, 1, outs[0].numel()).reshape(outs[0].shape).to(device)
            (grad,) = torch.autograd.grad((outs[0] * seed).sum(), leaf)
        results.append(([o.detach().cpu() for o in outs], grad.cpu()))
    (outs, grad), (gouts, ggrad) = results
    for o, go in zip(outs, gouts):
        assert go.dtype == o.dtype and go.shape == o.shape
        torch.testing.assert_close(go, o, atol=1e-5, rtol=1e-4, equal_nan=True)
    torch.testing.assert_close(ggrad, grad, atol=1e-5, rtol=1e-4)


X = torch.randn(2, 3, 7, 8, 9, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=(2, 3, 2), stride=(1, 2, 3), padding=(1, 1, 0), dilation=(2, 1, 2)),
    dict(kernel_size=3, stride=2, ceil_mode=True),
    dict(kernel_size=(3, 2, 3), stride=2, padding=1, dilation=2, ceil_mode=True),
], ids=["k2", "k3s2p1", "mixed_dilated", "ceil", "ceil_dilated_padded"])
def test_max_pool3d_values_indices_and_gradient(kw):
    _check(lambda x: F.max_pool3d(x, return_indices=True, **kw), X)


def test_max_pool3d_ties_nans_and_unbatched_input():
    """Ties go to the first element in (d, h, w) order, a NaN wins its window, an unbatched input keeps its rank."""
    x = torch.zeros(1, 2, 4, 4, 4)
    x[0, 0, 1, 1, 1] = float("nan")
    x[0, 1, 2:, 2:, 2:] = 1.0
    _check(lambda t: F.max_pool3d(t, 2, return_indices=True), x)
    _check(lambda t: F.max_pool3d(t, 3, stride=2, padding=1, return_indices=True), X[0])


@pytest.mark.parametrize("kw", [
    dict(kernel_size=2),
    dict(kernel_size=3, stride=2, padding=1),
    dict(kernel_size=3, stride=2, padding=1, count_include_pad=False),
    dict(kernel_size=(2, 3, 3), stride=(2, 1, 2), padding=(1, 1, 0), ceil_mode=True),
    dict(kernel_size=(2, 3, 3), stride=(2, 1, 2), padding=(1, 1, 0), ceil_mode=True, count_include_pad=False),
    dict(kernel_size=2, stride=1, padding=1, ceil_mode=True, divisor_override=3),
], ids=["k2", "k3s2p1", "no_pad_count", "ceil", "ceil_no_pad_count", "divisor_override"])
def test_avg_pool3d_values_and_gradient(kw):
    _check(lambda x: F.avg_pool3d(x, **kw), X)


@pytest.mark.parametrize("size", [1, (3, 4, 5), (7, 3, 12), (None, 2, 9)])
def test_adaptive_pools_3d(size):
    _check(lambda x: F.adaptive_avg_pool3d(x, size), X)
    _check(lambda x: F.adaptive_max_pool3d(x, size, return_indices=True), X)
    _check(lambda x: F.adaptive_avg_pool3d(x, size), X[1])


def test_max_unpool_inverts_max_pool_on_the_device():
    for dims, x in ((1, X[:, :, 0, 0]), (2, X[:, :, 0]), (3, X)):
        pool = getattr(F, f"max_pool{dims}d")
        unpool = getattr(F, f"max_unpool{dims}d")
        _check(lambda t: unpool(*pool(t, 2, return_indices=True), 2, output_size=t.shape[2:] if dims > 1 else None),
               x)
        _check(lambda t: unpool(*pool(t, 3, stride=2, padding=1, return_indices=True), 3, stride=2, padding=1,
                                output_size=t.shape[2:] if dims > 1 else None), x)


def test_a_3d_cnn_trains_on_the_device():
    torch.manual_seed(0)
    net = nn.Sequential(nn.Conv3d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool3d(2), nn.Conv3d(4, 4, 3, padding=1),
                        nn.AvgPool3d(2), nn.AdaptiveAvgPool3d(1), nn.Flatten(), nn.Linear(4, 3))
    x, y = torch.randn(4, 1, 8, 8, 8), torch.tensor([0, 1, 2, 1])
    reference = [p.detach().clone() for p in net.parameters()]
    losses = {}
    for device in ("cpu", DEV):
        with torch.no_grad():
            for p, r in zip(net.parameters(), reference):
                p.copy_(r)
        model = net.to(device)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        xs, ys = x.to(device), y.to(device)
        losses[device] = []
        for _ in range(3):
            opt.zero_grad()
            loss = F.cross_entropy(model(xs), ys)
            loss.backward()
            opt.step()
            losses[device].append(loss.item())
        net = net.cpu()
    assert losses[DEV][-1] < losses[DEV][0]
    torch.testing.assert_close(torch.tensor(losses[DEV]), torch.tensor(losses["cpu"]), atol=1e-4, rtol=1e-4)
