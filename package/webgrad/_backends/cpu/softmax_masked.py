"""The CPU reference of the masked softmax of hand-written attention (kernels.softmax_masked and its backward)."""

from .. import kernels
from .arrays import array, f64, np, write


@kernels.softmax_masked.implement("cpu")
def softmax_masked(out, x, mask, value, scale=1.0):
    s = f64(x) * scale
    if mask is not None:
        s = np.where(array(mask), value, s)
    with np.errstate(invalid="ignore"):
        m = s.max(axis=-1, keepdims=True)
        e = np.exp(s - m)
        write(out, e / e.sum(axis=-1, keepdims=True))


@kernels.softmax_masked_backward.implement("cpu")
def softmax_masked_backward(out, grad, y, mask, scale=1.0):
    g, yv = f64(grad), f64(y)
    d = scale * yv * (g - (g * yv).sum(axis=-1, keepdims=True))
    if mask is not None:
        d = np.where(array(mask), 0.0, d)
    write(out, d)
