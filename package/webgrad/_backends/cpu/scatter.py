"""The CPU reference of the scatters, stream compaction, the scans other than sums, histc and searchsorted."""

from ... import _bounds
from .. import kernels
from .arrays import array, checked, np, write

SCATTER = "scatter(): index {value} is out of bounds for a dimension of size {size}"


def _targets(index, outer, size, inner, k):
    """The index as [outer, K, inner] intp positions along size (a [K] index repeated over outer and inner)."""
    idx = checked(array(index), size, _bounds.template(SCATTER))
    return np.broadcast_to(idx.reshape(1, k, 1), (outer, k, inner)) if idx.ndim == 1 else idx


@kernels.scatter_reduce.implement("cpu")
def scatter_reduce(out, x, src, index, reduce, include_self=True):
    xv, sv = array(x), array(src)
    outer, size, inner = xv.shape
    k = sv.shape[1]
    idx = _targets(index, outer, size, inner, k)
    floating = xv.dtype.kind == "f"
    res = xv.astype(np.float64 if floating else np.int64)
    values = sv.astype(res.dtype)
    o, _, i = np.indices(idx.shape, sparse=True)
    where = (o, idx, i)
    if reduce == "assign":
        # the last write in index order wins: keep each target's last occurrence
        flat = ((o * size + idx) * inner + i).reshape(-1)
        last = flat.size - 1 - np.unique(flat[::-1], return_index=True)[1]
        res.reshape(-1)[flat[last]] = values.reshape(-1)[last]
        write(out, res)
        return
    count = np.zeros(res.shape, np.int64)
    np.add.at(count, where, 1)
    touched = count > 0
    if not include_self:
        if reduce in ("sum", "mean"):
            identity = 0
        elif reduce == "prod":
            identity = 1
        elif floating:
            identity = -np.inf if reduce == "amax" else np.inf
        else:
            info = np.iinfo(np.int64)
            identity = info.min if reduce == "amax" else info.max
        res[touched] = identity
    ufunc = {"sum": np.add, "mean": np.add, "prod": np.multiply, "amax": np.maximum, "amin": np.minimum}[reduce]
    ufunc.at(res, where, values)
    if reduce == "mean":
        n = np.where(touched, count + (1 if include_self else 0), 1)
        res = res / n if floating else np.floor_divide(res, n)
    write(out, res)


@kernels.compact.implement("cpu")
def compact(out, x, positions):
    pos = array(positions).astype(np.int64)
    keep = np.diff(np.concatenate([[0], pos])) > 0
    write(out, array(x)[keep])


@kernels.scan.implement("cpu")
def scan(op, out, x, indices=None):
    v = array(x)
    if op == "prod":
        write(out, np.cumprod(v.astype(np.float64) if v.dtype.kind == "f" else v.astype(np.int64), axis=1))
        return
    if op == "logaddexp":
        write(out, np.logaddexp.accumulate(v.astype(np.float64), axis=1))
        return
    outer, size, inner = v.shape
    best = v[:, 0, :].copy()
    where = np.zeros((outer, inner), np.int64)
    values, positions = np.empty_like(v), np.empty(v.shape, np.int64)
    floating = v.dtype.kind == "f"
    for k in range(size):
        cur = v[:, k, :]
        beats = cur >= best if op == "max" else cur <= best
        if floating:
            beats = np.isnan(cur) | (~np.isnan(best) & beats)
        best = np.where(beats, cur, best)
        where = np.where(beats, k, where)
        values[:, k, :], positions[:, k, :] = best, where
    write(out, values)
    if indices is not None:
        write(indices, positions)


@kernels.histc.implement("cpu")
def histc(out, x, low, high):
    v = array(x).astype(np.float64).reshape(-1)
    bins = out.shape[0]
    inside = (v >= low) & (v <= high)
    # bin positions as float32 arithmetic gives them (torch's CPU computes in the input's dtype)
    at = np.floor((v[inside].astype(np.float32) - np.float32(low)) * np.float32(bins)
                  / (np.float32(high) - np.float32(low))).astype(np.int64)
    at = np.minimum(at, bins - 1)
    write(out, np.bincount(at, minlength=bins)[:bins])


@kernels.searchsorted.implement("cpu")
def searchsorted(out, sorted, values, right=False):
    s, v = array(sorted), array(values)
    rows, m = s.shape
    lo = np.zeros(v.shape, np.int64)
    hi = np.full(v.shape, m, np.int64)
    row = np.arange(rows).reshape(-1, 1)
    with np.errstate(invalid="ignore"):
        while (lo < hi).any():
            active = lo < hi
            mid = (lo + hi) // 2
            at = s[row, np.minimum(mid, m - 1)] if m else v
            # torch's bounds: the search goes right unless the entry is >= (right: >) the value, so a NaN on either
            # side sends it right
            goes_right = ~(at > v) if right else ~(at >= v)
            lo = np.where(active & goes_right, mid + 1, lo)
            hi = np.where(active & ~goes_right, mid, hi)
    write(out, lo)
