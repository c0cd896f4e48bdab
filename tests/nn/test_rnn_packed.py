"""nn.RNN / LSTM / GRU on a PackedSequence against torch.nn with copied weights: the output (padded back), h_n,
c_n and the gradients of the input, the initial state and every parameter, on every device."""

import numpy as np
import pytest
import torch
import webgrad as wg
from helpers import DEVICES

T, H_IN, H = 5, 3, 4
pytestmark = pytest.mark.filterwarnings("ignore:LSTM with projections is not supported with oneDNN")

# (module, kwargs, lengths, enforce_sorted, with h0)
CASES = [
    ("LSTM", {}, [5, 3, 3, 1], True, False),
    ("LSTM", {"num_layers": 2, "bidirectional": True}, [2, 5, 1, 4], False, True),
    ("LSTM", {"batch_first": True, "proj_size": 2, "bidirectional": True}, [3, 5, 2], False, True),
    ("GRU", {"bidirectional": True}, [4, 4, 2], True, True),
    ("GRU", {"num_layers": 2, "batch_first": True}, [1, 3, 5], False, False),
    ("RNN", {"num_layers": 2, "bidirectional": True, "bias": False}, [3, 1, 5, 2], False, True),
    ("RNN", {"nonlinearity": "relu", "batch_first": True}, [5, 2], True, True),
]


def _copy_weights(tmod, wmod, device):
    wmod.load_state_dict({k: wg.tensor(v.numpy(), device=device) for k, v in tmod.state_dict().items()})


def _compare(t, w):
    assert tuple(w.shape) == tuple(t.shape)
    np.testing.assert_allclose(w.detach().to("cpu").numpy(), t.detach().numpy(), rtol=1e-4, atol=1e-5)


def _weighted(lib, t, **kw):
    """A loss whose gradient differs at every element, so misplaced gradients show."""
    w = np.linspace(-1, 1, t.numel(), dtype=np.float32).reshape(tuple(t.shape))
    return (t * lib.tensor(w, **kw)).sum()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,kwargs,lengths,enforce_sorted,with_h0", CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_packed_recurrent_module_matches_torch(name, kwargs, lengths, enforce_sorted, with_h0, device):
    torch.manual_seed(0)
    tmod = getattr(torch.nn, name)(H_IN, H, **kwargs)
    wmod = getattr(wg.nn, name)(H_IN, H, **kwargs).to(device)
    _copy_weights(tmod, wmod, device)
    batch_first, n = kwargs.get("batch_first", False), len(lengths)
    rng = np.random.default_rng(1)
    x = rng.standard_normal((n, T, H_IN) if batch_first else (T, n, H_IN)).astype(np.float32)
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    sizes = [kwargs.get("proj_size") or H] + ([H] if name == "LSTM" else [])
    states = [rng.standard_normal((layers, n, size)).astype(np.float32) for size in sizes]

    def run(lib, mod, **kw):
        xs = lib.tensor(x, requires_grad=True, **kw)
        hs = [lib.tensor(s, requires_grad=True, **kw) for s in states]
        hx = None if not with_h0 else (tuple(hs) if name == "LSTM" else hs[0])
        rnn = lib.nn.utils.rnn
        packed = rnn.pack_padded_sequence(xs, lengths, batch_first=batch_first,
                                          enforce_sorted=enforce_sorted)
        out, state = mod(packed, hx)
        assert type(out).__name__ == "PackedSequence"
        assert out.batch_sizes.tolist() == packed.batch_sizes.tolist()
        for a, b in ((out.sorted_indices, packed.sorted_indices), (out.unsorted_indices, packed.unsorted_indices)):
            assert (a is None) == (b is None) and (a is None or a.tolist() == b.tolist())
        padded, out_lengths = rnn.pad_packed_sequence(out, batch_first=batch_first)
        assert out_lengths.tolist() == lengths
        results = [padded] + (list(state) if name == "LSTM" else [state])
        sum(_weighted(lib, r, **kw) for r in results).backward()
        grads = [xs.grad] + ([h.grad for h in hs] if with_h0 else []) + [p.grad for p in mod.parameters()]
        return results, grads

    (tres, tgrads), (wres, wgrads) = run(torch, tmod), run(wg, wmod, device=device)
    for t, w in zip(tres + tgrads, wres + wgrads, strict=True):
        _compare(t, w)


def test_packed_dropout_and_errors():
    x = wg.randn(T, 3, H_IN)
    packed = wg.nn.utils.rnn.pack_padded_sequence(x, [5, 4, 2])
    mod = wg.nn.GRU(H_IN, H, num_layers=2, dropout=0.5)
    mod.eval()
    a, b = mod(packed)[0].data.detach().numpy(), mod(packed)[0].data.detach().numpy()
    assert np.array_equal(a, b)  # no dropout in eval mode
    mod.train()
    assert not np.array_equal(mod(packed)[0].data.detach().numpy(), a)  # dropout between the layers in training
    with pytest.raises(RuntimeError, match="Expected hidden size"):
        wg.nn.LSTM(H_IN, H)(packed, (wg.zeros(1, 2, H), wg.zeros(1, 2, H)))  # the batch is batch_sizes[0] = 3
    with pytest.raises(RuntimeError, match="input_size"):
        wg.nn.RNN(H_IN + 1, H)(packed)
    with pytest.raises(TypeError, match="Tensor or a PackedSequence"):
        wg.nn.RNN(H_IN, H)([[1.0, 2.0, 3.0]])
