"""The CPU reference of masked_fill, and the dropout draw the transformer kernels share."""

from .. import kernels
from .arrays import array, lowbias32, np, write


@kernels.masked_fill.implement("cpu")
def masked_fill(out, x, mask, value):
    write(out, np.where(array(mask), value, array(x)))


def keep_mask(seed, offset, n, p):
    """Which of n draws from (seed, offset) dropout keeps: u(offset + i) >= p, u as kernels.random's uniform,
    compared in float32 (kernels.py's transformer section)."""
    k = lowbias32(np.array([int(seed) & 0xFFFFFFFF], np.uint32))[0]
    c = ((np.arange(n, dtype=np.uint64) + (int(offset) & 0xFFFFFFFF)) & 0xFFFFFFFF).astype(np.uint32)
    u = (lowbias32(lowbias32(c ^ k) + k) >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
    return u >= float(np.float32(p))


@kernels.dropout.implement("cpu")
def dropout(out, x, p, seed, offset):
    keep = keep_mask(seed, offset, out.numel, p).reshape(out.shape)
    v = array(x)
    scale = np.asarray(1.0 / (1.0 - p), v.dtype)  # (rounded to x's dtype first, as x * (1 / (1 - p)))
    with np.errstate(invalid="ignore", over="ignore"):
        write(out, np.where(keep, v * scale, 0))
