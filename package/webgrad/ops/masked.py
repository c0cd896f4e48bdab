"""masked_fill and masked_fill_, as torch.masked_fill: `value` where a bool mask is True, else the input.

A Python value is one masked_fill kernel (no tensor made for it), and so is the gradient (zero where masked);
a 0-d tensor value goes through where, so that it gets its gradient (the sum over the masked places)."""

import numbers

from .. import dtypes
from .._autograd import no_grad, record
from .._tensor import Tensor
from .core import broadcast_shapes, cast, check_same_device, expanded_view, new, unbroadcast
from .elementwise import where
from .inplace import assign_, check_inplace
from .._backends import kernels

# dtypes the masked_fill kernel writes (the CPU writes any; WebGPU float32 and int32, float16 through float32);
# other dtypes (bool, uint8) take where
_KERNEL_DTYPES = (dtypes.float16, dtypes.float32, dtypes.float64, dtypes.int32)


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


def masked_fill(input, mask, value):
    """`value` where `mask` (bool, broadcast with input) is True, else input; the result has input's dtype and the
    broadcast shape. Its gradient is zero where masked; a 0-d tensor `value` gets the sum over the masked places."""
    _check(input, mask, value, "masked_fill")
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
    return record(out, "MaskedFill", (input, tensor_value), backward)


def masked_fill_(input, mask, value):
    """In place: input[mask] = value, the mask broadcast to input's shape."""
    _check(input, mask, value, "masked_fill_")
    check_inplace(input, "masked_fill_")
    shape = tuple(input.shape)
    if broadcast_shapes(shape, tuple(mask.shape), op="masked_fill_") != shape:
        raise RuntimeError(f"output with shape {list(shape)} doesn't match the broadcast shape "
                           f"{list(broadcast_shapes(shape, tuple(mask.shape)))}")
    if (not isinstance(value, Tensor) and input.dtype in _KERNEL_DTYPES and input._view.is_contiguous()
            and input.dtype is not dtypes.float16):
        kernels.masked_fill(input.device.backend, input._view, input._view, expanded_view(mask, shape),
                            _scalar(value, input.dtype))
        return input
    return assign_(input, _fill(input, mask, value, shape), "masked_fill_")
