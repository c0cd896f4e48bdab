"""torch.func's transforms (grad, grad_and_value, vmap, jacrev, jacfwd, hessian, vjp, jvp, stack_module_state)
against PyTorch's own: values, structures, nesting, and the exceptions for bad input."""

import numpy as np
import pytest
import torch
import torch.func as tfunc

import webgrad as wg
import webgrad.func as wfunc
import webgrad.nn as nn
import webgrad.nn.functional as F
from helpers import webgpu_available

RNG = np.random.default_rng(0)


def _arr(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _both(*arrays):
    """(webgrad tensors, torch tensors) of the same values."""
    return [wg.tensor(a) for a in arrays], [torch.tensor(a) for a in arrays]


def _numpy(x):
    if isinstance(x, wg.Tensor):
        return np.asarray(x.detach().cpu().tolist(), dtype=np.float64).reshape(tuple(x.shape))
    return x.detach().numpy().astype(np.float64)


def _assert_same(w, t, rtol=1e-5, atol=1e-5):
    """Equal pytrees: the same containers (dict keys, tuple lengths) and close tensors of the same shapes."""
    if isinstance(t, dict):
        assert isinstance(w, dict) and list(w) == list(t)
        for k in t:
            _assert_same(w[k], t[k], rtol, atol)
    elif isinstance(t, (tuple, list)):
        assert type(w) is type(t) and len(w) == len(t), (type(w), type(t))
        for a, b in zip(w, t):
            _assert_same(a, b, rtol, atol)
    else:
        assert isinstance(w, wg.Tensor), type(w)
        assert tuple(w.shape) == tuple(t.shape), (tuple(w.shape), tuple(t.shape))
        np.testing.assert_allclose(_numpy(w), _numpy(t), rtol=rtol, atol=atol)


def _raises_like(torch_call, wg_call, same_message=True):
    with pytest.raises(Exception) as expected:
        torch_call()
    with pytest.raises(type(expected.value)) as got:
        wg_call()
    if same_message:
        assert str(got.value) == str(expected.value)


def _f(lib):
    return lambda x, y: (lib.sin(x) * y).sum() + (x * x).sum()


# ----------------------------------------------------------------------------------------------- grad
def test_grad_argnums_pytrees_aux_and_value():
    (wx, wy), (tx, ty) = _both(_arr(3, 4), _arr(3, 4))
    for argnums in (0, 1, -1, (0, 1), (1, 0)):
        _assert_same(wfunc.grad(_f(wg), argnums)(wx, wy), tfunc.grad(_f(torch), argnums)(tx, ty))
    g, v = wfunc.grad_and_value(_f(wg))(wx, wy)
    tg, tv = tfunc.grad_and_value(_f(torch))(tx, ty)
    _assert_same((g, v), (tg, tv))

    def loss(lib):
        def fn(params, x):
            out = lib.tanh(x @ params["w"] + params["b"])
            return out.square().mean(), {"out": out}
        return fn
    (ww, wb, wx2), (tw, tb, tx2) = _both(_arr(4, 2), _arr(2), _arr(5, 4))
    w_out = wfunc.grad_and_value(loss(wg), has_aux=True)({"w": ww, "b": wb}, wx2)
    t_out = tfunc.grad_and_value(loss(torch), has_aux=True)({"w": tw, "b": tb}, tx2)
    _assert_same(w_out, t_out)
    w_grads, w_aux = wfunc.grad(loss(wg), has_aux=True)({"w": ww, "b": wb}, wx2)
    assert not w_grads["w"].requires_grad and not w_aux["out"].requires_grad  # unwrapped, as torch.func's
    # keyword arguments pass through and are not differentiated
    keyword = lambda x, *, k: (x * k).sum()
    _assert_same(wfunc.grad(keyword)(wx, k=wy), tfunc.grad(keyword)(tx, k=ty))


def test_grad_leaves_inputs_alone_and_ignores_outer_no_grad():
    (wx, wy), (tx, ty) = _both(_arr(3), _arr(3))
    before = _numpy(wx)
    with wg.no_grad():
        g = wfunc.grad(_f(wg))(wx, wy)
    with torch.no_grad():
        tg = tfunc.grad(_f(torch))(tx, ty)
    _assert_same(g, tg)
    assert wx.grad is None and not wx.requires_grad and not g.requires_grad
    np.testing.assert_array_equal(_numpy(wx), before)
    leaf = wx.clone().requires_grad_(True)
    wfunc.grad(_f(wg))(leaf, wy)
    assert leaf.grad is None


def test_grad_nests_and_composes_with_autograd():
    (wx,), (tx,) = _both(_arr(4))
    for order in (2, 3):
        w_fn, t_fn = (lambda x: x.sin().sum() * 2.0), (lambda x: x.sin().sum() * 2.0)
        for _ in range(order):
            w_fn, t_fn = wfunc.grad(lambda x, f=w_fn: f(x).sum()), tfunc.grad(lambda x, f=t_fn: f(x).sum())
        _assert_same(w_fn(wx), t_fn(tx))
    # an inner grad of a function that closes over the outer argument
    (wy,), (ty,) = _both(_arr(4))
    inner = lambda lib, grad: lambda x: grad(lambda y: (lib.exp(x) * y * y).sum())(wy if lib is wg else ty).sum()
    _assert_same(wfunc.grad(inner(wg, wfunc.grad))(wx), tfunc.grad(inner(torch, tfunc.grad))(tx))
    # an argument that requires grad keeps the result differentiable by regular autograd
    wl, tl = wx.clone().requires_grad_(True), tx.clone().requires_grad_(True)
    wg_out, tg_out = wfunc.grad(lambda x: (x ** 3).sum())(wl), tfunc.grad(lambda x: (x ** 3).sum())(tl)
    assert wg_out.requires_grad and tg_out.requires_grad
    wg_out.sum().backward()
    tg_out.sum().backward()
    _assert_same(wl.grad, tl.grad)


def test_grad_errors_as_torch():
    (wx, wy), (tx, ty) = _both(_arr(3), _arr(3))
    calls = [  # a non-scalar output, a non-tensor output, aux missing, argnums out of range, repeated, empty,
        # a list, a float
        lambda g: g(lambda x, y: x * y),
        lambda g: g(lambda x, y: 3.0),
        lambda g: g(lambda x, y: (x * y).sum(), has_aux=True),
        lambda g: g(lambda x, y: (x * y).sum(), argnums=2),
        lambda g: g(lambda x, y: (x * y).sum(), argnums=(0, 0)),
        lambda g: g(lambda x, y: (x * y).sum(), argnums=()),
        lambda g: g(lambda x, y: (x * y).sum(), argnums=[0]),
        lambda g: g(lambda x, y: (x * y).sum(), argnums=0.0),
    ]
    for make in calls:
        _raises_like(lambda: make(tfunc.grad)(tx, ty), lambda: make(wfunc.grad)(wx, wy))
    _raises_like(lambda: tfunc.grad(lambda x: x)(2.0), lambda: wfunc.grad(lambda x: x)(2.0))
    _raises_like(lambda: tfunc.grad(lambda x: x.sum())(torch.ones(2, dtype=torch.int32)),
                 lambda: wfunc.grad(lambda x: x.sum())(wg.ones(2, dtype=wg.int32)), same_message=False)


# ----------------------------------------------------------------------------------------------- vmap
def test_vmap_in_dims_out_dims_and_pytrees():
    (wa, wb, wc), (ta, tb, tc) = _both(_arr(4, 3), _arr(3, 4), _arr(3))

    def fn(lib):
        return lambda a, b, c: (a * b + c, {"s": (a * c).sum(), "p": lib.outer(a, c)})

    for in_dims, out_dims in [(0, 0), ((0, 1, None), 0), ((0, -1, None), (1, 0)),
                              ((0, 1, None), (-1, {"s": 0, "p": 2}))]:
        w_args = (wa, wb if in_dims != 0 else wb.t(), wc if in_dims != 0 else wc.expand(4, 3))
        t_args = (ta, tb if in_dims != 0 else tb.t(), tc if in_dims != 0 else tc.expand(4, 3))
        _assert_same(wg.vmap(fn(wg), in_dims, out_dims)(*w_args), torch.vmap(fn(torch), in_dims, out_dims)(*t_args))
    # in_dims nested inside an argument's pytree; a non-tensor argument passed whole; kwargs never mapped
    nested = lambda d, scale, *, shift: d["x"] * d["y"][0] * scale + shift
    w_out = wfunc.vmap(nested, in_dims=({"x": 0, "y": [None]}, None))({"x": wa, "y": [wc]}, 2.0, shift=wc)
    t_out = tfunc.vmap(nested, in_dims=({"x": 0, "y": [None]}, None))({"x": ta, "y": [tc]}, 2.0, shift=tc)
    _assert_same(w_out, t_out)
    # nested vmap, an output that does not depend on the mapped input, out_dims=None on an unmapped output
    _assert_same(wfunc.vmap(wfunc.vmap(lambda s, t: s * t), (0, None))(wa, wc),
                 tfunc.vmap(tfunc.vmap(lambda s, t: s * t), (0, None))(ta, tc))
    _assert_same(wfunc.vmap(lambda a: wc * 2)(wa), tfunc.vmap(lambda a: tc * 2)(ta))
    _assert_same(wfunc.vmap(lambda a: (a.sum(), wc), out_dims=(0, None))(wa),
                 tfunc.vmap(lambda a: (a.sum(), tc), out_dims=(0, None))(ta))
    # a mapped dimension of size 0
    _assert_same(wfunc.vmap(lambda a: a.sum(-1), in_dims=1)(wg.ones(3, 0, 2)),
                 tfunc.vmap(lambda a: a.sum(-1), in_dims=1)(torch.ones(3, 0, 2)))
    assert wfunc.vmap is wg.vmap and wg.func.vmap is wg.vmap


def test_vmap_gradients_flow_to_the_batch():
    (wa, wc), (ta, tc) = _both(_arr(5, 3), _arr(3))
    wa.requires_grad_(True)
    ta.requires_grad_(True)
    wfunc.vmap(lambda r: (r * wc).sin().sum())(wa).square().sum().backward()
    tfunc.vmap(lambda r: (r * tc).sin().sum())(ta).square().sum().backward()
    _assert_same(wa.grad, ta.grad)
    # grad of vmap and vmap of grad
    fn = lambda lib: lambda x: lib.vmap(lambda r: (r.tanh() * r).sum())(x).sum()
    _assert_same(wfunc.grad(fn(wg))(wa.detach()), tfunc.grad(fn(torch))(ta.detach()))


def test_vmap_errors_as_torch():
    (wa, wb), (ta, tb) = _both(_arr(4, 3), _arr(5, 3))
    add = lambda x, y: x + y
    cases = [
        (lambda v: v(add)(wa, wb), lambda v: v(add)(ta, tb)),
        (lambda v: v(lambda: 1)(), lambda v: v(lambda: 1)()),
        (lambda v: v(add, in_dims=[0, 0])(wa, wa), lambda v: v(add, in_dims=[0, 0])(ta, ta)),
        (lambda v: v(add, in_dims=(0, 2))(wa, wa), lambda v: v(add, in_dims=(0, 2))(ta, ta)),
        (lambda v: v(add, in_dims=(0, 0))(wa, 1.0), lambda v: v(add, in_dims=(0, 0))(ta, 1.0)),
        (lambda v: v(add, in_dims=(None, None))(wa, wa), lambda v: v(add, in_dims=(None, None))(ta, ta)),
        (lambda v: v(add, in_dims=(0, 0, 0))(wa, wa), lambda v: v(add, in_dims=(0, 0, 0))(ta, ta)),
        (lambda v: v(add, in_dims=(0, 0.5))(wa, wa), lambda v: v(add, in_dims=(0, 0.5))(ta, ta)),
        (lambda v: v(add, out_dims="x")(wa, wa), lambda v: v(add, out_dims="x")(ta, ta)),
        (lambda v: v(lambda x: 1.0)(wa), lambda v: v(lambda x: 1.0)(ta)),
        (lambda v: v(lambda x: x, out_dims=None)(wa), lambda v: v(lambda x: x, out_dims=None)(ta)),
        (lambda v: v(lambda x: (x, x), out_dims=(0, 0, 0))(wa), lambda v: v(lambda x: (x, x), out_dims=(0, 0, 0))(ta)),
    ]
    for w_call, t_call in cases:
        _raises_like(lambda: t_call(tfunc.vmap), lambda: w_call(wfunc.vmap))
    _raises_like(lambda: tfunc.vmap(add, chunk_size=0), lambda: wfunc.vmap(add, chunk_size=0))
    _raises_like(lambda: tfunc.vmap(add, randomness="sometimes"), lambda: wfunc.vmap(add, randomness="sometimes"))


def test_vmap_randomness_modes():
    x = wg.ones(4, 3)
    _raises_like(lambda: tfunc.vmap(lambda r: r + torch.randn(3))(torch.ones(4, 3)),
                 lambda: wfunc.vmap(lambda r: r + wg.randn(3))(x))
    _raises_like(lambda: tfunc.vmap(lambda r: torch.nn.functional.dropout(r, 0.5))(torch.ones(4, 3)),
                 lambda: wfunc.vmap(lambda r: F.dropout(r, 0.5))(x))
    assert not wg.random.draw_observers  # the watcher is gone after the error
    # eval-mode dropout draws nothing
    _assert_same(wfunc.vmap(lambda r: F.dropout(r, 0.5, training=False))(x), torch.ones(4, 3))
    different = wfunc.vmap(lambda r: r + wg.randn(3), randomness="different")(x)
    assert len({tuple(row) for row in different.tolist()}) == 4
    gen = wg.Generator().manual_seed(3)
    same = wfunc.vmap(lambda r: r + wg.randn(3, generator=gen), randomness="same")(x)
    assert len({tuple(row) for row in same.tolist()}) == 1
    once = wg.randn(3, generator=wg.Generator().manual_seed(3)) + 1
    np.testing.assert_allclose(same.tolist()[0], once.tolist(), rtol=1e-6)
    assert gen.offset == 3  # the generator advanced as by one call, not four


# ---------------------------------------------------------------------------------- jacobians, vjp, jvp
def test_jacrev_jacfwd_hessian():
    (wx, wy), (tx, ty) = _both(_arr(3), _arr(2, 3))

    def fn(lib):
        return lambda x, y: {"a": lib.sin(x) * y, "b": (x.exp() * y).sum(1)}

    for jac in ("jacrev", "jacfwd"):
        for argnums in (0, 1, (0, 1)):
            _assert_same(getattr(wfunc, jac)(fn(wg), argnums)(wx, wy), getattr(tfunc, jac)(fn(torch), argnums)(tx, ty))
        aux = lambda x, y: ((x * y).sum(0), y.sum())
        _assert_same(getattr(wfunc, jac)(aux, has_aux=True)(wx, wy), getattr(tfunc, jac)(aux, has_aux=True)(tx, ty))
    scalar = lambda x, y: (x.sin() * y).sum() * (x * x).sum()
    for argnums in (0, (0, 1)):
        _assert_same(wfunc.hessian(scalar, argnums)(wx, wy), tfunc.hessian(scalar, argnums)(tx, ty), atol=1e-4)
    _assert_same(wfunc.jacrev(wfunc.jacrev(lambda x: x.sin() * x.sum()))(wx),
                 tfunc.jacrev(tfunc.jacrev(lambda x: x.sin() * x.sum()))(tx), atol=1e-4)
    # a params dict as the differentiated argument
    pw, pt = {"w": wy}, {"w": ty}
    _assert_same(wfunc.jacrev(lambda p, x: p["w"] @ x)(pw, wx), tfunc.jacrev(lambda p, x: p["w"] @ x)(pt, tx))
    _raises_like(lambda: tfunc.jacrev(fn(torch), chunk_size=0), lambda: wfunc.jacrev(fn(wg), chunk_size=0))
    _raises_like(lambda: tfunc.jacfwd(lambda x: x + torch.randn(3))(tx),
                 lambda: wfunc.jacfwd(lambda x: x + wg.randn(3))(wx))


def test_hessian_of_model_parameters():
    """Second derivatives through nn.Linear's weight and bias (with functional_call), the input too."""
    tmodel = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 1))
    model = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 1))
    model.load_state_dict({k: wg.tensor(v.detach().numpy()) for k, v in tmodel.state_dict().items()})
    data = _arr(5, 3)
    w_params = {k: v.detach() for k, v in model.named_parameters()}
    t_params = {k: v.detach() for k, v in tmodel.named_parameters()}
    w_loss = lambda p, x: wfunc.functional_call(model, p, (x,)).square().mean()
    t_loss = lambda p, x: tfunc.functional_call(tmodel, p, (x,)).square().mean()
    _assert_same(wfunc.hessian(w_loss, argnums=(0, 1))(w_params, wg.tensor(data)),
                 tfunc.hessian(t_loss, argnums=(0, 1))(t_params, torch.tensor(data)), atol=1e-4)
    _assert_same(wfunc.hessian(w_loss)(w_params, wg.tensor(data)), tfunc.hessian(t_loss)(t_params, torch.tensor(data)),
                 atol=1e-4)


