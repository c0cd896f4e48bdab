"""torch.autograd.forward_ad: dual tensors (a primal and its tangent) and the Jacobian-vector products of what is
computed from them.

    with forward_ad.dual_level():
        x = forward_ad.make_dual(primal, tangent)
        out = f(x)
        value, jvp = forward_ad.unpack_dual(out)     # jvp = J_f(primal) @ tangent

webgrad has no forward-mode engine: a dual tensor is a tensor that joins the reverse-mode graph, and
unpack_dual computes the tangent from that graph by the double-backward trick (webgrad.func.jvp's): with u a
seed that requires grad, g(u) = u^T J is linear in u, and the gradient of <g(u), tangent> in u is J tangent.
The values are PyTorch's for any function whose ops have second derivatives (elementwise, linear algebra,
reductions, convolutions, the fused ops), not only for elementwise or linear ones; an op without one raises
NotImplementedError naming it, never a silently wrong tangent. Each unpack_dual costs two backward passes.
A custom autograd.Function that defines jvp() is PyTorch's exception: when a dual tensor enters its apply, its
outputs become dual tensors of their own with the tangents jvp computes (it needs no backward), and the walk back
through the graph stops at them.

Where it differs from PyTorch's:
- the dual tensors and everything computed from them require grad (they are in the graph the tangents are
  read from), where PyTorch's require grad only where their primals do;
- the graph is what carries tangents, so dual tensors must be made and used with grad mode on: make_dual
  under no_grad raises (PyTorch allows it), and ops run inside a no_grad block drop the tangent
  (unpack_dual then gives None, where PyTorch gives the tangent);
- a primal returned by unpack_dual has no tangent, but what is computed from it still has its source's.
"""

import weakref
from typing import NamedTuple, Optional

from .._autograd import enable_grad, is_grad_enabled
from .._tensor import Tensor, zeros_like

# The levels entered and not yet exited: each a dict with the dual tensors made at it ("duals": (dual, primal,
# tangent) triples) and the primals unpack_dual handed out ("plain", by id, held weakly: they carry no tangent).
# PyTorch allows one level at a time.
_levels = []
# True while _tangent walks the graph back to the dual tensors: a custom Function whose outputs got their tangents
# from its jvp (their own dual tensors) sends nothing further back in that walk
_walking = False


def _current_level():
    return len(_levels) - 1


def enter_dual_level():
    """Enter a new forward grad level (the one the other functions use by default); returns its number."""
    if _levels:
        raise RuntimeError("Nested forward mode AD is not supported at the moment")
    _levels.append({"duals": [], "plain": weakref.WeakValueDictionary()})
    return _current_level()


def exit_dual_level(*, level=None):
    """Exit the last forward grad level entered: the tangents of its dual tensors are forgotten."""
    if level is None:
        level = _current_level()
    if level != _current_level():
        raise RuntimeError("Trying to exit a forward AD level that was not the last one that was created. This is "
                           "not supported.")
    _levels.pop()


def _level(level):
    level = _current_level() if level is None else level
    return _levels[level] if 0 <= level < len(_levels) else None


