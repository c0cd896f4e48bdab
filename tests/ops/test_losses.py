"""Every loss, in every reduction, against PyTorch: values and gradients (float64, CPU), through both the
functional form and the module form (whose buffers hold class weights)."""

import numpy as np
import pytest

import webgrad as wg
from webgrad import nn
from helpers import DEVICES

torch = pytest.importorskip("torch")

REDUCTIONS = ("none", "mean", "sum")
RNG = np.random.default_rng(0)
LOGITS = RNG.standard_normal((6, 4))
LOGITS_2D = RNG.standard_normal((2, 4, 3, 2))
CLASSES = RNG.integers(0, 4, 6)
CLASSES_2D = RNG.integers(0, 4, (2, 3, 2))
X, Y = RNG.standard_normal((3, 5)), RNG.standard_normal((3, 5))
PROBS, LABELS = RNG.uniform(0.02, 0.98, (3, 5)), RNG.uniform(0, 1, (3, 5))
CLASS_WEIGHT = np.array([0.3, 1.0, 2.0, 0.7])
ELEM_WEIGHT = RNG.uniform(0.5, 1.5, (3, 5))
POS_WEIGHT = np.array([0.5, 1.0, 2.0, 3.0, 1.5])

# (name, module name, constructor kwargs (arrays become tensors), input, target, target is differentiable)
CASES = [
    ("cross_entropy", "CrossEntropyLoss", {}, LOGITS, CLASSES, False),
    ("cross_entropy_weight_smooth", "CrossEntropyLoss", {"weight": CLASS_WEIGHT, "label_smoothing": 0.1}, LOGITS, CLASSES,
     False),
    ("cross_entropy_ignore_spatial", "CrossEntropyLoss", {"ignore_index": 2}, LOGITS_2D, CLASSES_2D, False),
    ("cross_entropy_weight_ignore", "CrossEntropyLoss", {"weight": CLASS_WEIGHT, "ignore_index": 1}, LOGITS, CLASSES, False),
    ("nll", "NLLLoss", {}, LOGITS, CLASSES, False),
    ("nll_weight_ignore", "NLLLoss", {"weight": CLASS_WEIGHT, "ignore_index": 0}, LOGITS, CLASSES, False),
    ("nll_spatial", "NLLLoss", {"weight": CLASS_WEIGHT}, LOGITS_2D, CLASSES_2D, False),
    ("mse", "MSELoss", {}, X, Y, True),
    ("l1", "L1Loss", {}, X, Y, True),
    ("smooth_l1", "SmoothL1Loss", {}, X, Y, True),
    ("smooth_l1_beta", "SmoothL1Loss", {"beta": 0.4}, X, Y, True),
    ("smooth_l1_beta0", "SmoothL1Loss", {"beta": 0.0}, X, Y, True),
    ("huber", "HuberLoss", {}, X, Y, True),
    ("huber_delta", "HuberLoss", {"delta": 0.3}, X, Y, True),
    ("bce", "BCELoss", {}, PROBS, LABELS, True),
    ("bce_weight", "BCELoss", {"weight": ELEM_WEIGHT}, PROBS, LABELS, True),
    ("bce_logits", "BCEWithLogitsLoss", {}, X * 3, LABELS, True),
    ("bce_logits_weights", "BCEWithLogitsLoss", {"weight": ELEM_WEIGHT, "pos_weight": POS_WEIGHT}, X * 3, LABELS, True),
]


def _run(lib, module_name, kwargs, x, t, target_grad, reduction):
    is_torch = lib is torch
    make = (lambda a, **kw: torch.tensor(a, **kw)) if is_torch else \
        (lambda a, **kw: wg.tensor(a, dtype=wg.float64 if a.dtype.kind == "f" else None, **kw))
    args = {k: make(v) for k, v in kwargs.items() if isinstance(v, np.ndarray)}
    args.update({k: v for k, v in kwargs.items() if not isinstance(v, np.ndarray)})
    loss_fn = getattr(lib.nn, module_name)(reduction=reduction, **args)
    xs = make(x, requires_grad=True)
    ts = make(t, requires_grad=target_grad)
    out = loss_fn(xs, ts)
    w = np.random.default_rng(1).standard_normal(tuple(out.shape))
    (out * make(w)).sum().backward()
    grads = [xs.grad] + ([ts.grad] if target_grad else [])
    return out.detach().numpy(), [g.detach().numpy() for g in grads]


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("name,module_name,kwargs,x,t,target_grad", CASES, ids=[c[0] for c in CASES])
def test_loss_matches_torch(name, module_name, kwargs, x, t, target_grad, reduction):
    ours, our_grads = _run(wg, module_name, kwargs, x, t, target_grad, reduction)
    ref, ref_grads = _run(torch, module_name, kwargs, x, t, target_grad, reduction)
    assert ours.shape == ref.shape
    np.testing.assert_allclose(ours, ref, rtol=1e-10, atol=1e-12, err_msg=f"{name} ({reduction}): value")
    for i, (g, rg) in enumerate(zip(our_grads, ref_grads)):
        np.testing.assert_allclose(g, rg, rtol=1e-9, atol=1e-12, err_msg=f"{name} ({reduction}): gradient {i}")


