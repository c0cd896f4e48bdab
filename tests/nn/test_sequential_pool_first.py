"""nn.Sequential runs ReLU then MaxPool2d as MaxPool2d then ReLU (container._pool_first): the same
values and gradients as the order written (and as PyTorch), with the ReLU on the pooled map."""

import numpy as np
import pytest

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES

nn = wg.nn


def _tricky_images(rng, n=2, c=3, size=8):
    """Images whose 2x2 windows include ties at the max, all-negative windows, exact zeros and NaN."""
    x = rng.integers(-3, 4, (n, c, size, size)).astype(np.float32)  # many ties
    x[0, 0, :2, :2] = -1.0   # a window of negatives: pooled 0 after the ReLU, no gradient
    x[0, 1, 2:4, 2:4] = 0.0  # a window of zeros
    x[1, 2, 4, 4] = np.nan   # NaN propagates through both orders
    return x


def _nodes(y):
    f = y.grad_fn
    return f.name, [g.name if g else None for g, _ in f.next_functions]


@pytest.mark.parametrize("device", DEVICES)
def test_relu_then_maxpool_values_and_gradients_match_the_written_order(device):
    rng = np.random.default_rng(0)
    x = _tricky_images(rng)
    g = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    seq = nn.Sequential(nn.ReLU(), nn.MaxPool2d(2)).to(device)
    results = []
    for run in (seq, lambda t: F.max_pool2d(F.relu(t), 2)):  # reordered, and the order written
        t = wg.tensor(x, device=device, requires_grad=True)
        y = run(t)
        y.backward(wg.tensor(g, device=device))
        results.append((y.detach().to("cpu").numpy(), t.grad.to("cpu").numpy()))
    (y0, gx0), (y1, gx1) = results
    np.testing.assert_array_equal(y0, y1)  # NaN in the same places
    np.testing.assert_array_equal(gx0, gx1)
    assert np.isnan(y0[1, 2, 2, 2]) and y0[0, 0, 0, 0] == 0.0 and gx0[0, 0, :2, :2].sum() == 0.0


@pytest.mark.parametrize("device", DEVICES)
def test_cnn_block_matches_torch(device):
    torch = pytest.importorskip("torch")
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 1, 12, 12)).astype(np.float32)
    ours = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(4, 6, 3),
                         nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(), nn.Linear(24, 5))
    ref = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                              torch.nn.Conv2d(4, 6, 3), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
                              torch.nn.Flatten(), torch.nn.Linear(24, 5))
    ours.load_state_dict({k: wg.tensor(v.detach().numpy()) for k, v in ref.state_dict().items()})
    ours.to(device)
    y = ours(wg.tensor(x, device=device))
    assert _nodes(ours[:3](wg.tensor(x, device=device))) == ("Relu", ["MaxPool2DWithIndices"])
    y.sum().backward()
    want = ref(torch.tensor(x))
    want.sum().backward()
    np.testing.assert_allclose(y.detach().to("cpu").numpy(), want.detach().numpy(), rtol=1e-4, atol=1e-5)
    for (name, p), q in zip(ours.named_parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.to("cpu").numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5, err_msg=name)


def test_written_order_kept_where_reordering_could_be_seen(monkeypatch):
    pooled = []  # the smallest value each max_pool2d call saw: negative where the pool ran first
    pool = F.max_pool2d
    monkeypatch.setattr(F, "max_pool2d", lambda t, *a, **k: pooled.append(t.min().item()) or pool(t, *a, **k))
    x = wg.tensor([[[[-1.0, 2.0], [3.0, -4.0]]]])
    # reordered: ReLU then MaxPool2d, also after a layer
    assert nn.Sequential(nn.ReLU(), nn.MaxPool2d(2))(x).item() == 3.0 and pooled.pop() == -4.0
    conv = nn.Conv2d(1, 1, 1)
    with wg.no_grad():
        conv.weight.fill_(1.0), conv.bias.fill_(0.0)
        # an in-place ReLU after a layer whose fresh output nobody else holds: reordered
        assert nn.Sequential(conv, nn.ReLU(inplace=True), nn.MaxPool2d(2))(x).item() == 3.0 and pooled.pop() == -4.0
    # an in-place ReLU first in the pipeline changes the caller's tensor, as in PyTorch: kept
    y = nn.Sequential(nn.ReLU(inplace=True), nn.MaxPool2d(2))(x)
    assert x.numpy().min() == 0.0 and y.item() == 3.0 and pooled.pop() == 0.0
    # return_indices (the pool returns a pair) and a subclass of ReLU (it may do anything): kept
    x = wg.tensor([[[[-1.0, 2.0], [3.0, 1.0]]]])
    out, idx = nn.Sequential(nn.ReLU(), nn.MaxPool2d(2, return_indices=True))(x)
    assert idx.item() == 2 and pooled.pop() == 0.0

    class Shifted(nn.ReLU):
        def forward(self, input):
            return F.relu(input - 2.5)

    assert nn.Sequential(Shifted(), nn.MaxPool2d(2))(x).item() == 0.5 and pooled.pop() == 0.0
