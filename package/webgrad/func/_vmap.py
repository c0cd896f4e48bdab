"""torch.vmap (torch.func.vmap): a function mapped over a dimension of its inputs.

webgrad maps by slicing: func runs once per index along the mapped dimension, on the inputs' slices (views,
so gradients flow back to the batched inputs), and the results are stacked along out_dims. The values are
PyTorch's; the cost is one call of func per slice (PyTorch's batching rules make one batched call). A func
that already handles a leading batch dimension is cheaper called on the batch directly; vmap does not guess
that it does. Transforms nest in any order (vmap(grad(f)), vmap(vmap(f)), grad(vmap(f))).

Where the slicing differs from PyTorch's batching: func may branch on values or call .item() (PyTorch
refuses data-dependent control flow), and an in-place write to a tensor func closes over happens once per
slice, where PyTorch refuses it: a batch norm in training updates its running statistics batch-size times
(run it in eval mode, or after replace_all_batch_norm_modules_, as PyTorch asks).

Randomness (every draw goes through a webgrad.random Generator, which reports it): 'error' raises on a
random op inside func, as PyTorch; 'different' lets each slice draw its own numbers; 'same' gives every
slice the same numbers (each generator is set back, before each slice, to its state at the slice before
the first one that drew from it), leaving the generators as one call of func would.
"""

import contextlib
import functools

from .. import random as _random
from .._tensor import Tensor, zeros
from ..ops.shape import stack
from . import _pytree


def check_randomness_arg(randomness):
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")


class _Randomness:
    """Watches the generators' draws while func runs under one randomness mode (see the module's docstring)."""

    def __init__(self, mode):
        self.mode = mode
        self.states = {}  # generator -> its state before the first slice's first draw (mode 'same')

    def observe(self, generator):
        if self.mode == "error":
            raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use "
                               "the 'same' or 'different' randomness flags on vmap or perform the randomness "
                               "operation out of vmap")
        if self.mode == "same" and generator not in self.states:
            self.states[generator] = generator.get_state()

    def next_slice(self):
        for generator, state in self.states.items():
            generator.set_state(state)


@contextlib.contextmanager
def randomness_mode(mode):
    """A context in which the generators' draws follow `mode`; yields the watcher (next_slice() before each
    slice but the first)."""
    watcher = _Randomness(mode)
    _random.draw_observers.append(watcher.observe)
    try:
        yield watcher
    finally:
        _random.draw_observers.remove(watcher.observe)


def _name(func):
    if hasattr(func, "__name__"):
        return func.__name__
    if isinstance(func, functools.partial):
        return f"functools.partial({_name(func.func)}, ...)"
    return repr(func)


def _flat_in_dims(in_dims, args, func):
    """(batch size, in_dim per flattened argument (None: not mapped), flattened arguments, their spec)."""
    name = _name(func)
    if not isinstance(in_dims, (int, tuple)):
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int or a "
                         f"(potentially nested) tuple matching the structure of inputs, got: {type(in_dims)}.")
    if not args:
        raise ValueError(f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you are trying "
                         "to vmap over a function with no inputs. The latter is unsupported.")
    flat_args, spec = _pytree.flatten(args)
    flat_dims = _pytree.broadcast_prefix(in_dims, spec)
    if flat_dims is None:
        raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible with the "
                         f"structure of `inputs`. in_dims has structure {_pytree.flatten(in_dims)[1]} but inputs "
                         f"has structure {spec}.")
    for i, (arg, dim) in enumerate(zip(flat_args, flat_dims)):
        if dim is not None and (not isinstance(dim, int) or isinstance(dim, bool)):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={dim} for an input but "
                             "in_dim must be either an integer dimension or None.")
        if dim is None:
            continue
        if not isinstance(arg, Tensor):
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={dim} for an input but "
                             f"the input is of type {type(arg)}. We cannot vmap over non-Tensor arguments, please "
                             "use None as the respective in_dim")
        if not -arg.dim() <= dim < arg.dim():
            raise ValueError(f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={dim} for some input, but "
                             f"that input is a Tensor of dimensionality {arg.dim()} so expected in_dim to satisfy "
                             f"-{arg.dim()} <= in_dim < {arg.dim()}.")
        flat_dims[i] = dim % arg.dim()
    sizes = [arg.shape[dim] for arg, dim in zip(flat_args, flat_dims) if dim is not None]
    if not sizes:
        raise ValueError("vmap: Expected at least one Tensor to vmap over")
    if any(size != sizes[0] for size in sizes):
        raise ValueError("vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sizes} for the mapped dimension")
    return sizes[0], flat_dims, flat_args, spec


