"""F.ctc_loss and nn.CTCLoss against PyTorch: losses for every reduction, padded and concatenated targets,
samples of different input and target lengths, repeated labels (which need a blank between them), the gradient
of the logits through log_softmax and PyTorch's own gradient of log_probs, zero_infinity on impossible
alignments, unbatched inputs, and PyTorch's errors; on every device."""

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn.functional as F
from helpers import DEVICES

RNG = np.random.default_rng(8)
T, N, C = 9, 3, 6
TARGETS = np.array([[1, 2, 2, 5], [3, 1, 0, 0], [4, 4, 4, 0]])  # repeats: 2 2 and 4 4 4
INPUT_LENGTHS, TARGET_LENGTHS = [9, 6, 8], [4, 2, 3]


def _run(device, reduction, concatenated=False, leaf_log_probs=False, **kw):
    x = RNG.standard_normal((T, N, C)).astype(np.float32)
    tg = TARGETS
    if concatenated:
        tg = np.concatenate([TARGETS[i, :n] for i, n in enumerate(TARGET_LENGTHS)])
    if leaf_log_probs:
        x = torch.tensor(x).log_softmax(2).numpy()
    tx, wx = torch.tensor(x, requires_grad=True), wg.tensor(x, device=device, requires_grad=True)
    tlp, wlp = (tx, wx) if leaf_log_probs else (tx.log_softmax(2), wx.log_softmax(2))
    want = torch.nn.functional.ctc_loss(tlp, torch.tensor(tg), INPUT_LENGTHS, TARGET_LENGTHS, reduction=reduction,
                                        **kw)
    got = F.ctc_loss(wlp, wg.tensor(tg, device=device), wg.tensor(INPUT_LENGTHS), TARGET_LENGTHS,
                     reduction=reduction, **kw)
    np.testing.assert_allclose(got.detach().cpu().numpy(), want.detach().numpy(), rtol=1e-5, atol=1e-5)
    g = RNG.standard_normal(tuple(want.shape)).astype(np.float32)
    want.backward(torch.tensor(g))
    got.backward(wg.tensor(g, device=device))
    np.testing.assert_allclose(wx.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_ctc_loss_matches_torch(device, reduction):
    _run(device, reduction)


@pytest.mark.parametrize("device", DEVICES)
def test_concatenated_targets_and_log_probs_leaf(device):
    _run(device, "mean", concatenated=True)
    _run(device, "none", leaf_log_probs=True)  # PyTorch's gradient of log_probs itself


@pytest.mark.parametrize("device", DEVICES)
def test_zero_infinity_and_module(device):
    """A target longer than its frames allow (3 labels with a repeat need 4 frames) is impossible: inf, or 0
    with zero_infinity (and no gradient from it)."""
    x = RNG.standard_normal((3, 1, 4)).astype(np.float32)
    for zero in (False, True):
        ours = wg.nn.CTCLoss(blank=0, reduction="sum", zero_infinity=zero)
        theirs = torch.nn.CTCLoss(blank=0, reduction="sum", zero_infinity=zero)
        assert repr(ours) == repr(theirs)
        wx = wg.tensor(x, device=device, requires_grad=True)
        got = ours(wx.log_softmax(2), wg.tensor([[1, 1, 2]], device=device), [3], [3])
        want = theirs(torch.tensor(x).log_softmax(2), torch.tensor([[1, 1, 2]]), [3], [3])
        assert float(got) == float(want)
        if zero:
            got.backward()
            assert (wx.grad.cpu().numpy() == 0).all()


@pytest.mark.parametrize("device", DEVICES)
def test_unbatched(device):
    x = RNG.standard_normal((6, 5)).astype(np.float32)
    want = torch.nn.functional.ctc_loss(torch.tensor(x).log_softmax(1), torch.tensor([1, 3]), torch.tensor(6),
                                        torch.tensor(2), reduction="none")
    got = F.ctc_loss(wg.tensor(x, device=device).log_softmax(1), wg.tensor([1, 3], device=device), wg.tensor(6),
                     wg.tensor(2), reduction="none")
    assert tuple(got.shape) == tuple(want.shape) == ()
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-5)


def test_errors():
    lp = wg.randn(6, 2, 4).log_softmax(2)
    tg = wg.tensor([[1, 2, 2], [3, 1, 0]])
    with pytest.raises(RuntimeError, match="input_lengths to have value at most 6, but got value 7"):
        F.ctc_loss(lp, tg, [7, 5], [3, 2])
    with pytest.raises(RuntimeError, match="size at least 4 at dimension 1"):
        F.ctc_loss(lp, tg, [6, 5], [4, 2])
    with pytest.raises(ValueError, match="bad is not a valid value for reduction"):
        F.ctc_loss(lp, tg, [6, 5], [3, 2], reduction="bad")
    with pytest.raises(RuntimeError, match="blank must be in label range"):
        F.ctc_loss(lp, tg, [6, 5], [3, 2], blank=4)
