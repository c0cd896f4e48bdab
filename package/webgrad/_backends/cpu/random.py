"""The CPU reference of the counter-based random numbers (kernels.random documents the stream)."""

from .. import kernels
from .arrays import lowbias32, np, write


@kernels.random.implement("cpu")
def random(out, dist, seed, offset, a=0.0, b=1.0):
    n = out.numel
    k = lowbias32(np.array([seed & 0xFFFFFFFF], np.uint32))[0]

    def bits(j):
        return lowbias32(lowbias32(j ^ k) + k)

    c = (np.arange(n, dtype=np.uint64) + offset).astype(np.uint32)
    if dist == "normal":
        two_c = c * np.uint32(2)
        u1 = ((bits(two_c) >> np.uint32(8)).astype(np.float64) + 1.0) * 2.0 ** -24
        u2 = (bits(two_c + np.uint32(1)) >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
        res = a + b * np.sqrt(-2.0 * np.log(u1)) * np.cos(2.0 * np.pi * u2)
    else:
        u = (bits(c) >> np.uint32(8)).astype(np.float64) * 2.0 ** -24
        res = a + (b - a) * u if dist == "uniform" else a + np.floor(u * (b - a))
    write(out, res.reshape(out.shape))
