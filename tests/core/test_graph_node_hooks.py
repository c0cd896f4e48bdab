"""Hooks on graph nodes (grad_fn.register_prehook, grad_fn.register_hook) against PyTorch: what they see, what
their results replace, their handles, and PyTorch's errors."""

import numpy as np
import pytest
import torch

import webgrad as wg


def _data(lib, seed, grad=False):
    t = lib.tensor(np.random.default_rng(seed).standard_normal(4).astype(np.float32))
    return t.requires_grad_() if grad else t


def _run(lib):
    x, y = _data(lib, 0, grad=True), _data(lib, 1)
    z = x * y
    log = []
    z.grad_fn.register_prehook(lambda go: log.append(("pre", len(go))) or (go[0] * 2,))
    z.grad_fn.register_hook(lambda gi, go: log.append(("post", [g is None for g in gi], len(go))) or (gi[0] + 1, None))
    removed = z.grad_fn.register_hook(lambda gi, go: log.append("removed"))
    removed.remove()
    (z * 3).sum().backward()
    return log, x.grad.numpy()


def test_node_hooks_see_and_replace_gradients_as_torchs():
    (ours, grad), (theirs, expected) = _run(wg), _run(torch)
    assert ours == theirs == [("pre", 1), ("post", [False, True], 1)]
    np.testing.assert_allclose(grad, expected, rtol=1e-6)


def test_node_hook_errors_as_torchs():
    for lib in (wg, torch):
        x = _data(lib, 0, grad=True)
        z = x * _data(lib, 1)
        z.grad_fn.register_hook(lambda gi, go: (gi[0], gi[0]))
        with pytest.raises(RuntimeError, match="can't replace a None gradient with a non-None value"):
            z.sum().backward()
        z = x * 2
        z.grad_fn.register_prehook(lambda go: (go[0], go[0]))
        with pytest.raises(RuntimeError, match=r"returned an incorrect number of values \(got 2, but expected 1\)"):
            z.sum().backward()


def test_disable_saved_tensors_hooks_as_a_decorator():
    @wg.autograd.graph.disable_saved_tensors_hooks("not here")
    def f():
        with wg.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
            pass
    with pytest.raises(RuntimeError, match="^not here$"):
        f()
