"""nn.utils.get_total_norm and nn.utils.clip_grads_with_norm_ (clip_grad_norm_ in two halves) against torch."""

import math

import numpy as np
import pytest
import torch

import webgrad as wg
from helpers import DEVICES

_rng = np.random.default_rng(5)
GRADS = [_rng.standard_normal((3, 4)), _rng.standard_normal(5), _rng.standard_normal((2, 2, 2))]


def _params(lib, dtype_name="float64", device=None):
    kw = {"device": device} if device else {}
    params = []
    for g in GRADS:
        p = lib.zeros(g.shape, dtype=getattr(lib, dtype_name), requires_grad=True, **kw)
        p.grad = lib.tensor(g, dtype=getattr(lib, dtype_name), **kw)
        params.append(p)
    params.append(lib.zeros(2, requires_grad=True, **kw))  # no gradient: left out
    return params


@pytest.mark.parametrize("norm_type", [2.0, 1, 3.5, math.inf, 0], ids=str)
def test_get_total_norm_matches_torch(norm_type):
    t_total = torch.nn.utils.get_total_norm([p.grad for p in _params(torch)[:3]], norm_type)
    w_total = wg.nn.utils.get_total_norm([p.grad for p in _params(wg)[:3]], norm_type)
    assert w_total.shape == () and w_total.dtype is wg.float64
    np.testing.assert_allclose(w_total.item(), t_total.item(), rtol=1e-13)
    one = wg.nn.utils.get_total_norm(wg.tensor(GRADS[1]), norm_type)  # a single tensor
    np.testing.assert_allclose(one.item(), torch.nn.utils.get_total_norm(torch.tensor(GRADS[1]), norm_type).item())
    assert wg.nn.utils.get_total_norm([]).item() == 0.0


@pytest.mark.parametrize("max_norm", [0.5, 100.0], ids=["clips", "leaves"])
def test_clip_grads_with_norm_matches_clip_grad_norm_and_torch(max_norm):
    t_params, w_params, w_whole = _params(torch), _params(wg), _params(wg)
    t_total = torch.nn.utils.get_total_norm([p.grad for p in t_params[:3]])
    torch.nn.utils.clip_grads_with_norm_(t_params, max_norm, t_total)
    w_total = wg.nn.utils.get_total_norm([p.grad for p in w_params if p.grad is not None])
    assert wg.nn.utils.clip_grads_with_norm_(w_params, max_norm, w_total) is None
    whole_total = wg.nn.utils.clip_grad_norm_(w_whole, max_norm)
    np.testing.assert_allclose(w_total.item(), whole_total.item(), rtol=1e-14)
    for t, w, whole in zip(t_params[:3], w_params, w_whole):
        np.testing.assert_allclose(w.grad.numpy(), t.grad.numpy(), rtol=1e-14)
        np.testing.assert_allclose(w.grad.numpy(), whole.grad.numpy(), rtol=1e-14)
    assert w_params[3].grad is None
    changed = not np.allclose(w_params[0].grad.numpy(), GRADS[0])
    assert changed == (max_norm < w_total.item())


def test_get_total_norm_nonfinite_error_as_torch():
    bad = [wg.tensor([1.0, float("inf")])]
    with pytest.raises(RuntimeError) as expected:
        torch.nn.utils.get_total_norm([torch.tensor([1.0, float("inf")])], error_if_nonfinite=True)
    with pytest.raises(RuntimeError) as got:
        wg.nn.utils.get_total_norm(bad, error_if_nonfinite=True)
    assert str(got.value) == str(expected.value)
    assert math.isinf(wg.nn.utils.get_total_norm(bad).item())


@pytest.mark.parametrize("device", [d for d in DEVICES if d != "cpu"])
def test_on_device(device):
    params, ref = _params(wg, "float32", device), _params(wg, "float32")
    for ps in (params, ref):
        total = wg.nn.utils.get_total_norm([p.grad for p in ps[:3]])
        wg.nn.utils.clip_grads_with_norm_(ps, 1.0, total)
        assert total.device == ps[0].device
    for p, q in zip(params[:3], ref):
        np.testing.assert_allclose(p.grad.to("cpu").numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7)