def _check_out_dims(out_dims, func):
    leaves, _ = _pytree.flatten(out_dims)
    if any(not (d is None or (isinstance(d, int) and not isinstance(d, bool))) for d in leaves):
        raise ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an int, None or a python "
                         "collection of ints representing where in the outputs the vmapped dimension should appear.")


def _flat_out_dims(out_dims, output, spec, func):
    if isinstance(output, Tensor):  # one tensor takes an int, None or a 1-tuple (as torch's)
        if out_dims is None or isinstance(out_dims, int):
            return [out_dims]
        if isinstance(out_dims, tuple) and len(out_dims) == 1:
            return list(out_dims)
        flat = None
    else:
        flat = _pytree.broadcast_prefix(out_dims, spec)
    if flat is None:
        raise ValueError(f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is not compatible with "
                         f"the structure of `outputs`. out_dims has structure {_pytree.flatten(out_dims)[1]} but "
                         f"outputs has structure {spec}.")
    return flat


def _unmapped(values, func):
    """The one value of an output with out_dim None: func must return the same for every slice."""
    first = values[0]
    if all(v is first for v in values) or not isinstance(first, Tensor):
        return first
    if not all(isinstance(v, Tensor) and tuple(v.shape) == tuple(first.shape) for v in values) or \
            not bool((stack(values) == first).all()):
        name = _name(func)
        raise ValueError(f"vmap({name}, ...): `{name}` can not return a BatchedTensor when out_dim is None")
    return first


def _combine(results, out_dims, func, empty):
    """The per-slice results stacked along their out_dims (empty: one result, of a stand-in for a mapped
    dimension of size 0)."""
    flats = [_pytree.flatten(r) for r in results]
    spec = flats[0][1]
    if any(s != spec for _, s in flats):
        raise RuntimeError(f"vmap({_name(func)}, ...): `{_name(func)}` returned outputs of different structures "
                           "for different slices of the mapped dimension")
    flat_dims = _flat_out_dims(out_dims, results[0], spec, func)
    combined = []
    for j, dim in enumerate(flat_dims):
        values = [flat[j] for flat, _ in flats]
        if dim is None:
            combined.append(_unmapped(values, func))
            continue
        if not isinstance(values[0], Tensor):
            raise ValueError(f"vmap({_name(func)}, ...): `{_name(func)}` must only return Tensors, got type "
                             f"{type(values[0])}. Did you mean to set out_dims= to None for output?")
        out = stack(values, dim=dim)
        combined.append(out.narrow(dim, 0, 0) if empty else out)
    return _pytree.unflatten(combined, spec)


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """torch.vmap: a function that maps func over dimension in_dims of its inputs and stacks the results
    along out_dims.

    in_dims: an int (every input mapped along it), or a tuple with one entry per positional argument, each an
    int, None (not mapped: passed whole to every call) or a nested structure matching that argument's pytree.
    Keyword arguments are never mapped. out_dims: an int, None or a structure matching the outputs (a pytree
    of tensors). randomness: 'error', 'different' or 'same', as PyTorch's (see the module's docstring).
    chunk_size: how many slices PyTorch batches at once; here every slice is its own call, so it changes
    nothing but is checked as PyTorch checks it.

    Cost: func runs once per slice of the mapped dimension (see the module's docstring)."""
    check_randomness_arg(randomness)
    if not (chunk_size is None or chunk_size > 0):
        raise ValueError(f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    @functools.wraps(func)
    def wrapped(*args, **kwargs):
        _check_out_dims(out_dims, func)
        size, flat_dims, flat_args, spec = _flat_in_dims(in_dims, args, func)

        def piece(i):
            if size == 0:  # no slice to run: a zero stand-in of one slice's shape tells the outputs' shapes
                return [a if d is None else zeros(tuple(a.shape[:d]) + tuple(a.shape[d + 1:]), dtype=a.dtype,
                                                  device=a.device) for a, d in zip(flat_args, flat_dims)]
            return [a if d is None else a.select(d, i) for a, d in zip(flat_args, flat_dims)]

        results = []
        with randomness_mode(randomness) as watcher:
            for i in range(max(size, 1)):
                if i:
                    watcher.next_slice()
                results.append(func(*_pytree.unflatten(piece(i), spec), **kwargs))
        return _combine(results, out_dims, func, empty=size == 0)

    return wrapped