def test_vjp_and_jvp():
    (wx, wy, wv), (tx, ty, tv) = _both(_arr(3), _arr(3), _arr(3))
    fn = lambda x, y: (x.sin() * y, {"s": (x * y).sum()})
    w_out, w_fn = wfunc.vjp(fn, wx, wy)
    t_out, t_fn = tfunc.vjp(fn, tx, ty)
    _assert_same(w_out, t_out)
    for _ in range(2):  # vjp_fn may be called again
        _assert_same(w_fn((wv, {"s": wg.tensor(2.0)})), t_fn((tv, {"s": torch.tensor(2.0)})))
    _raises_like(lambda: t_fn(tv), lambda: w_fn(wv), same_message=False)
    w_out, w_fn, w_aux = wfunc.vjp(lambda x: (x.exp(), x.sum()), wx, has_aux=True)
    t_out, t_fn, t_aux = tfunc.vjp(lambda x: (x.exp(), x.sum()), tx, has_aux=True)
    _assert_same((w_out, w_fn(wv), w_aux), (t_out, t_fn(tv), t_aux))
    _raises_like(lambda: tfunc.vjp(lambda x: 3, tx), lambda: wfunc.vjp(lambda x: 3, wx))
    _raises_like(lambda: tfunc.vjp(lambda x: x, 1.0), lambda: wfunc.vjp(lambda x: x, 1.0))

    w_res = wfunc.jvp(fn, (wx, wy), (wv, wx))
    t_res = tfunc.jvp(fn, (tx, ty), (tv, tx))
    _assert_same(w_res, t_res)
    _assert_same(wfunc.jvp(lambda x: (x * x, x.sum()), (wx,), (wv,), has_aux=True),
                 tfunc.jvp(lambda x: (x * x, x.sum()), (tx,), (tv,), has_aux=True))
    _raises_like(lambda: tfunc.jvp(fn, [tx, ty], [tv, tx]), lambda: wfunc.jvp(fn, [wx, wy], [wv, wx]))
    _raises_like(lambda: tfunc.jvp(fn, (tx, ty), (tv,)), lambda: wfunc.jvp(fn, (wx, wy), (wv,)), same_message=False)
    _raises_like(lambda: tfunc.jvp(lambda x: x, (tx,), (torch.ones(2),)),
                 lambda: wfunc.jvp(lambda x: x, (wx,), (wg.ones(2),)))
    _raises_like(lambda: tfunc.jvp(lambda x: ty, (tx,), (tv,), strict=True),
                 lambda: wfunc.jvp(lambda x: wy, (wx,), (wv,), strict=True))
    _assert_same(wfunc.jvp(lambda x: wy, (wx,), (wv,)), tfunc.jvp(lambda x: ty, (tx,), (tv,)))


