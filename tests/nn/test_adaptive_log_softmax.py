"""nn.AdaptiveLogSoftmaxWithLoss against PyTorch's: a torch state_dict loads; forward's (output, loss), its
gradients, log_prob and predict agree; unbatched input; constructor and forward errors."""

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import webgpu_available

RNG = np.random.default_rng(0)


def _np(x):
    return np.asarray(x.detach().cpu().tolist(), dtype=np.float64).reshape(tuple(x.shape)) \
        if isinstance(x, wg.Tensor) else x.detach().numpy().astype(np.float64)


def _pair(*args, **kwargs):
    """The same layer in both libraries, webgrad's holding PyTorch's initial weights (float64)."""
    want = torch.nn.AdaptiveLogSoftmaxWithLoss(*args, **kwargs).double()
    got = wg.nn.AdaptiveLogSoftmaxWithLoss(*args, **kwargs).double()
    result = got.load_state_dict({k: wg.tensor(v.numpy()) for k, v in want.state_dict().items()})
    assert result.missing_keys == [] and result.unexpected_keys == []
    return got, want


CONFIGS = [
    ((16, 30, [5, 12, 20]), {"div_value": 2.0, "head_bias": True}),
    ((8, 10, [4]), {}),
    ((12, 50, [10, 11, 40]), {"div_value": 1.5}),
]


@pytest.mark.parametrize("args,kwargs", CONFIGS)
def test_parameters_and_repr_are_torch_s(args, kwargs):
    got, want = _pair(*args, **kwargs)
    assert [(k, tuple(v.shape)) for k, v in got.state_dict().items()] == \
        [(k, tuple(v.shape)) for k, v in want.state_dict().items()]
    assert repr(got) == repr(want)
    for name in ("in_features", "n_classes", "cutoffs", "div_value", "head_bias", "shortlist_size", "n_clusters",
                 "head_size"):
        assert getattr(got, name) == getattr(want, name), name


