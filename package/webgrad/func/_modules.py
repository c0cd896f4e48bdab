"""torch.func's module helpers: functional_call (a module called with substituted parameters and buffers),
stack_module_state (the parameters and buffers of several copies of a model, stacked for vmap) and
replace_all_batch_norm_modules_ (batch norms without running statistics, which vmap cannot update per slice)."""

from ..ops.shape import stack
from ..nn.normalization import _BatchNorm
from ..nn.utils.stateless import functional_call as _stateless_call


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


def _stacked_leaf(tensors, name):
    """The tensors stacked along a new dim 0: a new leaf that requires grad where all of them do (so an
    optimizer can train the ensemble), none where none does."""
    requiring = [t.requires_grad for t in tensors]
    if any(requiring) and not all(requiring):
        raise RuntimeError(f"Expected {name} from each model to have the same .requires_grad")
    result = stack(tensors)
    return result.detach().requires_grad_(True) if all(requiring) else result


def stack_module_state(models):
    """({name: stacked parameter}, {name: stacked buffer}) of models of one class in one mode, as
    torch.func.stack_module_state: what vmap(functional_call) runs an ensemble with, each entry of dim 0 one
    model's tensor. The stacked parameters are new leaves, unrelated to the models' own."""
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if len({m.training for m in models}) != 1:
        raise RuntimeError("stack_module_state: Expected all models to have the same training/eval mode.")
    if any(type(m) is not type(models[0]) for m in models):
        raise RuntimeError("stack_module_state: Expected all models to be of the same class.")
    all_params = [dict(m.named_parameters()) for m in models]
    all_buffers = [dict(m.named_buffers()) for m in models]
    params = {k: _stacked_leaf([p[k] for p in all_params], k) for k in all_params[0]}
    buffers = {k: _stacked_leaf([b[k] for b in all_buffers], k) for k in all_buffers[0]}
    return params, buffers


def replace_all_batch_norm_modules_(root):
    """root, with every batch norm in it (root included) set to keep no running statistics (running_mean,
    running_var and num_batches_tracked None, track_running_stats False), as torch.func's: then they normalise
    with the statistics of the batch they see, in training and in eval alike."""
    for module in root.modules():
        if isinstance(module, _BatchNorm) and module.track_running_stats:
            module.running_mean = None
            module.running_var = None
            module.num_batches_tracked = None
            module.track_running_stats = False
    return root