def test_linearize_functionalize_debug_unwrap():
    (wx, wv), (tx, tv) = _both(_arr(3), _arr(3))
    fn = lambda x: {"a": x.sin() * x, "b": x.exp().sum()}
    (w_out, w_fn), (t_out, t_fn) = wfunc.linearize(fn, wx), tfunc.linearize(fn, tx)
    _assert_same(w_out, t_out)
    _assert_same(w_fn(wv), t_fn(tv))
    _assert_same(w_fn(wx), t_fn(tx))
    _raises_like(lambda: t_fn(tv, tv), lambda: w_fn(wv, wv), same_message=False)
    _raises_like(lambda: t_fn(torch.ones(2)), lambda: w_fn(wg.ones(2)), same_message=False)

    def mutate(x):
        y = x.clone()
        y.add_(1.0)
        x.mul_(2.0)
        return y
    wa, ta = wg.tensor([1.0, 2.0]), torch.tensor([1.0, 2.0])
    _assert_same(wfunc.functionalize(mutate)(wa), tfunc.functionalize(mutate)(ta))
    _assert_same(wa, ta)  # the input's mutation is kept, as torch's functionalize copies it back
    _raises_like(lambda: tfunc.functionalize(mutate, remove="views"),
                 lambda: wfunc.functionalize(mutate, remove="views"))
    assert wfunc.debug_unwrap(wa) is wa


