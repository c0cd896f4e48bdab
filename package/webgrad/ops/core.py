"""Helpers every op family uses: allocating results, broadcasting, device checks, dtype casts.

They sit below the families (elementwise, reduce, shape, ...) so the families import them one way.
"""

from .._tensor import Tensor, cast  # noqa: F401  (cast is re-exported: the families import it from here)
from .._view import View


def new(shape, dtype, device):
    return Tensor._empty(shape, dtype, device)


def broadcast_shapes(*shapes, op="broadcast"):
    ndim = max(len(s) for s in shapes)
    out = []
    for i in range(ndim):
        size = 1
        for s in shapes:
            d = s[i - ndim + len(s)] if i - ndim + len(s) >= 0 else 1
            if d != 1:
                if size != 1 and d != size:
                    shown = " and ".join(str(list(s)) for s in shapes)
                    raise RuntimeError(f"{op}: shapes {shown} cannot be broadcast together "
                                       f"(size {size} vs {d} at dimension {i - ndim})")
                size = d
        out.append(size)
    return tuple(out)


def expanded_view(t, shape):
    """A view of t with `shape` (broadcast dims get stride 0)."""
    v = t._view
    pad = len(shape) - len(v.shape)
    strides = [0] * pad + [0 if (n == 1 and m != 1) else s for n, m, s in zip(v.shape, shape[pad:], v.strides)]
    return View(v.storage, shape, strides, v.offset, v.dtype)


def check_same_device(op, *tensors):
    devs = {t.device.type for t in tensors if isinstance(t, Tensor)}
    if len(devs) > 1:
        names = ", ".join(f"{t.device}" for t in tensors if isinstance(t, Tensor))
        raise RuntimeError(f"{op}: expected all tensors on the same device, but found tensors on {names}")


def unbroadcast(g, shape):
    """Sum a gradient of a broadcast result back down to an input's `shape`."""
    if tuple(g.shape) == tuple(shape):
        return g
    lead = g.ndim - len(shape)
    dims = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and g.shape[lead + i] != 1)
    return g.sum(dim=dims, keepdim=True).reshape(shape) if dims else g.reshape(shape)
