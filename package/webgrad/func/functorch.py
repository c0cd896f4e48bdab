"""The functorch package's names (``import functorch`` under webgrad.as_torch()): torch.func's transforms, and
functorch's older functional modules, make_functional and make_functional_with_buffers, which split a module into
a function of its parameters (and buffers) and those tensors."""

from ._autodiff import grad, grad_and_value, hessian, jacfwd, jacrev, jvp, vjp  # noqa: F401
from ._modules import functional_call
from ._vmap import vmap  # noqa: F401


def _state(model, kind):
    named = list(model.named_parameters() if kind == "parameters" else model.named_buffers())
    return [name for name, _ in named], tuple(t for _, t in named)


def make_functional(model, disable_autograd_tracking=False):
    """(func, params): func(params, *args) runs `model` with `params` (a sequence, in model.parameters()'s
    order) in place of its parameters. disable_autograd_tracking: params are detached."""
    names, params = _state(model, "parameters")

    def func(params, *args, **kwargs):
        return functional_call(model, dict(zip(names, params)), args, kwargs)
    return func, _detached(params, disable_autograd_tracking)


def make_functional_with_buffers(model, disable_autograd_tracking=False):
    """(func, params, buffers): func(params, buffers, *args) runs `model` with the given parameters and buffers
    (sequences, in model.parameters()'s and model.buffers()'s order)."""
    names, params = _state(model, "parameters")
    buffer_names, buffers = _state(model, "buffers")

    def func(params, buffers, *args, **kwargs):
        state = dict(zip(names, params))
        state.update(zip(buffer_names, buffers))
        return functional_call(model, state, args, kwargs)
    return func, _detached(params, disable_autograd_tracking), buffers


def _detached(params, detach):
    return tuple(p.detach() for p in params) if detach else params


__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "jvp", "make_functional",
           "make_functional_with_buffers", "vjp", "vmap"]