def test_replace_all_batch_norm_modules_():
    tmodel = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3), torch.nn.Linear(3, 2))
    model = nn.Sequential(nn.Linear(4, 3), nn.BatchNorm1d(3), nn.Linear(3, 2))
    model.load_state_dict({k: wg.tensor(v.detach().numpy()) for k, v in tmodel.state_dict().items()})
    assert wfunc.replace_all_batch_norm_modules_(model) is model
    tfunc.replace_all_batch_norm_modules_(tmodel)
    bn = model[1]
    assert bn.running_mean is None and bn.running_var is None and bn.num_batches_tracked is None
    assert not bn.track_running_stats and list(model.state_dict()) == list(tmodel.state_dict())
    data = _arr(6, 4)
    for train in (True, False):
        model.train(train)
        tmodel.train(train)
        _assert_same(model(wg.tensor(data)), tmodel(torch.tensor(data)))
    # ensembles of the model over minibatches, each normalised by its own statistics
    minibatches = _arr(2, 5, 4)
    w_params, t_params = dict(model.named_parameters()), dict(tmodel.named_parameters())
    _assert_same(wfunc.vmap(lambda x: wfunc.functional_call(model, w_params, (x,)))(wg.tensor(minibatches)),
                 tfunc.vmap(lambda x: tfunc.functional_call(tmodel, t_params, (x,)))(torch.tensor(minibatches)))


