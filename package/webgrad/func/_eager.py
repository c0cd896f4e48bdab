"""torch.func names that have nothing to undo in eager webgrad: functionalize (webgrad runs func's mutations
as written, which is what functionalize's result computes, mutations of the inputs included) and debug_unwrap
(webgrad's transforms hand func ordinary tensors, never wrappers)."""

import functools


def functionalize(func, *, remove="mutations"):
    """torch.func.functionalize: func itself, wrapped (the results, and the inputs' values after the call, are
    those a functionalized func gives). remove: 'mutations' or 'mutations_and_views', as PyTorch checks it."""
    if remove not in ("mutations", "mutations_and_views"):
        raise RuntimeError(f"functionalize(f, remove='mutations'): received invalid argument for remove={remove}. "
                           "Valid options are:\n     remove='mutations': all inplace and out= operators will be "
                           "removed from the program, and replaced with their out-of-place equivalents.\n     "
                           "remove='mutations_and_views': In addition to the above, all aliasing operators {view} "
                           "will be replaced with their non-aliasing counterparts, {view}_copy.\n")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapped


def debug_unwrap(tensor, *, recurse=True):
    """torch.func.debug_unwrap: the tensor itself (webgrad's transforms never wrap tensors)."""
    return tensor
