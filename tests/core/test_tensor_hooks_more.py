"""Gradient hooks (Tensor.register_hook, Module forward/backward hooks), the Tensor's memory-description and
CPU-only methods, nn.utils' weight_norm / spectral_norm / parametrize, torch.autograd.functional and gradcheck:
each against PyTorch, on every device."""

import numpy as np
import pytest
import torch

import webgrad as wg
import webgrad.nn as nn


def _pair(a, device, requires_grad=False, dtype="float32"):
    a = np.asarray(a, dtype=dtype)
    return (wg.tensor(a, device=device, requires_grad=requires_grad),
            torch.tensor(a, requires_grad=requires_grad))


def _close(w, t, atol=1e-5, rtol=1e-4):
    np.testing.assert_allclose(np.asarray(w.detach().cpu().numpy(), dtype="float64"),
                               t.detach().numpy().astype("float64"), atol=atol, rtol=rtol)


# ----------------------------------------------------------------------------- Tensor.register_hook
def _hooked_run(lib, x, calls):
    """A leaf used twice, a non-leaf with a hook that scales and retains its grad, a hook removed again."""
    x.register_hook(lambda g: calls.append(("leaf", g.sum().item())) or g * 10)
    h = x * 2
    h.retain_grad()
    h.register_hook(lambda g: g * 3)
    handle = h.register_hook(lambda g: g * 1000)
    handle.remove()
    h.register_hook(lambda g: calls.append(("h", g.sum().item())))  # returns None: the gradient goes on as it is
    out = (h * h).sum() + (x * x).sum()
    out.backward()
    return h


def test_register_hook_leaf_and_nonleaf(device):
    xw, xt = _pair([[1.0, -2.0], [0.5, 3.0]], device, requires_grad=True)
    cw, ct = [], []
    hw, ht = _hooked_run(wg, xw, cw), _hooked_run(torch, xt, ct)
    assert [c[0] for c in cw] == [c[0] for c in ct]  # the leaf hook ran once, on the sum of both contributions
    np.testing.assert_allclose([c[1] for c in cw], [c[1] for c in ct], rtol=1e-5)
    _close(xw.grad, xt.grad)
    _close(hw.grad, ht.grad)  # retain_grad runs after the hooks, whatever the order


def test_register_hook_autograd_grad_and_dropped_tensor(device):
    """autograd.grad returns the hooked gradient; a hook on an intermediate result fires after the script dropped
    that tensor's last name (Grad-CAM's x.register_hook(save); x = pool(x))."""
    xw, xt = _pair([1.0, 2.0, 3.0], device, requires_grad=True)
    results = []
    for lib, x in ((wg, xw), (torch, xt)):
        x.register_hook(lambda g: g * 2)
        saved = []
        y = x.exp()
        y.register_hook(lambda g: saved.append(g) or g + 1)
        y = y.sum() * 3
        (gx,) = lib.autograd.grad(y, x)
        results.append((gx, saved[0]))
    _close(results[0][0], results[1][0])
    _close(results[0][1], results[1][1])


def test_register_hook_errors_and_handle():
    with pytest.raises(RuntimeError, match="doesn't require gradient"):
        wg.ones(2).register_hook(lambda g: g)
    x = wg.ones(2, requires_grad=True)
    with x.register_hook(lambda g: g * 5):
        (x * 1).sum().backward()
    (x * 1).sum().backward()  # the context manager removed the hook
    assert x.grad.tolist() == [6.0, 6.0]
    y = wg.ones(2, requires_grad=True)
    y.register_hook(lambda g: wg.ones(3))
    with pytest.raises(RuntimeError, match="changed the size"):
        (y * 2).sum().backward()


def test_post_accumulate_grad_hook():
    for lib in (wg, torch):
        p = lib.ones(3, requires_grad=True)
        seen = []
        p.register_post_accumulate_grad_hook(lambda t: seen.append(t.grad.sum().item()))
        (p * 2).sum().backward()
        (p * 2).sum().backward()
        assert seen == [6.0, 12.0]