# --------------------------------------------------------------------------------- end-to-end patterns
def _models(seed=0):
    """A webgrad and a torch MLP with the same weights."""
    tmodel = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 3))
    torch.manual_seed(seed)
    for p in tmodel.parameters():
        torch.nn.init.normal_(p, std=0.5)
    model = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 3))
    model.load_state_dict({k: wg.tensor(v.detach().numpy()) for k, v in tmodel.state_dict().items()})
    return model, tmodel


def _per_sample_grads(lib, func, model, data, targets):
    """The torch.func tutorial's per-sample gradients: vmap(grad(loss)) over the batch, with functional_call."""
    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def compute_loss(params, buffers, sample, target):
        batch, targets_ = sample.unsqueeze(0), target.unsqueeze(0)
        predictions = func.functional_call(model, (params, buffers), (batch,))
        return lib.nn.functional.cross_entropy(predictions, targets_)

    return func.vmap(func.grad(compute_loss), in_dims=(None, None, 0, 0))(params, buffers, data, targets)


def test_per_sample_gradients_tutorial():
    model, tmodel = _models()
    data, targets = _arr(5, 6), RNG.integers(0, 3, 5)
    w_grads = _per_sample_grads(wg, wfunc, model, wg.tensor(data), wg.tensor(targets))
    t_grads = _per_sample_grads(torch, tfunc, tmodel, torch.tensor(data), torch.tensor(targets))
    _assert_same(w_grads, t_grads)
    # each row is the gradient of that sample's loss alone
    model.zero_grad()
    F.cross_entropy(model(wg.tensor(data[2:3])), wg.tensor(targets[2:3])).backward()
    for name, p in model.named_parameters():
        np.testing.assert_allclose(_numpy(w_grads[name][2]), _numpy(p.grad), rtol=1e-5, atol=1e-6)