def test_bce_is_finite_at_zero_and_one():
    """log clamped at -100 and PyTorch's clamped gradient: no inf or nan at the ends of [0, 1]."""
    x = np.array([0.0, 1.0, 0.0, 1.0, 0.5])
    y = np.array([0.0, 1.0, 1.0, 0.0, 0.3])
    xs, xt = wg.tensor(x, dtype=wg.float64, requires_grad=True), torch.tensor(x, requires_grad=True)
    out = nn.functional.binary_cross_entropy(xs, wg.tensor(y, dtype=wg.float64), reduction="none")
    ref = torch.nn.functional.binary_cross_entropy(xt, torch.tensor(y), reduction="none")
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy())
    out.sum().backward()
    ref.sum().backward()
    assert np.isfinite(xs.grad.numpy()).all()
    np.testing.assert_allclose(xs.grad.numpy(), xt.grad.numpy(), rtol=1e-8)  # torch keeps its 1e-12 as a float32


def test_bce_with_logits_is_stable_for_large_logits():
    x = wg.tensor([-200.0, 200.0, 0.0], requires_grad=True)
    loss = nn.functional.binary_cross_entropy_with_logits(x, wg.tensor([1.0, 0.0, 1.0]), reduction="none")
    np.testing.assert_allclose(loss.detach().numpy(), [200.0, 200.0, np.log(2)], rtol=1e-6)
    loss.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [-1.0, 1.0, -0.5], rtol=1e-6)


def test_loss_errors_name_the_problem():
    F = nn.functional
    with pytest.raises(ValueError, match="reduction must be 'none', 'mean' or 'sum', got 'avg'"):
        F.mse_loss(wg.ones(2), wg.ones(2), reduction="avg")
    with pytest.warns(UserWarning, match=r"target size \(\[2, 1\]\) that is different to the input size \(\[2\]\)"):
        F.l1_loss(wg.ones(2), wg.ones(2, 1))
    with pytest.raises(ValueError, match=r"target size \(\[3\]\) that is different to the input size \(\[2\]\)"):
        F.binary_cross_entropy(wg.ones(2) * 0.5, wg.ones(3))
    with pytest.raises(ValueError, match=r"expected target of shape \[4\]"):
        F.nll_loss(wg.randn(4, 3), wg.tensor([0, 1]))
    with pytest.raises(TypeError, match="integer tensor of class indices"):
        F.nll_loss(wg.randn(4, 3), wg.randn(4))
    with pytest.raises(RuntimeError, match=r"one entry per class, shape \[3\]"):
        F.nll_loss(wg.randn(4, 3), wg.tensor([0, 1, 2, 0]), weight=wg.ones(4))


def test_loss_modules_register_weights_as_buffers():
    loss = nn.CrossEntropyLoss(weight=wg.tensor([1.0, 2.0]))
    assert list(loss.state_dict()) == ["weight"] == list(torch.nn.CrossEntropyLoss(weight=torch.ones(2)).state_dict())
    assert list(nn.BCEWithLogitsLoss(pos_weight=wg.ones(3)).state_dict()) == ["pos_weight"]
    assert list(nn.MSELoss().state_dict()) == [] and nn.L1Loss(reduction="sum").reduction == "sum"
    assert nn.MSELoss(size_average=False).reduction == "sum"  # PyTorch's legacy flags still map