def make_dual(tensor, tangent, *, level=None):
    """A dual tensor of primal `tensor` and `tangent` (the same shape), at the current level."""
    state = _level(level)
    if state is None:
        raise RuntimeError("Trying to create a dual Tensor for forward AD but no level exists, make sure to "
                           "enter_dual_level() first.")
    if not tensor.is_floating_point():
        raise ValueError(f"Expected primal to be floating point or complex, but got: {tensor.dtype}")
    if not tangent.is_floating_point():
        raise ValueError(f"Expected tangent to be floating point or complex, but got: {tangent.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    if not is_grad_enabled():
        raise NotImplementedError("make_dual under no_grad: webgrad computes forward-mode tangents through the "
                                  "reverse-mode graph, which no_grad stops recording; make the dual tensors and run "
                                  "the function with grad mode on")
    dual = tensor.view_as(tensor) if tensor.requires_grad else tensor.detach().requires_grad_(True)
    state["duals"].append((dual, tensor, tangent))
    return dual


class UnpackedDualTensor(NamedTuple):
    """What unpack_dual returns: the primal and the tangent (None where the tensor has none)."""

    primal: Tensor
    tangent: Optional[Tensor]


def unpack_dual(tensor, *, level=None):
    """(primal, tangent) of `tensor` at the current level: the tangent is J t summed over the dual tensors the
    tensor was computed from (J its Jacobian in each, t that dual's tangent); None where it was computed from
    none of them, or outside any level."""
    state = _level(level)
    if state is None or not isinstance(tensor, Tensor) or state["plain"].get(id(tensor)) is tensor:
        return UnpackedDualTensor(tensor, None)
    for dual, primal, tangent in state["duals"]:
        if dual is tensor:
            return UnpackedDualTensor(primal, tangent)
    tangent = _tangent(tensor, state["duals"]) if tensor.requires_grad and state["duals"] else None
    if tangent is None:
        return UnpackedDualTensor(tensor, None)
    primal = tensor.view_as(tensor)
    state["plain"][id(primal)] = primal
    return UnpackedDualTensor(primal, tangent)


def _tangent(tensor, duals):
    """J t of tensor in the dual tensors, by differentiating u -> u^T J in a seed u (None: tensor does not depend
    on them). It keeps a graph where a tangent or a primal requires grad and grad mode is on, as PyTorch's."""
    global _walking
    walking, _walking = _walking, True
    try:
        return _tangent_walk(tensor, duals)
    finally:
        _walking = walking


def _tangent_walk(tensor, duals):
    from . import grad
    keep = is_grad_enabled() and any(t.requires_grad or p.requires_grad for _, p, t in duals)
    with enable_grad():
        seed = zeros_like(tensor).requires_grad_(True)
        vjps = grad(tensor, [d for d, _, _ in duals], seed, retain_graph=True, create_graph=True, allow_unused=True)
        reached = [(g, t) for g, (_, _, t) in zip(vjps, duals) if g is not None]
        if not reached:
            return None
        linear = [(g, t) for g, t in reached if g.requires_grad]  # one without a graph has a zero Jacobian
        product = None
        if linear:
            (product,) = grad([g for g, _ in linear], [seed], [t for _, t in linear], retain_graph=True,
                              create_graph=keep, allow_unused=True)
    if product is None:
        return zeros_like(tensor)
    return product if keep else product.detach()


def _input_tangents(args):
    """The tangents a custom Function's jvp gets for the arguments of its apply (a tensor without one: zeros,
    as PyTorch materializes them; anything else: None), or None where no argument carries a tangent."""
    tangents = [unpack_dual(a).tangent if isinstance(a, Tensor) and a.requires_grad else None for a in args]
    if all(t is None for t in tangents):
        return None
    return tuple(zeros_like(a) if t is None and isinstance(a, Tensor) and a.is_floating_point() else t
                 for a, t in zip(args, tangents))


def _register_output(tensor, tangent):
    """A custom Function's output as a dual tensor of the current level, with the tangent its jvp computed."""
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise RuntimeError("Trying to set a forward gradient that has a different size than that of the original "
                           f"Tensor, this is not supported. Tensor is of size {list(tensor.shape)} while the given "
                           f"forward gradient is of size {list(tangent.shape)}.")
    primal = tensor.detach()
    state = _levels[-1]
    state["plain"][id(primal)] = primal
    state["duals"].append((tensor, primal, tangent))


class dual_level:
    """Context manager (and decorator) for forward AD: enters a level on entry and exits it (forgetting its
    tangents) on exit."""

    def __enter__(self):
        return enter_dual_level()

    def __exit__(self, exc_type, exc_value, traceback):
        exit_dual_level()

    def __call__(self, func):
        import functools

        @functools.wraps(func)
        def wrapped(*args, **kwargs):
            with self.__class__():
                return func(*args, **kwargs)
        return wrapped