def test_model_ensembling():
    pairs = [_models(seed) for seed in range(3)]
    models, tmodels = [m for m, _ in pairs], [t for _, t in pairs]
    w_params, w_buffers = wfunc.stack_module_state(models)
    t_params, t_buffers = tfunc.stack_module_state(tmodels)
    _assert_same(w_params, t_params)
    assert all(p.requires_grad and p.grad_fn is None for p in w_params.values())  # new leaves, for an optimizer
    data = _arr(4, 6)
    minibatches = _arr(3, 4, 6)
    w_base, t_base = models[0], tmodels[0]
    w_call = lambda p, b, x: wfunc.functional_call(w_base, (p, b), (x,))
    t_call = lambda p, b, x: tfunc.functional_call(t_base, (p, b), (x,))
    # the same minibatch for every model, then one minibatch per model
    _assert_same(wfunc.vmap(w_call, in_dims=(0, 0, None))(w_params, w_buffers, wg.tensor(data)),
                 tfunc.vmap(t_call, in_dims=(0, 0, None))(t_params, t_buffers, torch.tensor(data)))
    w_out = wfunc.vmap(w_call)(w_params, w_buffers, wg.tensor(minibatches))
    t_out = tfunc.vmap(t_call)(t_params, t_buffers, torch.tensor(minibatches))
    _assert_same(w_out, t_out)
    for i, m in enumerate(models):  # model i's own output
        np.testing.assert_allclose(_numpy(w_out[i]), _numpy(m(wg.tensor(minibatches[i]))), rtol=1e-5, atol=1e-6)
    # the stacked parameters train: one optimizer step over the ensemble
    w_out.square().mean().backward()
    t_out.square().mean().backward()
    _assert_same({k: p.grad for k, p in w_params.items()}, {k: p.grad for k, p in t_params.items()})
    _raises_like(lambda: tfunc.stack_module_state([]), lambda: wfunc.stack_module_state([]))
    _raises_like(lambda: tfunc.stack_module_state([tmodels[0], torch.nn.Linear(6, 8)]),
                 lambda: wfunc.stack_module_state([models[0], nn.Linear(6, 8)]))
    models[1].eval()
    tmodels[1].eval()
    _raises_like(lambda: tfunc.stack_module_state(tmodels), lambda: wfunc.stack_module_state(models))


