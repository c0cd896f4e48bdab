"""Custom autograd.Function with jvp() under autograd.forward_ad, against PyTorch: both forward/setup_context
styles, ctx.save_for_forward, the tangents jvp is given, several outputs, a Function inside a longer computation
(its tangent must not be added twice by the graph walk forward AD uses) and gradcheck(check_forward_ad=True)."""

import numpy as np
import pytest
import torch

import webgrad as wg


def _exp_old_style(lib):
    class Exp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = x.exp()
            ctx.save_for_forward(result)
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def jvp(ctx, tangent):
            (result,) = ctx.saved_tensors
            return tangent * result

        @staticmethod
        def backward(ctx, grad):
            (result,) = ctx.saved_tensors
            return grad * result
    return Exp


def _scale_setup_context(lib, seen):
    class Scale(lib.autograd.Function):
        @staticmethod
        def forward(x, y, k):
            return x * y * k

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, y, k = inputs
            ctx.k = k
            ctx.save_for_forward(x, y)
            ctx.save_for_backward(x, y)

        @staticmethod
        def jvp(ctx, tx, ty, tk):
            seen.append((tx is None, ty is None, tk is None))
            x, y = ctx.saved_tensors
            return (tx * y + x * ty) * ctx.k

        @staticmethod
        def backward(ctx, grad):
            x, y = ctx.saved_tensors
            return grad * y * ctx.k, grad * x * ctx.k, None
    return Scale


def _data(lib, *shape, seed=0):
    return lib.tensor(np.random.default_rng(seed).standard_normal(shape).astype(np.float32))


def _tangent_of(lib, fn, primals, tangents):
    fwAD = lib.autograd.forward_ad
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, t) for p, t in zip(primals, tangents)]
        out = fn(*duals)
        outs = out if isinstance(out, tuple) else (out,)
        return [fwAD.unpack_dual(o).tangent for o in outs]


def _assert_close(ours, theirs, atol=1e-5):
    assert theirs is not None and ours is not None
    np.testing.assert_allclose(ours.detach().numpy(), theirs.detach().numpy(), rtol=1e-5, atol=atol)


def test_old_style_jvp_with_save_for_forward_matches_torch():
    results = {}
    for lib in (wg, torch):
        Exp = _exp_old_style(lib)
        results[lib] = _tangent_of(lib, Exp.apply, [_data(lib, 3, 4)], [_data(lib, 3, 4, seed=1)])[0]
    _assert_close(results[wg], results[torch])


def test_setup_context_jvp_gets_zeros_for_a_tensor_without_tangent_and_none_for_a_number():
    results, seen = {}, {wg: [], torch: []}
    for lib in (wg, torch):
        Scale = _scale_setup_context(lib, seen[lib])
        fwAD = lib.autograd.forward_ad
        y = _data(lib, 5, seed=2)
        with fwAD.dual_level():
            x = fwAD.make_dual(_data(lib, 5), _data(lib, 5, seed=1))
            results[lib] = fwAD.unpack_dual(Scale.apply(x, y, 3.0)).tangent
    _assert_close(results[wg], results[torch])
    assert seen[wg] == seen[torch] == [(False, False, True)]


def test_function_with_jvp_inside_a_longer_computation_matches_torch():
    """sin -> Function -> exp * the dual input: the Function's output gets its tangent from jvp only."""
    results = {}
    for lib in (wg, torch):
        Exp = _exp_old_style(lib)
        results[lib] = _tangent_of(lib, lambda x: (Exp.apply(x.sin()) * x).sum(dim=0),
                                   [_data(lib, 3, 4)], [_data(lib, 3, 4, seed=1)])[0]
    _assert_close(results[wg], results[torch])


def test_setup_context_function_still_differentiates_backwards():
    grads = {}
    for lib in (wg, torch):
        Scale = _scale_setup_context(lib, [])
        x, y = _data(lib, 4).requires_grad_(), _data(lib, 4, seed=3).requires_grad_()
        Scale.apply(x, y, 2.0).sum().backward()
        grads[lib] = (x.grad, y.grad)
    for ours, theirs in zip(grads[wg], grads[torch]):
        _assert_close(ours, theirs)


def test_several_outputs_get_one_tangent_each():
    results = {}
    for lib in (wg, torch):
        class SinCos(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_forward(x)
                return x.sin(), x.cos()

            @staticmethod
            def jvp(ctx, t):
                (x,) = ctx.saved_tensors
                return t * x.cos(), -t * x.sin()
        results[lib] = _tangent_of(lib, SinCos.apply, [_data(lib, 6)], [_data(lib, 6, seed=1)])
    for ours, theirs in zip(results[wg], results[torch]):
        _assert_close(ours, theirs)


def test_function_without_backward_refuses_reverse_mode_as_torch():
    for lib in (wg, torch):
        class OnlyForward(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def jvp(ctx, t):
                return t * 2
        x = _data(lib, 3).requires_grad_()
        with pytest.raises(NotImplementedError, match="You must implement either the backward or vjp method"):
            OnlyForward.apply(x).sum().backward()


def test_gradcheck_checks_the_jvp():
    class Good(wg.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.result = x.exp()
            return ctx.result

        @staticmethod
        def jvp(ctx, t):
            return t * ctx.result

    class Wrong(Good):
        @staticmethod
        def jvp(ctx, t):
            return t * ctx.result * 2
    x = wg.tensor(np.random.default_rng(0).standard_normal((3, 2)), dtype=wg.float64, requires_grad=True)
    options = dict(check_forward_ad=True, check_backward_ad=False, check_undefined_grad=False,
                   check_batched_grad=False)
    assert wg.autograd.gradcheck(Good.apply, (x,), **options)
    assert not wg.autograd.gradcheck(Wrong.apply, (x,), raise_exception=False, **options)
