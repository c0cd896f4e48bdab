"""nn.RNN / LSTM / GRU and their cells against torch.nn with copied weights: outputs, final states and
every gradient (input, initial state, each parameter), on every device."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES

L, N, H_IN, H = 5, 3, 4, 6
# torch's own note that its oneDNN path lacks LSTM projections
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")


def _copy_weights(tmod, wmod, device):
    tsd = tmod.state_dict()
    assert list(tsd) == list(wmod.state_dict()), "parameter names differ from torch's"
    for name, value in tsd.items():
        assert tuple(wmod.state_dict()[name].shape) == tuple(value.shape), name
    wmod.load_state_dict({k: wg.tensor(v.numpy(), device=device) for k, v in tsd.items()})


def _compare(tout, wout, rtol=1e-5, atol=1e-5):
    np.testing.assert_allclose(wout.detach().to("cpu").numpy(), tout.detach().numpy(), rtol=rtol, atol=atol)


def _flat(out):
    """The tensors of an output: tensor, (out, h) or (out, (h, c))."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


MODULES = [
    ("RNN", dict()),
    ("RNN", dict(nonlinearity="relu", bias=False)),
    ("RNN", dict(num_layers=2, bidirectional=True, batch_first=True)),
    ("LSTM", dict()),
    ("LSTM", dict(num_layers=2, batch_first=True)),
    ("LSTM", dict(bidirectional=True)),
    ("LSTM", dict(proj_size=3, num_layers=2, bidirectional=True)),
    ("LSTM", dict(proj_size=2, bias=False, batch_first=True)),
    ("GRU", dict()),
    ("GRU", dict(num_layers=2, bidirectional=True, bias=False)),
]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("with_state", [False, True], ids=["no-h0", "h0"])
@pytest.mark.parametrize("name,kwargs", MODULES, ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}"
                                                      for n, kw in MODULES])
def test_recurrent_module_matches_torch(name, kwargs, with_state, device):
    torch.manual_seed(0)
    tmod = getattr(torch.nn, name)(H_IN, H, **kwargs)
    wmod = getattr(wg.nn, name)(H_IN, H, **kwargs).to(device)
    _copy_weights(tmod, wmod, device)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((N, L, H_IN) if kwargs.get("batch_first") else (L, N, H_IN)).astype(np.float32)
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    sizes = [kwargs.get("proj_size") or H] + ([H] if name == "LSTM" else [])  # h (projected), then c
    states = [rng.standard_normal((layers, N, n)).astype(np.float32) for n in sizes]

    def run(lib, mod, **kw):
        xs = lib.tensor(x, requires_grad=True, **kw)
        hs = [lib.tensor(s, requires_grad=True, **kw) for s in states]
        hx = None if not with_state else (tuple(hs) if name == "LSTM" else hs[0])
        out = _flat(mod(xs, hx))
        loss = sum((o * lib.tensor(np.linspace(-1, 1, o.numel(), dtype=np.float32).reshape(tuple(o.shape)), **kw)).sum()
                   for o in out)
        loss.backward()
        return out, [xs.grad] + ([h.grad for h in hs] if with_state else []), [p.grad for p in mod.parameters()]

    tres, wres = run(torch, tmod), run(wg, wmod, device=device)
    for tt, ww in zip(tres, wres):
        assert len(tt) == len(ww)
        for t, w in zip(tt, ww):
            assert tuple(w.shape) == tuple(t.shape)
            _compare(t, w, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,kwargs", [("RNNCell", {}), ("RNNCell", dict(nonlinearity="relu", bias=False)),
                                         ("LSTMCell", {}), ("GRUCell", {})])
def test_cells_match_torch(name, kwargs, device):
    torch.manual_seed(0)
    tmod = getattr(torch.nn, name)(H_IN, H, **kwargs)
    wmod = getattr(wg.nn, name)(H_IN, H, **kwargs).to(device)
    _copy_weights(tmod, wmod, device)
    rng = np.random.default_rng(2)
    xs = [rng.standard_normal((N, H_IN)).astype(np.float32) for _ in range(3)]

    def run(lib, mod, **kw):
        inputs = [lib.tensor(a, requires_grad=True, **kw) for a in xs]
        hx = None
        for x in inputs:  # unrolled over three steps, the state fed back
            hx = mod(x, hx)
        loss = sum((h * h).sum() for h in _flat(hx))
        loss.backward()
        return _flat(hx) + [x.grad for x in inputs] + [p.grad for p in mod.parameters()]

    for t, w in zip(run(torch, tmod), run(wg, wmod, device=device)):
        _compare(t, w, rtol=1e-4, atol=1e-5)


def test_unbatched_input_and_init():
    torch.manual_seed(0)
    tmod, wmod = torch.nn.LSTM(H_IN, H), wg.nn.LSTM(H_IN, H)
    _copy_weights(tmod, wmod, "cpu")
    x = np.random.default_rng(3).standard_normal((L, H_IN)).astype(np.float32)
    tout, (th, tc) = tmod(torch.tensor(x))
    wout, (wh, wc) = wmod(wg.tensor(x))
    assert tuple(wout.shape) == (L, H) and tuple(wh.shape) == (1, H)
    for t, w in ((tout, wout), (th, wh), (tc, wc)):
        _compare(t, w)
    # PyTorch's initialisation: U(-1/sqrt(H), 1/sqrt(H)) for every parameter
    bound = 1 / np.sqrt(64)
    values = np.concatenate([p.detach().numpy().ravel() for p in wg.nn.GRU(32, 64, num_layers=2).parameters()])
    assert values.min() >= -bound and values.max() <= bound and values.std() > bound / 2
    assert "LSTM(4, 6, num_layers=2, batch_first=True)" == repr(wg.nn.LSTM(4, 6, num_layers=2, batch_first=True))


def test_errors_and_dropout():
    with pytest.raises(ValueError, match="proj_size has to be smaller"):
        wg.nn.LSTM(4, 6, proj_size=6)
    with pytest.raises(ValueError, match="only supported for LSTM"):
        wg.nn.GRU(4, 6, proj_size=2)
    with pytest.raises(RuntimeError, match="input_size"):
        wg.nn.GRU(4, 6)(wg.zeros(2, 3, 5))
    with pytest.raises(ValueError, match="nonlinearity"):
        wg.nn.RNN(4, 6, nonlinearity="gelu")
    mod = wg.nn.GRU(4, 6, num_layers=2, dropout=0.5)
    x = wg.randn(L, N, 4)
    mod.eval()
    a, b = mod(x)[0].detach(), mod(x)[0].detach()
    assert np.array_equal(a.numpy(), b.numpy())  # no dropout in eval mode
    mod.train()
    assert not np.array_equal(mod(x)[0].detach().numpy(), a.numpy())  # dropout between the layers in training
