"""masked_fill and masked_fill_, as torch.masked_fill: `value` where a bool mask is True, else the input; and the
softmax of a masked_fill's result as one kernel (hand-written attention's `masked_fill(mask, -inf)`, `softmax`).

A Python value is one masked_fill kernel (no tensor made for it), and so is the gradient (zero where masked);
a 0-d tensor value goes through where, so that it gets its gradient (the sum over the masked places).

masked_fill notes what each of its results was made from (while the result lives); F.softmax over the last dim of
such a result computes it from the masked_fill's input and mask in one kernel (kernels.softmax_masked), and its
gradient goes straight to that input (kernels.softmax_masked_backward: the masked_fill's backward folded in). The
masked_fill's own result is then read by nothing: a recorded step drops its dispatch at the seal (fusion.py).
"""

import numbers
import weakref

from .. import dtypes
from .._autograd import no_grad, note_write, record
from .._tensor import Tensor
from .core import broadcast_shapes, cast, check_same_device, expanded_view, new, unbroadcast
from .elementwise import where
from .inplace import apply_in_place, assign_, check_inplace, records
from .._backends import kernels

# dtypes the masked_fill kernel writes (the CPU writes any; WebGPU float32, int32 and int64, float16 through
# float32); other dtypes (bool, uint8) take where
_KERNEL_DTYPES = (dtypes.float16, dtypes.bfloat16, dtypes.float32, dtypes.float64, dtypes.int32, dtypes.int64)


def _check(input, mask, value, op):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' must be Tensor, not {type(input).__name__}")
    if not isinstance(mask, Tensor):
        raise TypeError(f"{op}(): argument 'mask' must be Tensor, not {type(mask).__name__}")
    if mask.dtype is not dtypes.bool_:
        raise RuntimeError(f"masked_fill_ only supports boolean masks, but got mask with dtype {mask.dtype.name}")
    if isinstance(value, Tensor):
        if value.ndim != 0:
            raise RuntimeError(f"masked_fill_ only supports a 0-dimensional value tensor, but got tensor with "
                               f"{value.ndim} dimension(s).")
    elif not isinstance(value, numbers.Number) or isinstance(value, complex):
        raise TypeError(f"{op}(): argument 'value' must be a Number or a 0-d Tensor, not {type(value).__name__}")
    check_same_device(op, input, mask)
    return value if isinstance(value, Tensor) else dtypes.check_fill_value(value, input.dtype)


def _scalar(value, dtype):
    """A Python value as `dtype` takes it (bool for a bool tensor; ints truncate in the kernel)."""
    if dtype is dtypes.bool_:
        return bool(value)
    return float(value) if dtype.is_floating else value


def _fill(input, mask, value, shape):
    """The result as a new tensor of `shape`, without recording."""
    if isinstance(value, Tensor) or input.dtype not in _KERNEL_DTYPES:
        v = value if isinstance(value, Tensor) else _scalar(value, input.dtype)
        if isinstance(v, Tensor):
            v = cast(v.to(input.device), input.dtype)
        with no_grad():
            out = where(mask, v, input)
        return out if out.dtype is input.dtype else cast(out, input.dtype)
    out = new(shape, input.dtype, input.device)
    kernels.masked_fill(input.device.backend, out._view, expanded_view(input, shape), expanded_view(mask, shape),
                        _scalar(value, input.dtype))
    return out


# id(result) -> (weak reference to the result, input, mask, value): what a masked_fill's result was made from
_MADE_FROM = {}


def _note(out, input, mask, value):
    key = id(out)
    _MADE_FROM[key] = (weakref.ref(out, lambda _, key=key: _MADE_FROM.pop(key, None)), input, mask, value)


def made_from(t):
    """(input, mask, value) of the masked_fill whose result `t` is, or None."""
    entry = _MADE_FROM.get(id(t))
    if entry is None or entry[0]() is not t:
        return None
    return entry[1:]


