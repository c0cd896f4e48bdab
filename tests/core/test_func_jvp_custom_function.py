"""torch.func.jvp (and linearize) through a custom autograd.Function that defines jvp() and no backward, against
PyTorch: the Function alone, inside a longer computation, with several primals, and the results' requires_grad."""

import numpy as np
import torch

import webgrad as wg


def _cube(lib):
    class Cube(lib.autograd.Function):
        @staticmethod
        def forward(x):
            return x ** 3

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_forward(inputs[0])

        @staticmethod
        def jvp(ctx, tangent):
            (x,) = ctx.saved_tensors
            return 3 * x ** 2 * tangent
    return Cube


def _run(lib):
    cube = _cube(lib).apply
    x, t = lib.tensor([1.0, 2.0, 3.0]), lib.tensor([1.0, 0.5, 2.0])
    results = [lib.func.jvp(cube, (x,), (t,)),
               lib.func.jvp(lambda x: cube(x.sin()).exp().sum(), (x,), (t,)),
               lib.func.jvp(lambda x, y: cube(x * y) + y, (x, x + 1), (t, t)),
               (None, lib.func.linearize(lambda x: cube(x) * 2, x)[1](t))]
    values = [[None if r is None else np.asarray(r.tolist()) for r in pair] for pair in results]
    out, tangent = lib.func.jvp(cube, (x.clone().requires_grad_(),), (t,))
    return values, (out.requires_grad, tangent.requires_grad)


def test_func_jvp_through_a_function_with_jvp_and_no_backward():
    mine, theirs = _run(wg), _run(torch)
    assert mine[1] == theirs[1]
    for m, t in zip(mine[0], theirs[0]):
        for a, b in zip(m, t):
            assert (a is None) == (b is None)
            if a is not None:
                np.testing.assert_allclose(a, b, rtol=1e-5)


def test_func_jvp_without_a_custom_function_is_unchanged():
    x, t = wg.tensor([0.5, -1.0]), wg.tensor([1.0, 2.0])
    out, tangent = wg.func.jvp(lambda x: (x.tanh() * x).sum(), (x,), (t,))
    expected = torch.func.jvp(lambda x: (x.tanh() * x).sum(), (torch.tensor([0.5, -1.0]),),
                              (torch.tensor([1.0, 2.0]),))
    np.testing.assert_allclose([out.item(), tangent.item()], [expected[0].item(), expected[1].item()], rtol=1e-6)