# ----------------------------------------------------------------------------- Module hooks
def _linear_pair(device):
    torch.manual_seed(0)
    t = torch.nn.Linear(3, 2)
    w = nn.Linear(3, 2).to(device)
    w.load_state_dict(t.state_dict())
    return w, t


def _module_hook_log(lib, m, x):
    log = []
    m.register_forward_pre_hook(lambda mod, args: (args[0] * 2,))
    m.register_forward_hook(lambda mod, args, out: log.append(("fwd", tuple(args[0].shape))) or out + 1)
    m.register_forward_pre_hook(lambda mod, args, kwargs: log.append(("pre_kw", len(args))), with_kwargs=True,
                                prepend=True)
    m.register_full_backward_pre_hook(lambda mod, go: log.append(("bpre", go[0].sum().item())))
    m.register_full_backward_hook(lambda mod, gi, go: log.append(
        ("bwd", [None if g is None else round(g.sum().item(), 4) for g in gi], round(go[0].sum().item(), 4)))
        or (gi[0] * 3,) if gi[0] is not None else None)
    out = m(x)
    (out * out).sum().backward()
    return log, out


@pytest.mark.parametrize("input_requires_grad", [False, True])
def test_module_hooks(device, input_requires_grad):
    w, t = _linear_pair(device)
    xw, xt = _pair([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]], device, requires_grad=input_requires_grad)
    lw, ow = _module_hook_log(wg, w, xw)
    lt, ot = _module_hook_log(torch, t, xt)
    assert [e[0] for e in lw] == [e[0] for e in lt]
    for a, b in zip(lw, lt):
        if a[0] == "bwd":
            assert (a[1][0] is None) == (b[1][0] is None)
            if a[1][0] is not None:
                np.testing.assert_allclose(a[1][0], b[1][0], rtol=1e-4)
            np.testing.assert_allclose(a[2], b[2], rtol=1e-4)
    _close(ow, ot)
    _close(w.weight.grad, t.weight.grad)
    if input_requires_grad:
        _close(xw.grad, xt.grad)  # the backward hook's replacement grad_input reached the input


def test_forward_hook_handles_and_always_call():
    m = nn.Identity()
    seen = []
    h = m.register_forward_hook(lambda mod, args, out: seen.append(1))
    m(wg.ones(1))
    h.remove()
    m(wg.ones(1))
    assert seen == [1]

    class Boom(nn.Module):
        def forward(self, x):
            raise ValueError("boom")
    b = Boom()
    b.register_forward_hook(lambda mod, args, out: seen.append(out), always_call=True)
    with pytest.raises(ValueError, match="boom"):
        b(wg.ones(1))
    assert seen == [1, None]


# ----------------------------------------------------------------------------- Tensor methods
def test_memory_description(device):
    w = wg.ones(3, 4, device=device)
    t = torch.ones(3, 4)
    assert (w.nbytes, w[1].nbytes, w.itemsize, w.element_size()) == (t.nbytes, t[1].nbytes, t.itemsize,
                                                                      t.element_size())
    assert w[1].data_ptr() - w.data_ptr() == t[1].data_ptr() - t.data_ptr()
    assert w.view(12).data_ptr() == w.data_ptr() and w.T.data_ptr() == w.data_ptr()
    assert w.clone().data_ptr() != w.data_ptr()
    assert w[2:].data_ptr() != wg.ones(3, 4, device=device).data_ptr()
    assert w.untyped_storage().nbytes() == 48 and w[1].untyped_storage().data_ptr() == w.data_ptr()
    assert w.pin_memory() is w and w.is_pinned() is False
    assert w.bfloat16().element_size() == t.bfloat16().element_size() == 2