def masked_fill(input, mask, value):
    """`value` where `mask` (bool, broadcast with input) is True, else input; the result has input's dtype and the
    broadcast shape. Its gradient is zero where masked; a 0-d tensor `value` gets the sum over the masked places."""
    value = _check(input, mask, value, "masked_fill")
    shape = broadcast_shapes(tuple(input.shape), tuple(mask.shape), op="masked_fill")
    out = _fill(input, mask, value, shape)
    tensor_value = value if isinstance(value, Tensor) and value.dtype.is_floating else None

    def backward(g):
        gx = None
        if input.requires_grad:
            gx = new(shape, g.dtype, g.device)
            kernels.masked_fill(g.device.backend, gx._view, expanded_view(g, shape), expanded_view(mask, shape), 0.0)
            gx = unbroadcast(gx, tuple(input.shape))
        gv = None
        if tensor_value is not None and tensor_value.requires_grad:
            gv = where(mask, g, 0.0).sum().to(tensor_value.device)
        return gx, gv
    if not input.dtype.is_floating:
        return out
    if not isinstance(value, Tensor) and input.dtype in _KERNEL_DTYPES and tuple(out.shape) == tuple(input.shape):
        _note(out, input, mask, value)
    return record(out, "MaskedFill", (input, tensor_value), backward)


def masked_fill_(input, mask, value):
    """In place: input[mask] = value, the mask broadcast to input's shape."""
    value = _check(input, mask, value, "masked_fill_")
    check_inplace(input, "masked_fill_")
    shape = tuple(input.shape)
    if broadcast_shapes(shape, tuple(mask.shape), op="masked_fill_") != shape:
        raise RuntimeError(f"output with shape {list(shape)} doesn't match the broadcast shape "
                           f"{list(broadcast_shapes(shape, tuple(mask.shape)))}")
    if records(input, (value,)):  # in the graph: input becomes masked_fill(its old values)
        return apply_in_place(input, lambda src: masked_fill(src, mask, value), "masked_fill_")
    if (not isinstance(value, Tensor) and input.dtype in _KERNEL_DTYPES and input._view.is_contiguous()
            and input.dtype is not dtypes.float16):
        kernels.masked_fill(input.device.backend, input._view, input._view, expanded_view(mask, shape),
                            _scalar(value, input.dtype))
        note_write(input._view.storage)
        return input
    return assign_(input, _fill(input, mask, value, shape), "masked_fill_")


def softmax_of_masked(x, dim):
    """F.softmax(x, dim) in one kernel where x is a masked_fill's result (made_from) and dim its last; None else.
    The gradient goes to the masked_fill's input."""
    made = made_from(x)
    if made is None or x.ndim == 0 or dim not in (-1, x.ndim - 1):
        return None
    input, mask, value = made
    if input.dtype not in (dtypes.float32, dtypes.float64) or input.device != x.device:
        return None
    shape = tuple(input.shape)
    if len(shape) > 4:  # the kernel walks [d0, d1, d2, cols]: merge the leading dims
        mask = mask.expand(*shape).contiguous().reshape(-1, *shape[-3:])
        shape4 = (-1,) + shape[-3:]
    else:
        shape4 = (1,) * (4 - len(shape)) + shape
    src = input.contiguous().reshape(shape4)
    shape4 = tuple(src.shape)
    mask4 = expanded_view(mask.reshape((1,) * max(0, len(shape4) - mask.ndim) + tuple(mask.shape))
                          if mask.ndim < 4 else mask, shape4)
    y = new(shape4, input.dtype, input.device)
    backend = input.device.backend
    kernels.softmax_masked(backend, y._view, src._view, mask4, float(value))

    def backward(g):
        g = g.reshape(shape4).contiguous()
        gx = new(shape4, g.dtype, g.device)
        kernels.softmax_masked_backward(backend, gx._view, g._view, y._view, mask4)
        return (gx.reshape(shape),)
    return record(y.reshape(shape), "Softmax", (input,), backward)
