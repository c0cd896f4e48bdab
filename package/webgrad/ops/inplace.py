"""In-place ops (x.add_(y), x -= y, x.zero_(), x.copy_(y), ...).

The result is computed out of place and then copied into x's storage with one `copy` kernel, which
writes through any strided view. In-place ops are for tensors outside the graph (parameters under
no_grad, buffers, optimizer state): modifying a tensor the graph needs is refused with a clear error.
"""

from .. import random
from .._tensor import Tensor
from .._autograd import is_grad_enabled, no_grad
from .core import broadcast_shapes, cast, expanded_view
from .._backends import kernels


def check_inplace(x, op):
    if not is_grad_enabled():
        return
    if x.requires_grad and x.grad_fn is None:
        raise RuntimeError(f"{op}: a leaf Variable that requires grad is being used in an in-place operation; "
                           "wrap the update in `with webgrad.no_grad():`")
    if x.grad_fn is not None:
        raise RuntimeError(f"{op}: in-place operations on tensors that are part of an autograd graph are not "
                           "supported; use the out-of-place op instead")


def assign_(x, value, op="in-place op"):
    """Write `value` (a tensor broadcastable to x's shape) into x's storage; returns x."""
    check_inplace(x, op)
    if value.device != x.device:
        raise RuntimeError(f"{op}: expected a value on {x.device}, got one on {value.device}")
    shape = tuple(x.shape)
    if tuple(value.shape) != shape:
        if broadcast_shapes(shape, tuple(value.shape), op=op) != shape:
            raise RuntimeError(f"{op}: result of shape {list(value.shape)} doesn't match the in-place target's "
                               f"shape {list(shape)}")
    value = cast(value, x.dtype)
    kernels.copy(x.device.backend, x._view, expanded_view(value, shape))
    return x


def in_place(op_name, fn):
    """Tensor.<op>_: `fn` computed without recording, written back into self's storage."""
    def method(self, *args, **kwargs):
        check_inplace(self, op_name)
        with no_grad():
            result = fn(self, *args, **kwargs)
        return assign_(self, result, op_name)
    method.__name__ = op_name
    return method


def zero_(x):
    return fill_(x, 0)


def fill_(x, value):
    check_inplace(x, "fill_")
    if isinstance(value, Tensor):
        return assign_(x, value, "fill_")
    kernels.fill(x.device.backend, x._view, value)
    return x


def copy_(x, src, non_blocking=False):
    if not isinstance(src, Tensor):
        raise TypeError(f"copy_(): expected a Tensor, got {type(src).__name__}")
    if src.device != x.device:
        src = src.to(x.device)
    return assign_(x, src, "copy_")


def _random_(dist):
    def method(x, a=None, b=None, generator=None):
        check_inplace(x, f"{dist}_")
        defaults = {"uniform": (0.0, 1.0), "normal": (0.0, 1.0)}[dist]
        a = defaults[0] if a is None else a
        b = defaults[1] if b is None else b
        random.fill_random(x, dist, a, b, generator)
        return x
    method.__name__ = f"{dist}_"
    return method


uniform_ = _random_("uniform")
normal_ = _random_("normal")