def test_mixed_devices_are_named():
    if "webgpu" not in DEVICES:
        pytest.skip("needs a second device")
    with pytest.raises(RuntimeError, match="nll_loss: expected all tensors on the same device"):
        nn.functional.nll_loss(wg.randn(3, 2, device="webgpu"), wg.tensor([0, 1, 0], device="webgpu"), weight=wg.ones(2))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("ignored,smoothing", [((1, 4), 0.0), ((0, 2, 5), 0.2), ((0, 1, 2, 3, 4, 5), 0.0)],
                         ids=["some-ignored", "smoothed", "all-ignored"])
def test_cross_entropy_mean_counts_only_kept_rows(device, ignored, smoothing):
    # The fused path's mean: the kernel's (loss, kept) column sums, divided on the device. PyTorch divides by
    # the rows whose target is not ignore_index; with none kept the loss is NaN and the gradient 0.
    target = CLASSES.copy()
    target[list(ignored)] = -100
    x32 = LOGITS.astype(np.float32)
    tx = torch.tensor(x32, requires_grad=True)
    want = torch.nn.functional.cross_entropy(tx, torch.tensor(target), label_smoothing=smoothing)
    want.backward()
    x = wg.tensor(x32, device=device, requires_grad=True)
    got = nn.functional.cross_entropy(x, wg.tensor(target, device=device), label_smoothing=smoothing)
    got.backward()
    assert got.shape == () and got.requires_grad
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-6, atol=1e-6, equal_nan=True)
    np.testing.assert_allclose(x.grad.cpu().numpy(), tx.grad.numpy(), rtol=1e-5, atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_mse_loss_is_one_graph_node_as_torchs(reduction):
    # A tutorial prints loss.grad_fn and walks next_functions: MseLossBackward0, then the input's node; mean is
    # MeanBackward0. Gradients of a broadcast target, an integer target and a second order agree with torch's.
    results = []
    for lib in (torch, wg):
        x = lib.tensor(X, requires_grad=True)
        h = x * 3
        t = lib.tensor(Y[:1], requires_grad=True)  # broadcast along dim 0 (both warn)
        with pytest.warns(UserWarning):
            loss = lib.nn.functional.mse_loss(h, t, reduction=reduction)
        weights = lib.tensor(np.random.default_rng(2).standard_normal(tuple(loss.shape)))
        gx, = lib.autograd.grad((loss * weights).sum(), x, create_graph=True)
        (gx * gx).sum().backward()
        ints = lib.nn.functional.mse_loss(lib.ones(1, 10, requires_grad=True), lib.arange(1, 11).view(1, -1))
        name = (lambda f: f.name()) if lib is torch else (lambda f: f.name_())  # webgrad's Node.name is its field
        results.append((name(loss.grad_fn), name(loss.grad_fn.next_functions[0][0]),
                        loss.grad_fn.next_functions[1][0] is None, name(h.mean().grad_fn), loss.detach().numpy(),
                        x.grad.numpy(), t.grad.numpy(), name(ints.grad_fn), ints.detach().item()))
    ours, ref = results[1], results[0]
    assert ours[:4] == ("MseLossBackward0", "MulBackward0", False, "MeanBackward0")
    assert ours[:4] == ref[:4] and ours[7:] == ref[7:]
    for a, b in zip(ours[4:7], ref[4:7]):
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("reduction", REDUCTIONS)
def test_loss_grad_fn_names_are_torchs(reduction):
    # A tutorial prints loss.grad_fn: the node of each loss is named as PyTorch's, not after its last inner op
    names = []
    for lib in (torch, wg):
        F = lib.nn.functional
        x = lib.tensor(X, requires_grad=True)
        p = lib.tensor(PROBS, requires_grad=True)
        y = lib.tensor(LABELS)
        logits = lib.tensor(LOGITS, requires_grad=True)
        classes = lib.tensor(CLASSES)
        losses = [F.binary_cross_entropy_with_logits(x, y, reduction=reduction),
                  F.binary_cross_entropy(p, y, reduction=reduction), F.smooth_l1_loss(x, y, reduction=reduction),
                  F.huber_loss(x, y, reduction=reduction), F.cross_entropy(logits, classes, reduction=reduction),
                  F.nll_loss(logits, classes, reduction=reduction), F.mse_loss(x, y, reduction=reduction)]
        names.append([t.grad_fn.name() if lib is torch else t.grad_fn.name_() for t in losses])
    assert names[1] == names[0]
