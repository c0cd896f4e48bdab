"""Integration: learn y = 2x + 3 from noisy data with a hand-written SGD loop, on every device."""

import webgrad as wg


def test_learns_a_line(device):
    wg.manual_seed(0)
    x = wg.rand(256, 1, device=device) * 4 - 2
    y = 2 * x + 3 + 0.1 * wg.randn(256, 1, device=device)
    w = wg.zeros(1, 1, device=device, requires_grad=True)
    b = wg.zeros(1, device=device, requires_grad=True)
    for _ in range(300):
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        with wg.no_grad():
            w -= 0.1 * w.grad
            b -= 0.1 * b.grad
        w.grad = None
        b.grad = None
    assert abs(w.item() - 2) < 0.05
    assert abs(b.item() - 3) < 0.05
    assert loss.item() < 0.02