@pytest.mark.parametrize("shape,wrap", [((3, 4), False), ((4, 3), False), ((7, 3), False), ((7, 3), True),
                                        ((4, 3), True), ((3, 3, 3), False)])
def test_fill_diagonal(device, shape, wrap):
    a = np.arange(np.prod(shape), dtype="float32").reshape(shape)
    w, t = _pair(a, device)
    w.fill_diagonal_(-1.5, wrap=wrap)
    t.fill_diagonal_(-1.5, wrap=wrap)
    _close(w, t)


def test_fill_diagonal_graph_and_errors(device):
    xw, xt = _pair(np.ones((3, 3)), device, requires_grad=True)
    for x in (xw, xt):
        y = x * 2
        y.fill_diagonal_(0)
        (y * y).sum().backward()
    _close(xw.grad, xt.grad)
    with pytest.raises(RuntimeError, match="dimensions must larger than 1"):
        wg.zeros(3, device=device).fill_diagonal_(1)
    with pytest.raises(RuntimeError, match="equal length"):
        wg.zeros(2, 3, 4, device=device).fill_diagonal_(1)


def test_apply_and_map(device):
    w, t = _pair([[1.0, -2.0], [3.5, 0.0]], "cpu")
    w.apply_(lambda v: v * v + 1)
    t.apply_(lambda v: v * v + 1)
    _close(w, t)
    w.map_(wg.tensor([10.0, 20.0]), lambda a, b: a - b)
    t.map_(torch.tensor([10.0, 20.0]), lambda a, b: a - b)
    _close(w, t)
    with pytest.raises(RuntimeError, match="requires grad"):
        wg.ones(2, requires_grad=True).apply_(lambda v: v)
    if device != "cpu":
        with pytest.raises(TypeError, match="CPU tensors"):
            wg.ones(2, device=device).apply_(lambda v: v)


# ----------------------------------------------------------------------------- weight_norm, spectral_norm
def test_weight_norm_hook_api(device):
    w, t = _linear_pair(device)
    nn.utils.weight_norm(w)
    torch.nn.utils.weight_norm(t)
    assert list(w.state_dict()) == list(t.state_dict()) == ["bias", "weight_g", "weight_v"]
    x = np.random.rand(5, 3).astype("float32")
    xw, xt = _pair(x, device)
    w(xw).pow(2).sum().backward()
    t(xt).pow(2).sum().backward()
    _close(w.weight_g.grad, t.weight_g.grad)
    _close(w.weight_v.grad, t.weight_v.grad)
    with pytest.raises(RuntimeError, match="two weight_norm hooks"):
        nn.utils.weight_norm(w)
    nn.utils.remove_weight_norm(w)
    torch.nn.utils.remove_weight_norm(t)
    assert list(w.state_dict()) == list(t.state_dict())
    _close(w.weight, t.weight)
    with pytest.raises(ValueError, match="not found"):
        nn.utils.remove_weight_norm(w)


def test_weight_norm_parametrization_checkpoints(device):
    from torch.nn.utils import parametrizations as tp
    torch.manual_seed(1)
    t = tp.weight_norm(torch.nn.Conv2d(2, 3, 3), dim=1)
    w = nn.utils.parametrizations.weight_norm(nn.Conv2d(2, 3, 3), dim=1).to(device)
    assert type(w).__name__ == "ParametrizedConv2d"
    assert list(w.state_dict()) == list(t.state_dict())
    w.load_state_dict(t.state_dict())  # torch's checkpoint into webgrad
    back = tp.weight_norm(torch.nn.Conv2d(2, 3, 3), dim=1)
    back.load_state_dict({k: torch.tensor(v.cpu().numpy()) for k, v in w.state_dict().items()})  # and back
    _close(w.weight, back.weight)
    x = np.random.rand(1, 2, 5, 5).astype("float32")
    xw, xt = _pair(x, device)
    w(xw).sum().backward()
    t(xt).sum().backward()
    _close(w.parametrizations.weight.original0.grad, t.parametrizations.weight.original0.grad)
    _close(w.parametrizations.weight.original1.grad, t.parametrizations.weight.original1.grad)
    # the hook-based API's keys load too (PyTorch's compat hook)
    old = nn.utils.weight_norm(nn.Linear(3, 2))
    new = nn.utils.parametrizations.weight_norm(nn.Linear(3, 2))
    new.load_state_dict(old.state_dict())
    _close(new.weight, torch.tensor(old.weight.detach().numpy()))
    nn.utils.parametrize.remove_parametrizations(w, "weight")
    torch.nn.utils.parametrize.remove_parametrizations(back, "weight")
    assert type(w) is nn.Conv2d and list(w.state_dict()) == list(back.state_dict()) == ["bias", "weight"]
    _close(w.weight, back.weight)


