"""torch.func: functional_call (a module called with substituted parameters and buffers).

webgrad has no function transforms (grad, vmap, jacrev): gradients come from backward() and autograd.grad."""

from .nn.utils.stateless import functional_call as _stateless_call


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """module(*args, **kwargs) with the given tensors in place of its parameters and buffers, as
    torch.func.functional_call: one dict, or a sequence of dicts whose names may not repeat (ValueError)."""
    if isinstance(parameter_and_buffer_dicts, dict):
        merged = parameter_and_buffer_dicts
    else:
        merged, repeated = {}, []
        for d in parameter_and_buffer_dicts:
            repeated += [name for name in d if name in merged]
            merged.update(d)
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of functional call is ambiguous")
    return _stateless_call(module, merged, args, kwargs, tie_weights=tie_weights, strict=strict)


__all__ = ["functional_call"]
