"""torch.nn.utils.stateless.functional_call: call a module with some of its parameters and buffers replaced.

The given tensors stand in for the module's own for the length of the call (in the registries that Module's
attribute lookup reads) and the originals are put back after it, also when it raises, so gradients flow to the
substitutes and the module's own parameters are left as they were.
"""



def _owner(module, name):
    *path, leaf = name.split(".")
    for part in path:
        child = module._modules.get(part) if isinstance(getattr(module, "_modules", None), dict) else None
        if child is None:
            raise AttributeError(f"'{type(module).__name__}' object has no attribute '{part}'")
        module = child
    return module, leaf


def _tied_names(module):
    """{name: every name of the same tensor} for the parameters and buffers registered under several names."""
    by_tensor = {}
    for name, t in (*module.named_parameters(remove_duplicate=False), *module.named_buffers(remove_duplicate=False)):
        by_tensor.setdefault(id(t), []).append(name)
    return {name: names for names in by_tensor.values() if len(names) > 1 for name in names}


def _swap_in(module, tensors):
    """Put each tensor in place of module's entry of its name; returns the undo list."""
    undo = []
    try:
        for name, value in tensors.items():
            owner, leaf = _owner(module, name)
            for registry in (owner._parameters, owner._buffers):
                if leaf in registry:
                    undo.append((registry, leaf, registry[leaf]))
                    registry[leaf] = value
                    break
            else:
                had = leaf in owner.__dict__
                undo.append((owner.__dict__, leaf, owner.__dict__.get(leaf)) if had else (owner.__dict__, leaf, _ABSENT))
                owner.__dict__[leaf] = value
    except BaseException:
        _restore(undo)
        raise
    return undo


_ABSENT = object()


def _restore(undo):
    for registry, key, value in reversed(undo):
        if value is _ABSENT:
            registry.pop(key, None)
        else:
            registry[key] = value


def functional_call(module, parameters_and_buffers, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """module(*args, **kwargs) with the tensors of parameters_and_buffers ({name: tensor}, names as in
    state_dict) in place of the module's, as torch.nn.utils.stateless.functional_call. tie_weights: a tensor given
    for one of several names of one parameter replaces it under all of them (two different tensors for tied names
    raise ValueError). strict: every parameter and buffer must be given, and no other name (RuntimeError)."""
    tensors = dict(parameters_and_buffers)
    for name in tensors:
        if not isinstance(name, str):
            raise TypeError(f"functional_call: expected the names to be str, got {type(name).__name__}")
    if tie_weights:
        tied = _tied_names(module)
        for name in list(tensors):
            given = [n for n in tied.get(name, ()) if n in tensors]
            if len(given) > 1 and any(tensors[n] is not tensors[name] for n in given):
                raise ValueError(f"functional_call got multiple values for keys {sorted(given)}, which are tied. "
                                 "Consider using tie_weights=False")
            for other in tied.get(name, ()):
                tensors.setdefault(other, tensors[name])
    if strict:
        known = [n for n, _ in module.named_parameters(remove_duplicate=False)]
        known += [n for n, _ in module.named_buffers(remove_duplicate=False)]
        missing = [n for n in known if n not in tensors]
        unexpected = [n for n in tensors if n not in known]
        if missing or unexpected:
            lines = []
            if unexpected:
                lines.append("Unexpected key(s): " + ", ".join(repr(n) for n in unexpected) + ".")
            if missing:
                lines.append("Missing key(s): " + ", ".join(repr(n) for n in missing) + ".")
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t" + "\n\t".join(lines))
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    undo = _swap_in(module, tensors)
    try:
        return module(*args, **(kwargs or {}))
    finally:
        _restore(undo)


__all__ = ["functional_call"]
