"""torch.autograd.function: the module path of Function and FunctionCtx, and once_differentiable.

A backward decorated with once_differentiable runs without recording a graph; under create_graph its gradients
hang from a node that raises when a backward pass runs it (PyTorch's DelayedError), as PyTorch's."""

import functools

from .._autograd import is_grad_enabled, no_grad, record
from .._tensor import Tensor
from . import Function, FunctionCtx  # noqa: F401  (torch.autograd.function.Function, FunctionCtx)

ONCE = "trying to differentiate twice a function that was marked with @once_differentiable"


def once_differentiable(fn):
    @functools.wraps(fn)
    def wrapper(ctx, *args):
        with no_grad():
            outputs = fn(ctx, *args)
        if not is_grad_enabled():  # a plain backward: nothing will differentiate the gradients
            return outputs
        seeds = tuple(a for a in args if isinstance(a, Tensor) and a.requires_grad)
        if not seeds:
            return outputs

        def refuse(*grads):
            raise RuntimeError(ONCE)
        # As PyTorch's: each gradient hangs from a node whose input is a detached copy of it (a leaf), so a
        # backward() through it raises, and an autograd.grad that does not ask for that leaf leaves it out
        single = not isinstance(outputs, tuple)
        marked = tuple(record(g, "DelayedError", (g.detach().requires_grad_(),), refuse)
                       if isinstance(g, Tensor) and g.dtype.is_floating else g
                       for g in ((outputs,) if single else outputs))
        return marked[0] if single else marked
    return wrapper
