"""torch.utils.checkpoint: activation checkpointing, here without the memory saving.

PyTorch's checkpoint(fn, *args) frees fn's intermediate activations after the forward pass and recomputes
them during backward, trading compute for memory; the values and gradients are those of calling fn. webgrad
calls fn and keeps its activations: the same results, without the saving.
"""


def checkpoint(function, *args, use_reentrant=None, context_fn=None, determinism_check="default", debug=False,
               preserve_rng_state=True, early_stop=True, **kwargs):
    """function(*args, **kwargs), with the results and gradients PyTorch's checkpoint gives."""
    return function(*args, **kwargs)


def checkpoint_sequential(functions, segments, input, use_reentrant=None, **kwargs):
    """The functions (a list or a Sequential) applied one after another to input."""
    if hasattr(functions, "children"):
        functions = list(functions.children())
    for fn in functions:
        input = fn(input)
    return input
