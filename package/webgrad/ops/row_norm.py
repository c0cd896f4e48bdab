"""Normalisation over the trailing dims by the fused row kernels (kernels.layer_norm / layer_norm_backward): one
dispatch forward (each row's mean and rstd saved), one backward pass for the input's and the parameters'
gradients. F.layer_norm and F.rms_norm (root-mean-square: no mean, no bias) are both this op."""

from .. import dtypes
from .._autograd import record
from .._backends import kernels
from .._tensor import Tensor


def normalize_rows(x, normalized_shape, weight, bias, eps, rms=False):
    """x normalised over its trailing len(normalized_shape) dims, times weight, plus bias (None: 1 and 0), with
    gradients for all three; x contiguous floating, weight and bias of x's dtype and shape normalized_shape. The
    statistics are float32 (float64 for float64 x: the CPU's gradient checks)."""
    k = len(normalized_shape)
    cols = 1
    for n in normalized_shape:
        cols *= n
    rows = x.numel() // cols if cols else 0
    dtype, device = x.dtype, x.device
    sdtype = dtypes.float64 if dtype is dtypes.float64 else dtypes.float32
    w, b = weight, bias
    out = Tensor._empty(tuple(x.shape), dtype, device)
    save = Tensor._empty((rows, 2), sdtype, device)
    backend = device.backend

    def flat(t, *shape):
        return None if t is None else t._view.reshaped(shape)

    kernels.layer_norm(backend, flat(out, rows, cols), save._view, flat(x, rows, cols), flat(w, cols), flat(b, cols),
                       float(eps), rms=rms)

    def backward(g):
        g = g.to(dtype).contiguous()
        grads = [Tensor._empty(tuple(t.shape), dtype, device) if t is not None and t.requires_grad else None
                 for t in (x, w, b)]
        kernels.layer_norm_backward(backend, flat(grads[0], rows, cols), flat(grads[1], cols), flat(grads[2], cols),
                                    flat(g, rows, cols), flat(x, rows, cols), save._view, flat(w, cols), rms=rms)
        return tuple(grads)

    def composite():  # the definition in differentiable ops, for gradients of gradients (create_graph)
        dims = tuple(range(x.ndim - k, x.ndim))
        centred = x if rms else x - x.mean(dims, keepdim=True)
        y = centred * ((centred * centred).mean(dims, keepdim=True) + eps).rsqrt()
        y = y * w if w is not None else y
        return (y + b if b is not None else y), (x, w, b)
    backward.composite = composite
    return record(out, "NativeRMSNorm" if rms else "NativeLayerNorm", (x, w, b), backward)
