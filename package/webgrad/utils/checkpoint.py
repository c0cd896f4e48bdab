"""torch.utils.checkpoint: activation checkpointing, here without the memory saving.

PyTorch's checkpoint(fn, *args) frees fn's intermediate activations after the forward pass and recomputes
them during backward, trading compute for memory; the values and gradients are those of calling fn. webgrad
calls fn and keeps its activations: the same results, without the saving. Called without use_reentrant, both
warn as PyTorch's do (it asks scripts to pass it).
"""

import warnings

_PASS_IT = ("the use_reentrant parameter should be passed explicitly. Starting in PyTorch 2.9, calling checkpoint "
            "without use_reentrant will raise an exception. use_reentrant=False is recommended, but if you need to "
            "preserve the current default behavior, you can pass use_reentrant=True. Refer to docs for more details "
            "on the differences between the two variants.")


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               preserve_rng_state=True, early_stop=True, **kwargs):
    """function(*args, **kwargs), with the results and gradients PyTorch's checkpoint gives."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint: " + _PASS_IT, UserWarning, stacklevel=2)
    return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """The functions (a list or a Sequential) applied one after another to input."""
    if use_reentrant is None:
        warnings.warn("torch.utils.checkpoint.checkpoint_sequential: " + _PASS_IT, UserWarning, stacklevel=2)
    if hasattr(functions, "children"):
        functions = list(functions.children())
    for fn in functions:
        input = fn(input)
    return input
