"""Depthwise convolutions (groups == in_channels, as MobileNet, EfficientNet and ShuffleNet write them) take the
shifted-slices form (ops/conv.py DEPTHWISE_MAX_WINDOW): values and gradients against torch, with channel
multipliers, strides, padding, dilation and bias; a Conv2d module trains on them."""

import numpy as np
import pytest
import torch

import webgrad as wg


@pytest.mark.parametrize("channels,multiplier,kernel,stride,padding,dilation,bias", [
    (6, 1, 3, 1, 1, 1, True), (6, 2, 3, 2, 1, 1, False), (4, 1, 5, 2, 2, 1, True), (4, 1, 3, 1, 2, 2, True),
    (3, 3, 7, 1, 3, 1, False), (5, 1, (1, 3), (2, 1), (0, 1), 1, True),
])
def test_depthwise_matches_torch(device, channels, multiplier, kernel, stride, padding, dilation, bias):
    rng = np.random.default_rng(channels * 10 + multiplier)
    k = kernel if isinstance(kernel, tuple) else (kernel, kernel)
    x = rng.standard_normal((2, channels, 11, 9)).astype(np.float32)
    w = rng.standard_normal((channels * multiplier, 1) + k).astype(np.float32)
    b = rng.standard_normal(channels * multiplier).astype(np.float32) if bias else None

    def run(L, dev):
        X = L.tensor(x, device=dev, requires_grad=True)
        W = L.tensor(w, device=dev, requires_grad=True)
        B = L.tensor(b, device=dev, requires_grad=True) if bias else None
        y = L.nn.functional.conv2d(X, W, B, stride, padding, dilation, channels)
        (y * y).sum().backward()
        return [t.detach().to("cpu").numpy() for t in (y, X.grad, W.grad) + ((B.grad,) if bias else ())]
    for ours, ref in zip(run(wg, device), run(torch, "cpu")):
        np.testing.assert_allclose(ours, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())


def test_a_depthwise_module_trains(device):
    wg.manual_seed(0)

    def net():
        return wg.nn.Sequential(wg.nn.Conv2d(4, 4, 3, padding=1, groups=4), wg.nn.Tanh(), wg.nn.Conv2d(4, 2, 1))
    m, teacher = net().to(device), net().to(device)
    opt = wg.optim.Adam(m.parameters(), lr=0.02)
    x = wg.randn(8, 4, 6, 6, device=device)
    with wg.no_grad():
        target = teacher(x)  # reachable: the same architecture
    losses = []
    for _ in range(40):
        opt.zero_grad()
        loss = wg.nn.functional.mse_loss(m(x), target)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.3 * losses[0], losses