def test_as_torch_names():
    """torch.func's transforms and torch.vmap resolve under as_torch(), in a fresh interpreter."""
    import subprocess
    import sys
    from helpers import PACKAGE_DIR
    code = ("import webgrad; webgrad.as_torch(); import torch\n"
            "from torch.func import vmap, grad, grad_and_value, jacrev, jacfwd, hessian, vjp, jvp\n"
            "from torch.func import functional_call, stack_module_state\n"
            "assert torch.vmap is vmap is torch.func.vmap and torch.func.grad is grad\n"
            "per_row = torch.vmap(torch.func.grad(lambda r: (r * r).sum()))(torch.ones(2, 3))\n"
            "assert per_row.tolist() == [[2.0] * 3] * 2\n"
            "print('ok')\n")
    env = {"PYTHONPATH": str(PACKAGE_DIR), "OPENBLAS_NUM_THREADS": "1", "PATH": "/usr/bin:/bin"}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert result.stdout.strip() == "ok", result.stderr


@pytest.mark.skipif(not webgpu_available(), reason="no WebGPU adapter")
def test_per_sample_gradients_webgpu():
    model, tmodel = _models()
    model = model.to("webgpu")
    data, targets = _arr(3, 6), RNG.integers(0, 3, 3)
    w_grads = _per_sample_grads(wg, wfunc, model, wg.tensor(data, device="webgpu"),
                                wg.tensor(targets, device="webgpu"))
    assert all(g.device.type == "webgpu" for g in w_grads.values())
    t_grads = _per_sample_grads(torch, tfunc, tmodel, torch.tensor(data), torch.tensor(targets))
    _assert_same(w_grads, t_grads, rtol=1e-4, atol=1e-5)