@pytest.mark.parametrize("args,kwargs", CONFIGS)
def test_forward_loss_and_gradients_match_torch(args, kwargs):
    got, want = _pair(*args, **kwargs)
    in_features, n_classes, cutoffs = args
    # every cluster hit, plus the first and last class of each
    edges = [0] + cutoffs + [n_classes]
    targets = sorted({c for lo, hi in zip(edges, edges[1:]) for c in (lo, hi - 1)})
    targets += [int(t) for t in RNG.integers(0, n_classes, 7)]
    x = RNG.standard_normal((len(targets), in_features))
    xw, xt = wg.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_w, loss_w = got(xw, wg.tensor(targets))
    out_t, loss_t = want(xt, torch.tensor(targets))
    np.testing.assert_allclose(_np(out_w), _np(out_t), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(float(loss_w), float(loss_t), rtol=1e-12)
    assert type(got(xw, wg.tensor(targets))).__name__ == "_ASMoutput"
    loss_w.backward()
    loss_t.backward()
    np.testing.assert_allclose(_np(xw.grad), _np(xt.grad), rtol=1e-9, atol=1e-12)
    grads_t = dict(want.named_parameters())
    for name, p in got.named_parameters():
        np.testing.assert_allclose(_np(p.grad), _np(grads_t[name].grad), rtol=1e-9, atol=1e-12, err_msg=name)


def test_targets_all_in_the_shortlist_leave_the_tails_without_gradient_as_torch():
    got, want = _pair(8, 20, [6, 12])
    x = RNG.standard_normal((4, 8))
    got(wg.tensor(x), wg.tensor([0, 1, 5, 2]))[1].backward()
    want(torch.tensor(x), torch.tensor([0, 1, 5, 2]))[1].backward()
    for (name, p), (_, q) in zip(got.named_parameters(), want.named_parameters()):
        if q.grad is None:  # PyTorch's tails never ran
            assert p.grad is None or not _np(p.grad).any(), name
        else:
            np.testing.assert_allclose(_np(p.grad), _np(q.grad), rtol=1e-9, atol=1e-12, err_msg=name)


def test_unbatched_input():
    got, want = _pair(8, 20, [6, 12])
    x = RNG.standard_normal(8)
    for target in (3, 7, 19):
        out_w, loss_w = got(wg.tensor(x), wg.tensor(target))
        out_t, loss_t = want(torch.tensor(x), torch.tensor(target))
        assert tuple(out_w.shape) == tuple(out_t.shape) == ()
        np.testing.assert_allclose(_np(out_w), _np(out_t), rtol=1e-12)
        np.testing.assert_allclose(float(loss_w), float(loss_t), rtol=1e-12)


@pytest.mark.parametrize("args,kwargs", CONFIGS)
def test_log_prob_and_predict_match_torch(args, kwargs):
    got, want = _pair(*args, **kwargs)
    with torch.no_grad():  # a head that favours the clusters, so predict takes its tail path too
        want.head.weight.mul_(3.0)
    got.load_state_dict({k: wg.tensor(v.numpy()) for k, v in want.state_dict().items()})
    x = RNG.standard_normal((32, args[0]))
    lp_w, lp_t = got.log_prob(wg.tensor(x)), want.log_prob(torch.tensor(x))
    np.testing.assert_allclose(_np(lp_w), _np(lp_t), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(np.exp(_np(lp_w)).sum(1), np.ones(32), rtol=1e-12)
    np.testing.assert_array_equal(_np(got.predict(wg.tensor(x))), _np(want.predict(torch.tensor(x))))


@pytest.mark.parametrize("args", [(8, 10, []), (8, 10, [4, 3]), (8, 10, [0, 4]), (8, 10, [4, 10]), (8, 10, [4, 4]),
                                  (8, 10, [2.5])])
def test_constructor_refuses_bad_cutoffs_as_torch(args):
    with pytest.raises(ValueError) as want:
        torch.nn.AdaptiveLogSoftmaxWithLoss(*args)
    with pytest.raises(ValueError) as got:
        wg.nn.AdaptiveLogSoftmaxWithLoss(*args)
    assert str(got.value) == str(want.value)


@pytest.mark.parametrize("x_shape,target", [((4, 8), [1, 2, 3]), ((4, 8), [[1], [2], [3], [4]]), ((8,), [1]),
                                            ((2, 8), 1), ((4, 8), [1, 2, 3, 20]), ((4, 8), [1, -1, 3, 2])])
def test_forward_refuses_as_torch(x_shape, target):
    got, want = _pair(8, 20, [6, 12])
    x = RNG.standard_normal(x_shape)
    with pytest.raises(RuntimeError) as want_error:
        want(torch.tensor(x), torch.tensor(target))
    with pytest.raises(RuntimeError) as got_error:
        got(wg.tensor(x), wg.tensor(target))
    assert str(got_error.value).replace("webgrad", "torch") == str(want_error.value)


@pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")
def test_forward_and_backward_on_webgpu():
    want = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [6, 12])
    got = wg.nn.AdaptiveLogSoftmaxWithLoss(8, 20, [6, 12])
    got.load_state_dict({k: wg.tensor(v.numpy()) for k, v in want.state_dict().items()})
    got.to("webgpu")
    x = RNG.standard_normal((6, 8)).astype(np.float32)
    targets = [0, 5, 6, 11, 12, 19]
    out_w, loss_w = got(wg.tensor(x, device="webgpu"), wg.tensor(targets, device="webgpu"))
    out_t, loss_t = want(torch.tensor(x), torch.tensor(targets))
    np.testing.assert_allclose(_np(out_w), _np(out_t), rtol=1e-5, atol=1e-5)
    loss_w.backward()
    loss_t.backward()
    np.testing.assert_allclose(_np(got.tail[1][0].weight.grad), _np(want.tail[1][0].weight.grad), rtol=1e-4,
                               atol=1e-5)
