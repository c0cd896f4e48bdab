"""Sparse embedding gradients against torch: F.embedding / nn.Embedding / F.embedding_bag with sparse=True give the
weight a sparse COO .grad (uncoalesced: the indices flattened, padding left out; the output gradient's rows),
accumulated as torch's AccumulateGrad (sparse + sparse sparse, sparse with dense dense); SGD, Adagrad and SparseAdam
step on it as torch's; torch's refusals (dense grads in SparseAdam, weight decay, scale_grad_by_freq, clipping)."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES

pytestmark = pytest.mark.filterwarnings("ignore:Sparse invariant checks")

N, D = 7, 3
IDX = [[1, 2, 1], [0, 5, 2]]  # row 1 twice, row 2 twice: uncoalesced
IDX2 = [4, 1, 6, 1]


def _np(t):
    return t.detach().to("cpu").numpy() if isinstance(t, wg.Tensor) else t.detach().numpy()


def _close(a, b, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(_np(a), _np(b), rtol=rtol, atol=atol)


def _weights(device, seed=0):
    w = np.random.default_rng(seed).standard_normal((N, D)).astype(np.float32)
    return wg.tensor(w, device=device, requires_grad=True), torch.tensor(w, requires_grad=True)


def _grad_out(shape, seed=1):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def _backward(F, lib, w, idx, device=None, **kw):
    i = lib.tensor(idx) if device is None else lib.tensor(idx, device=device)
    out = F.embedding(i, w, sparse=True, **kw)
    g = _grad_out(tuple(out.shape))
    out.backward(lib.tensor(g) if device is None else lib.tensor(g, device=device))
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("padding_idx", [None, 2, -5])
def test_grad_is_torchs_sparse_tensor(device, padding_idx):
    w, tw = _weights(device)
    out = _backward(wg.nn.functional, wg, w, IDX, device, padding_idx=padding_idx)
    tout = _backward(torch.nn.functional, torch, tw, IDX, padding_idx=padding_idx)
    _close(out, tout)
    assert w.grad.is_sparse and not w.grad.is_coalesced() and w.grad.layout is wg.sparse_coo
    assert w.grad._nnz() == tw.grad._nnz()
    assert _np(w.grad._indices()).tolist() == tw.grad._indices().tolist()
    _close(w.grad._values(), tw.grad._values())
    _close(w.grad.to_dense(), tw.grad.to_dense())
    _close(w.grad.coalesce().values(), tw.grad.coalesce().values())


def test_module_0d_input_and_repr():
    emb = wg.nn.Embedding(N, D, sparse=True)
    assert repr(emb) == repr(torch.nn.Embedding(N, D, sparse=True)) == "Embedding(7, 3, sparse=True)"
    emb(wg.tensor(3)).sum().backward()
    assert emb.weight.grad.is_sparse and _np(emb.weight.grad._indices()).tolist() == [[3]]
    assert tuple(emb.weight.grad._values().shape) == (1, D)
    assert type(emb(wg.tensor([1])).grad_fn).__name__ == "EmbeddingBackward0"


@pytest.mark.parametrize("device", DEVICES)
def test_accumulation_across_backward_calls(device):
    w, tw = _weights(device)
    for idx in (IDX, IDX2):  # sparse + sparse: the entries of both
        _backward(wg.nn.functional, wg, w, idx, device)
        _backward(torch.nn.functional, torch, tw, idx)
    assert w.grad.is_sparse and w.grad._nnz() == 10 and not w.grad.is_coalesced()
    _close(w.grad.to_dense(), tw.grad.to_dense())
    (w * 3).sum().backward()  # sparse .grad + a dense gradient: dense, as torch's
    (tw * 3).sum().backward()
    assert not w.grad.is_sparse and not tw.grad.is_sparse
    _close(w.grad, tw.grad)
    _backward(wg.nn.functional, wg, w, IDX, device)  # dense .grad + sparse gradient: dense
    _backward(torch.nn.functional, torch, tw, IDX)
    assert not w.grad.is_sparse
    _close(w.grad, tw.grad)


def test_two_uses_in_one_graph():
    w, tw = _weights("cpu")
    for lib, weight in ((wg, w), (torch, tw)):
        F = lib.nn.functional
        i = lib.tensor(IDX)
        (F.embedding(i, weight, sparse=True).sum() + (F.embedding(i, weight, sparse=True) ** 2).sum()).backward()
    assert w.grad.is_sparse and w.grad._nnz() == tw.grad._nnz() == 12
    _close(w.grad.to_dense(), tw.grad.to_dense())
    w.grad = tw.grad = None
    for lib, weight in ((wg, w), (torch, tw)):  # tied weights: a sparse and a dense use, a dense sum
        i = lib.tensor(IDX)
        (lib.nn.functional.embedding(i, weight, sparse=True).sum() + (weight * weight).sum()).backward()
    assert not w.grad.is_sparse
    _close(w.grad, tw.grad)


def test_scale_grad_by_freq_refused_at_backward():
    w, tw = _weights("cpu")
    for lib, weight in ((wg, w), (torch, tw)):
        out = lib.nn.functional.embedding(lib.tensor(IDX), weight, sparse=True, scale_grad_by_freq=True)
        with pytest.raises(RuntimeError, match="scale_grad_by_freq not supported with sparse gradients"):
            out.sum().backward()


def test_max_norm_with_sparse_grad():
    w, tw = _weights("cpu")
    _backward(wg.nn.functional, wg, w, IDX, max_norm=1.0)
    _backward(torch.nn.functional, torch, tw, IDX, max_norm=1.0)
    _close(w, tw)
    _close(w.grad.to_dense(), tw.grad.to_dense())


def test_zero_grad_keeps_an_empty_sparse_grad():
    w, tw = _weights("cpu")
    _backward(wg.nn.functional, wg, w, IDX)
    _backward(torch.nn.functional, torch, tw, IDX)
    wg.optim.SGD([w], lr=0.1).zero_grad(set_to_none=False)
    torch.optim.SGD([tw], lr=0.1).zero_grad(set_to_none=False)
    assert w.grad.is_sparse and w.grad._nnz() == tw.grad._nnz() == 0
    _close(w.grad.to_dense(), tw.grad.to_dense())
    wg.optim.SGD([w], lr=0.1).zero_grad()
    assert w.grad is None


BAGS = [dict(mode="sum"), dict(mode="mean"), dict(mode="mean", padding_idx=4),
        dict(mode="sum", per_sample_weights=[1.0, 2.0, 3.0, 4.0, 5.0])]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kw", BAGS)
def test_embedding_bag_sparse_grad_as_torchs(device, kw):
    w, tw = _weights(device)
    for lib, weight, dev in ((wg, w, device), (torch, tw, "cpu")):
        args = dict(kw)
        if "per_sample_weights" in args:
            args["per_sample_weights"] = lib.tensor(args["per_sample_weights"], device=dev)
        out = lib.nn.functional.embedding_bag(lib.tensor([1, 2, 4, 5, 4], device=dev), weight,
                                              lib.tensor([0, 2], device=dev), sparse=True, **args)
        out.backward(lib.tensor(_grad_out((2, D)), device=dev))
    assert w.grad.is_sparse and not w.grad.is_coalesced()
    assert _np(w.grad._indices()).tolist() == tw.grad._indices().tolist()
    _close(w.grad._values(), tw.grad._values())


def test_embedding_bag_module_and_max_mode():
    bag = wg.nn.EmbeddingBag(N, D, mode="sum", sparse=True)
    bag(wg.tensor([[1, 2], [3, 3]])).sum().backward()
    assert bag.weight.grad.is_sparse and _np(bag.weight.grad._indices()).tolist() == [[1, 2, 3, 3]]
    for lib in (wg, torch):
        with pytest.raises(ValueError, match="max mode does not support sparse weights"):
            lib.nn.functional.embedding_bag(lib.tensor([1, 2]), lib.ones(N, D), lib.tensor([0]), mode="max",
                                            sparse=True)


OPTIMIZERS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, maximize=True)),
    ("SGD", dict(lr=0.1, momentum=0.5, dampening=0.3)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.1, initial_accumulator_value=0.5, maximize=True)),
    ("SparseAdam", dict(lr=0.1)),
    ("SparseAdam", dict(lr=0.05, betas=(0.8, 0.9), eps=1e-6, maximize=True)),
]


def _steps(lib, w, name, kw, device=None, steps=4):
    opt = getattr(lib.optim, name)([w], **kw)
    for step in range(steps):
        opt.zero_grad()
        _backward(lib.nn.functional, lib, w, (IDX, IDX2)[step % 2], device)
        opt.step()
    return opt


@pytest.mark.parametrize("name,kw", OPTIMIZERS)
def test_optimizer_steps_equal_torchs(name, kw):
    w, tw = _weights("cpu")
    opt = _steps(wg, w, name, kw, "cpu")
    topt = _steps(torch, tw, name, kw)
    _close(w, tw)
    if name == "SparseAdam":  # lazy: the rows never read (3) keep zero moments
        assert opt.state[w]["step"] == topt.state[tw]["step"] == 4
        _close(opt.state[w]["exp_avg"], topt.state[tw]["exp_avg"])
        _close(opt.state[w]["exp_avg_sq"], topt.state[tw]["exp_avg_sq"])


def test_sparse_adam_on_a_gradient_sparse_in_every_dim():
    got = []
    for lib in (wg, torch):
        p = lib.nn.Parameter(lib.ones(3, 4))
        opt = lib.optim.SparseAdam([p], lr=0.1)
        for step in range(3):  # (0, 1) twice: coalesced before the update
            p.grad = lib.sparse_coo_tensor([[0, 2, 0], [1, 3, 1]], lib.tensor([1.0, -2.0, 3.0]) * (step + 1), (3, 4))
            opt.step()
        got.append((p, opt.state[p]["exp_avg"], opt.state[p]["exp_avg_sq"]))
    for a, b in zip(*got):
        _close(a, b)


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
@pytest.mark.parametrize("name,kw", [OPTIMIZERS[1], OPTIMIZERS[4], OPTIMIZERS[6]])
def test_optimizer_steps_on_device(device, name, kw):
    w, tw = _weights(device)
    _steps(wg, w, name, kw, device, steps=2)
    _steps(torch, tw, name, kw, steps=2)
    _close(w, tw)


def test_refusals_as_torchs():
    for lib in (wg, torch):
        w = lib.nn.Parameter(lib.ones(N, D))
        w.grad = lib.ones(N, D)
        with pytest.raises(RuntimeError, match="SparseAdam does not support dense gradients"):
            lib.optim.SparseAdam([w]).step()
        w.grad = None
        lib.nn.functional.embedding(lib.tensor(IDX), w, sparse=True).sum().backward()
        with pytest.raises(RuntimeError, match=r"add\(sparse, dense\) is not supported"):
            lib.optim.SGD([w], lr=0.1, weight_decay=0.1).step()
        with pytest.raises(RuntimeError, match="weight_decay option is not compatible with sparse gradients"):
            lib.optim.Adagrad([w], lr=0.1, weight_decay=0.1).step()
        with pytest.raises(NotImplementedError):
            lib.nn.utils.clip_grad_norm_([w], 1.0)
        with pytest.raises(NotImplementedError):
            lib.nn.utils.clip_grad_value_([w], 1.0)


@pytest.mark.parametrize("name", ["Adam", "AdamW", "RMSprop", "Adadelta", "Adamax", "NAdam", "RAdam", "Rprop",
                                  "ASGD"])
def test_dense_only_optimizers_refuse_sparse_grads_as_torch(name):
    messages = []
    for lib in (wg, torch):
        w = lib.nn.Parameter(lib.ones(N, D))
        lib.nn.functional.embedding(lib.tensor(IDX), w, sparse=True).sum().backward()
        with pytest.raises(RuntimeError, match="does not support sparse gradients") as info:
            getattr(lib.optim, name)([w]).step()
        messages.append(str(info.value))
    assert messages[0] == messages[1]


def test_grad_scaler_unscales_sparse_grads_as_torchs():
    w, tw = _weights("cpu")
    for lib, weight in ((wg, w), (torch, tw)):
        opt, scaler = lib.optim.SGD([weight], lr=0.1), lib.amp.GradScaler("cpu", init_scale=8.0)
        for scale_by in (1.0, float("inf")):  # a step, then one skipped (inf in the gradient)
            opt.zero_grad()
            out = lib.nn.functional.embedding(lib.tensor(IDX), weight, sparse=True)
            scaler.scale((out * out).sum() * scale_by).backward()
            scaler.step(opt)
            scaler.update()
        assert weight.grad.is_sparse and scaler.get_scale() == 4.0
    _close(w, tw)


class SkipGram:
    """word2vec's skip-gram with negative sampling: center and context tables, sparse gradients."""

    def __init__(self, lib, center, context, device="cpu"):
        self.lib, self.device = lib, device
        self.center = lib.nn.Embedding(center.shape[0], center.shape[1], sparse=True,
                                       _weight=lib.tensor(center, device=device))
        self.context = lib.nn.Embedding(context.shape[0], context.shape[1], sparse=True,
                                        _weight=lib.tensor(context, device=device))

    def parameters(self):
        return [self.center.weight, self.context.weight]

    def loss(self, centers, contexts, negatives):
        F, dev = self.lib.nn.functional, self.device
        c = self.center(self.lib.tensor(centers, device=dev))                      # [B, D]
        pos = (c * self.context(self.lib.tensor(contexts, device=dev))).sum(-1)    # [B]
        neg = (self.context(self.lib.tensor(negatives, device=dev)) @ c.unsqueeze(-1)).squeeze(-1)  # [B, K]
        return -(F.logsigmoid(pos).mean() + F.logsigmoid(-neg).sum(-1).mean())


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,kw", [("SparseAdam", dict(lr=0.05)), ("SGD", dict(lr=0.5))])
def test_skip_gram_trains_as_torchs(device, name, kw):
    rng = np.random.default_rng(0)
    vocab, dim, batch, k = 50, 8, 16, 5
    center = (rng.standard_normal((vocab, dim)) * 0.1).astype(np.float32)
    context = (rng.standard_normal((vocab, dim)) * 0.1).astype(np.float32)
    batches = [(rng.integers(0, vocab, batch), rng.integers(0, vocab, batch), rng.integers(0, vocab, (batch, k)))
               for _ in range(20)]
    losses = {}
    for lib, dev in ((wg, device), (torch, "cpu")):
        model = SkipGram(lib, center, context, dev)
        opt = getattr(lib.optim, name)(model.parameters(), **kw)
        losses[lib.__name__] = []
        for centers, contexts, negatives in batches:
            opt.zero_grad()
            loss = model.loss(centers, contexts, negatives)
            loss.backward()
            assert model.center.weight.grad.is_sparse
            opt.step()
            losses[lib.__name__].append(loss.item())
    np.testing.assert_allclose(losses["webgrad"], losses["torch"], rtol=1e-5)
    assert losses["torch"][-1] < losses["torch"][0]
