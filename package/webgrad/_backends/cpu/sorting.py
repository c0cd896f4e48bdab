"""The CPU reference of topk (kernels.topk: the order of sort, argsort and topk on every backend)."""

from .. import kernels
from .arrays import array, np, write


def order_keys(v):
    """Unsigned keys that order the rows of v as kernels.topk's smallest-first order: NaN above every number,
    -0.0 equal to 0.0. Floats through their float64 bits (every float converts exactly), integers shifted."""
    if v.dtype.kind == "f":
        bits = v.astype(np.float64).view(np.uint64)
        sign = np.uint64(1 << 63)
        bits = np.where(bits == sign, np.uint64(0), bits)  # -0.0 as 0.0
        keys = np.where(bits & sign, ~bits, bits | sign)
        return np.where(np.isnan(v), np.uint64(2**64 - 1), keys)
    return (v.astype(np.int64).view(np.uint64) ^ np.uint64(1 << 63))


@kernels.topk.implement("cpu")
def topk(values, indices, x, k, largest=True):
    v = array(x)
    keys = order_keys(v)
    if largest:
        keys = ~keys
    # stable: equal keys keep their order in the row
    order = np.argsort(keys, axis=1, kind="stable")[:, :k]
    write(indices, order)
    write(values, np.take_along_axis(v, order, axis=1))