def test_spectral_norm_hook_api(device):
    w, t = _linear_pair(device)
    torch.nn.utils.spectral_norm(t, n_power_iterations=2)
    nn.utils.spectral_norm(w, n_power_iterations=2)
    assert list(w.state_dict()) == list(t.state_dict())
    assert [n for n, _ in w.named_parameters()] == ["bias", "weight_orig"]
    w.load_state_dict(t.state_dict())  # the same u, v to start the power iteration from
    x = np.random.rand(4, 3).astype("float32")
    xw, xt = _pair(x, device)
    for _ in range(2):  # training: u and v move each call
        _close(w(xw), t(xt))
    _close(w.weight_u, t.weight_u)
    w.eval(), t.eval()
    u = w.weight_u.clone()
    _close(w(xw), t(xt))
    _close(w.weight_u, u)  # eval mode reads the stored vectors
    w.train(), t.train()
    w(xw).sum().backward()
    t(xt).sum().backward()
    _close(w.weight_orig.grad, t.weight_orig.grad)
    nn.utils.remove_spectral_norm(w)
    torch.nn.utils.remove_spectral_norm(t)
    _close(w.weight, t.weight)
    ct = nn.utils.spectral_norm(nn.ConvTranspose2d(2, 3, 3))
    assert tuple(ct.weight_u.shape) == (3,) and tuple(ct.weight_v.shape) == (18,)


def test_spectral_norm_parametrization(device):
    from torch.nn.utils import parametrizations as tp
    torch.manual_seed(2)
    t = tp.spectral_norm(torch.nn.Linear(4, 3))
    w = nn.utils.parametrizations.spectral_norm(nn.Linear(4, 3)).to(device)
    assert list(w.state_dict()) == list(t.state_dict())
    w.load_state_dict(t.state_dict())
    xw, xt = _pair(np.random.rand(2, 4), device)
    _close(w(xw), t(xt))
    sigma = np.linalg.svd(w.parametrizations.weight.original.detach().cpu().numpy(), compute_uv=False)[0]
    np.testing.assert_allclose(np.linalg.svd(w.weight.detach().cpu().numpy(), compute_uv=False)[0], 1.0, rtol=1e-2)
    assert sigma > 0


def test_register_parametrization_custom(device):
    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    m = nn.Linear(3, 3).to(device)
    P = nn.utils.parametrize
    P.register_parametrization(m, "weight", Symmetric())
    assert P.is_parametrized(m) and P.is_parametrized(m, "weight") and not P.is_parametrized(m, "bias")
    W = m.weight.detach().cpu().numpy()
    np.testing.assert_allclose(W, W.T)
    a = wg.tensor(np.random.rand(3, 3).astype("float32"), device=device)
    a = a + a.T
    m.weight = a  # right_inverse sets the original so that the parametrization gives `a`
    _close(m.weight, torch.tensor(a.cpu().numpy()))
    m(wg.ones(2, 3, device=device)).sum().backward()
    assert m.parametrizations.weight.original.grad is not None
    with P.cached():
        assert m.weight is m.weight
    with pytest.raises(ValueError, match="may not change the shape"):
        P.register_parametrization(m, "bias", nn.Linear(3, 2).to(device))
    P.remove_parametrizations(m, "weight")
    assert type(m) is nn.Linear and isinstance(m.weight, nn.Parameter)
    with pytest.raises(ValueError, match="does not have a parametrization"):
        P.remove_parametrizations(m, "weight")


