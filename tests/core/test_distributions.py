"""webgrad.distributions.Categorical against torch.distributions.Categorical on every device."""

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.distributions as D

from tests.helpers import DEVICES


def _np(t):
    return t.detach().to("cpu").numpy()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("param", ["probs", "logits"])
def test_categorical_matches_torch(device, param):
    rng = np.random.default_rng(0)
    raw = (rng.uniform(0.05, 2.0, (3, 4)) if param == "probs" else rng.standard_normal((3, 4))).astype(np.float32)
    w = wg.tensor(raw, device=device, requires_grad=True)
    t = torch.tensor(raw, requires_grad=True)
    wd, td = D.Categorical(**{param: w}), torch.distributions.Categorical(**{param: t})
    np.testing.assert_allclose(_np(wd.probs), td.probs.detach().numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(_np(wd.logits), td.logits.detach().numpy(), rtol=1e-5, atol=1e-6)
    assert tuple(wd.batch_shape) == tuple(td.batch_shape) and tuple(wd.event_shape) == ()
    value = np.array([[0, 3, 1], [2, 2, 0]])  # [2, 3]: broadcast against batch shape [3]
    lp = wd.log_prob(wg.tensor(value.astype(np.int32), device=device))
    tlp = td.log_prob(torch.tensor(value))
    np.testing.assert_allclose(_np(lp), tlp.detach().numpy(), rtol=1e-5, atol=1e-6)
    ent, tent = wd.entropy(), td.entropy()
    np.testing.assert_allclose(_np(ent), tent.detach().numpy(), rtol=1e-5, atol=1e-6)
    # gradients of log_prob + entropy with respect to the parameter
    (lp.sum() + ent.sum()).backward()
    (tlp.sum() + tent.sum()).backward()
    np.testing.assert_allclose(_np(w.grad), t.grad.numpy(), rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(_np(wd.mode), td.mode.numpy())


@pytest.mark.parametrize("device", DEVICES)
def test_categorical_sample_frequencies(device):
    wg.manual_seed(0)
    probs = np.array([[0.1, 0.2, 0.7, 0.0], [0.25, 0.25, 0.25, 0.25]], np.float32)
    d = D.Categorical(probs=wg.tensor(probs, device=device))
    n = 20000
    s = d.sample((n,))
    assert tuple(s.shape) == (n, 2)
    s = _np(s)
    for row in range(2):
        freq = np.bincount(s[:, row], minlength=4) / n
        # 5 standard deviations of a binomial frequency at n = 20000 is at most 0.018
        np.testing.assert_allclose(freq, probs[row], atol=0.018)
    assert (s[:, 0] != 3).all()  # a zero-probability category is never drawn
    assert tuple(d.sample().shape) == (2,)


def test_categorical_errors():
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        D.Categorical()
    with pytest.raises(ValueError, match="Either `probs` or `logits` must be specified, but not both."):
        D.Categorical(probs=wg.ones(3), logits=wg.ones(3))