# ----------------------------------------------------------------------------- autograd.functional, gradcheck
def _f(x, y):
    return (x.sin() * y).sum(0), x * y.exp()


def test_jacobian_hessian_products(device):
    rng = np.random.default_rng(0)
    xs, ys, vs = rng.random((3, 2)), rng.random((3, 2)), rng.random((3, 2))
    dt = "float32" if device != "cpu" else "float64"
    F, TF = wg.autograd.functional, torch.autograd.functional
    xw, xt = _pair(xs, device, dtype=dt)
    yw, yt = _pair(ys, device, dtype=dt)
    vw, vt = _pair(vs, device, dtype=dt)
    Jw, Jt = F.jacobian(_f, (xw, yw)), TF.jacobian(_f, (xt, yt))
    for rw, rt in zip(Jw, Jt):
        for a, b in zip(rw, rt):
            _close(a, b)
    _close(F.jacobian(lambda a: a.tanh(), xw), TF.jacobian(lambda a: a.tanh(), xt))
    scalar = lambda a, b: (a.sin() * b * b).sum()  # noqa: E731
    Hw, Ht = F.hessian(scalar, (xw, yw)), TF.hessian(scalar, (xt, yt))
    for rw, rt in zip(Hw, Ht):
        for a, b in zip(rw, rt):
            _close(a, b)
    g = lambda a: a.tanh() * a  # noqa: E731
    for name in ("vjp", "jvp"):
        ow, rw = getattr(F, name)(g, xw, vw)
        ot, rt = getattr(TF, name)(g, xt, vt)
        _close(ow, ot)
        _close(rw, rt)
    s = lambda a: (a.tanh() * a).sum()  # noqa: E731
    for name in ("hvp", "vhp"):
        _close(getattr(F, name)(s, xw, vw)[1], getattr(TF, name)(s, xt, vt)[1])
    xw.requires_grad_(), xt.requires_grad_()
    F.jacobian(lambda a: a * a.sin(), xw, create_graph=True).sum().backward()  # differentiable further
    TF.jacobian(lambda a: a * a.sin(), xt, create_graph=True).sum().backward()
    _close(xw.grad, xt.grad)
    assert not F.jacobian(lambda a: a * a, xw).requires_grad
    with pytest.raises(RuntimeError, match="independent of input 1"):
        F.jacobian(lambda a, b: a * 2, (xw, yw), strict=True)
    _close(F.jacobian(g, xw, vectorize=True), TF.jacobian(g, xt, vectorize=True))


def test_gradcheck():
    rng = np.random.default_rng(1)
    a = wg.tensor(rng.random((3, 2)), requires_grad=True)
    b = wg.tensor(rng.random((3, 2)), requires_grad=True)
    assert wg.autograd.gradcheck(lambda x, y: (x * y.sin()).sum(1), (a, b))
    assert wg.autograd.gradgradcheck(lambda x, y: (x * y.sin()).sum(1), (a, b))
    wrong = lambda x: x.detach() * 2 + x * 0  # noqa: E731  (a gradient of zeros: wrong)
    with pytest.raises(wg.autograd.GradcheckError, match="Jacobian mismatch"):
        wg.autograd.gradcheck(wrong, (a,))
    assert issubclass(wg.autograd.GradcheckError, RuntimeError)
    assert wg.autograd.gradcheck(wrong, (a,), raise_exception=False) is False
    with pytest.raises(ValueError, match="at least one input"):
        wg.autograd.gradcheck(lambda x: x, (wg.ones(2, dtype=wg.float64),))
