"""Order statistics and histograms, as torch: kthvalue, median, nanmedian, mode, quantile, nanquantile, histc and
histogram.

The order statistics sort along the dim (kernels.topk, stable, NaN last) and pick positions from the sorted values
with gather, so their gradients go back through the sort to the elements picked (median without a dim shares its
gradient among the elements equal to the median, as torch's). Where torch's choice among tied values is its
selection algorithm's, webgrad picks the first of them in the input's order. histc counts with integer atomics
(kernels.histc); histogram bins with a binary search over its edges (kernels.searchsorted) and adds up the
weights with a scatter.
"""

import builtins
import numbers

from ..return_types import structseq
from .. import dtypes
from .._autograd import record
from .._tensor import Tensor, _norm_dim, arange, full, linspace, tensor, zeros
from .core import cast, check_same_device, new
from .elementwise import where
from .scans import cumsum
from .selection import searchsorted
from .shape import cat
from . import reduce
from .._backends import kernels

kthvalue_result = structseq("kthvalue", ["values", "indices"])  # torch.return_types
median_result = structseq("median", ["values", "indices"])
nanmedian_result = structseq("nanmedian", ["values", "indices"])
mode_result = structseq("mode", ["values", "indices"])
histogram_result = structseq("histogram", ["hist", "bin_edges"])
histogramdd_result = structseq("histogramdd", ["hist", "bin_edges"])


def _check(input, op):
    if not isinstance(input, Tensor):
        raise TypeError(f"{op}(): argument 'input' (position 1) must be Tensor, not {type(input).__name__}")


def _sorted_along(input, dim):
    """(sorted values, their original positions) with dim last, and a function moving a [..., 1] result back to
    input's layout (keepdim or not)."""
    if input.ndim == 0:
        _norm_dim(dim, 1)
        x = input.reshape(1)
        ordered = x.sort(stable=True)

        def back0(t, keepdim):
            return t.reshape(())
        return ordered.values, ordered.indices, back0
    d = _norm_dim(dim, input.ndim)
    moved = input.movedim(d, -1) if d != input.ndim - 1 else input
    ordered = moved.sort(dim=-1, stable=True)

    def back(t, keepdim):
        t = t.movedim(-1, d) if d != input.ndim - 1 else t
        return t if keepdim else t.squeeze(d)
    return ordered.values, ordered.indices, back


def _pick(values, positions, at):
    """values and positions of the sorted rows at `at` ([..., 1] int64 positions along the last dim)."""
    return values.gather(-1, at), positions.gather(-1, at)


def kthvalue(input, k, dim=-1, keepdim=False):
    """The k-th smallest element along dim and its index, as torch.kthvalue."""
    _check(input, "kthvalue")
    n = input.shape[_norm_dim(dim, input.ndim)] if input.ndim else 1
    if not 1 <= k <= n:
        raise RuntimeError(f"kthvalue(): selected number k out of range for dimension {dim}")
    values, positions, back = _sorted_along(input, dim)
    v, i = values.narrow(-1, k - 1, 1), positions.narrow(-1, k - 1, 1)
    return kthvalue_result(back(v, keepdim), back(i, keepdim))


def _median_at(values, ignore_nan):
    """[..., 1] positions of the lower median of each sorted row: the first NaN where a row has one (median),
    among the non-NaN values only (nanmedian; position 0 where all are NaN)."""
    n = values.shape[-1]
    nans = reduce.sum(values.isnan(), -1, keepdim=True)
    if ignore_nan:
        return ((n - nans - 1) // 2).clamp(min=0)
    return where(nans > 0, n - nans, (n - 1) // 2)


def _median(input, dim, keepdim, ignore_nan, result, op):
    _check(input, op)
    if dim is None:
        if input.numel() == 0:
            return tensor(float("nan"), dtype=input.dtype, device=input.device)
        values, _, _ = _sorted_along(input.reshape(-1).detach(), 0)
        out = values.gather(-1, _median_at(values, ignore_nan)).reshape(())
        if not input.dtype.is_floating:
            return out

        def backward(g):  # shared among the elements equal to the median, as torch's
            hit = cast(input == out, g.dtype)
            return (hit * (g / reduce.sum(hit)),)
        return record(out, op.capitalize(), (input,), backward)
    values, positions, back = _sorted_along(input, dim)
    v, i = _pick(values, positions, _median_at(values.detach(), ignore_nan))
    return result(back(v, keepdim), back(i, keepdim))


def median(input, dim=None, keepdim=False):
    """The lower median (NaN where there is a NaN): of every element as a 0-d tensor without dim, else (values,
    indices) along dim, as torch.median."""
    return _median(input, dim, keepdim, False, median_result, "median")


def nanmedian(input, dim=None, keepdim=False):
    """median ignoring NaNs (NaN only where every value is), as torch.nanmedian."""
    return _median(input, dim, keepdim, True, nanmedian_result, "nanmedian")


def mode(input, dim=-1, keepdim=False):
    """The most frequent value along dim (the smallest of the most frequent) and the index of its last occurrence,
    as torch.mode."""
    _check(input, "mode")
    values, positions, back = _sorted_along(input, dim)
    n = values.shape[-1]
    if n == 0:
        raise IndexError(f"mode(): Expected reduction dim {dim} to have non-zero size.")
    flat_values = values.reshape(-1, n)
    rows = flat_values.shape[0]
    v = flat_values.detach()
    edge = full((rows, 1), True, dtype=dtypes.bool_, device=input.device)
    starts = cat([edge, ~(v[:, 1:] == v[:, :-1])], -1) if n > 1 else edge  # where each run of equal values starts
    ends = cat([starts[:, 1:], edge], -1) if n > 1 else edge
    run = cumsum(starts, -1) - 1  # each element's run number
    from .scatter import scatter_add
    lengths = scatter_add(zeros((rows, n), dtype=dtypes.int64, device=input.device), 1, run, run.new_ones((rows, n)))
    # the longest run, the first (smallest value) on ties; its last element is the value's last occurrence
    score = where(ends, lengths.gather(1, run) * (n + 1) + (n - arange(n, dtype=dtypes.int64, device=input.device)),
                  0)
    at = score.argmax(-1, keepdim=True)
    picked, index = _pick(flat_values, positions.reshape(-1, n), at)
    shape = tuple(values.shape[:-1]) + (1,)
    return mode_result(back(picked.reshape(shape), keepdim), back(index.reshape(shape), keepdim))


_INTERPOLATIONS = ("linear", "lower", "higher", "midpoint", "nearest")


def _quantile(input, q, dim, keepdim, interpolation, ignore_nan, op):
    _check(input, op)
    if not input.dtype.is_floating:
        raise RuntimeError(f"{op}() input tensor must be either float or double dtype")
    if interpolation not in _INTERPOLATIONS:
        raise RuntimeError(f"{op}() interpolation must be one of linear, lower, higher, midpoint or nearest. Got "
                           f"{interpolation}")
    scalar_q = not isinstance(q, Tensor)
    if scalar_q:
        if not isinstance(q, numbers.Number):
            raise TypeError(f"{op}(): argument 'q' must be float or Tensor, not {type(q).__name__}")
        if not 0 <= q <= 1:
            raise RuntimeError(f"{op}() q must be in the range [0, 1] but got {q}")
        qs = tensor([float(q)], dtype=input.dtype, device=input.device)
    else:
        check_same_device(op, input, q)
        if q.ndim > 1:
            raise RuntimeError(f"{op}() q must be a scalar or 1D tensor")
        if q.dtype is not input.dtype:
            raise RuntimeError(f"{op}() q tensor must be same dtype as the input tensor")
        qs = q.reshape(-1)
        kernels.check_values(qs.device.backend, qs._view, f"{op}() q values must be in the range [0, 1]",
                             RuntimeError, low=0, high=1, nan=True)
    if input.numel() == 0:
        raise RuntimeError(f"{op}() input tensor must be non-empty")
    if dim is None:
        values, _, _ = _sorted_along(input.reshape(-1), 0)
        out_shape = (1,) * input.ndim if keepdim else ()
    else:
        d = _norm_dim(dim, max(input.ndim, 1))
        values, _, _ = _sorted_along(input, d)
        shape = list(input.shape)
        if input.ndim:
            if keepdim:
                shape[d] = 1
            else:
                del shape[d]
        out_shape = tuple(shape)
    n = values.shape[-1]
    rows = values.reshape(-1, n)  # [R, n]
    nans = reduce.sum(rows.detach().isnan(), -1, keepdim=True)  # [R, 1]
    qq = qs.reshape(-1, 1, 1)  # [Q, 1, 1] (q's gradient flows through the linear weights, as torch's)
    if ignore_nan:
        ranks = (qq * (n - nans - 1)).clamp(min=0)
    else:
        ranks = where(nans > 0, float(n - 1), qq * (n - 1))
    ranks = ranks.expand(qs.shape[0], rows.shape[0], 1)
    if interpolation == "lower":
        ranks = ranks.floor()
    elif interpolation == "higher":
        ranks = ranks.ceil()
    elif interpolation == "nearest":
        ranks = ranks.round()
    below = ranks.floor().long()
    picked = rows.unsqueeze(0).expand(qs.shape[0], rows.shape[0], n)
    result = picked.gather(-1, below)
    if interpolation in ("linear", "midpoint"):
        above = ranks.ceil().long()
        weight = 0.5 if interpolation == "midpoint" else ranks - below
        result = result + weight * (picked.gather(-1, above) - result)
    result = result.reshape((qs.shape[0],) + out_shape)
    result = result.reshape(out_shape) if scalar_q or q.ndim == 0 else result
    return result


def quantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """The q-th quantiles along dim (of every element when None), interpolated as asked, NaN where a slice has a
    NaN, as torch.quantile; a 1-D q puts its dim first."""
    return _quantile(input, q, dim, keepdim, interpolation, False, "quantile")


def nanquantile(input, q, dim=None, keepdim=False, *, interpolation="linear"):
    """quantile ignoring NaNs, as torch.nanquantile."""
    return _quantile(input, q, dim, keepdim, interpolation, True, "nanquantile")


# ===================================================================== histograms
def histc(input, bins=100, min=0, max=0):
    """A histogram of input in `bins` equal bins over [min, max] (the data's range where both are 0), elements
    outside left out, as torch.histc."""
    _check(input, "histc")
    if not input.dtype.is_floating:
        raise RuntimeError(f"\"histogram_cpu\" not implemented for '{input.dtype.name}'")
    if bins <= 0:
        raise RuntimeError(f"torch.histogramdd(): expected each bin count to be positive, but got {bins} for dimension 0")
    low, high = float(min), float(max)
    if low > high:
        raise RuntimeError(f"torch.histogramdd(): expected leftmost edge to be less than or equal to rightmost edge "
                           f"for dimension 0 but got {low} > {high}")
    if low == high and input.numel():
        finite = input.reshape(-1)
        low, high = float(reduce.amin(finite).item()), float(reduce.amax(finite).item())
    if low == high:
        low, high = low - 1, high + 1
    x = input if input.dtype is dtypes.float32 or input.device.type == "cpu" else cast(input, dtypes.float32)
    out = new((bins,), dtypes.float32 if input.device.type != "cpu" else input.dtype, input.device)
    kernels.histc(input.device.backend, out._view, x._view, low, high)
    return out if out.dtype is input.dtype else cast(out, input.dtype)


def _edges(values, bins, span, dtype, device, one_dim=False):
    """Bin edges over `values`: the given 1-D tensor, or `bins` equal bins of span (the values' range by default;
    a single value v gives [v - 0.5, v + 0.5]). one_dim: histogram's wording of the errors, else histogramdd's."""
    if isinstance(bins, Tensor):
        if bins.ndim != 1:
            what = "bins[0] to be a 1D tensor" if one_dim else "bins to be 1D tensors"
            raise RuntimeError(f"torch.histogramdd(): expected {what}, but got {bins.ndim}D")
        return bins
    if bins <= 0:
        raise RuntimeError(f"torch.histogramdd(): expected each bin count to be positive, but got {bins}")
    if span is not None:
        low, high = float(span[0]), float(span[1])
    elif values.numel():
        low, high = float(reduce.amin(values).item()), float(reduce.amax(values).item())
    else:
        low, high = 0.0, 0.0
    if low > high:
        raise RuntimeError("torch.histogramdd(): expected leftmost edge to be less than or equal to rightmost edge"
                           f"{' for dimension 0' if one_dim else ','} but got {low} > {high}")
    if low == high:
        low, high = low - 0.5, high + 0.5
    return linspace(low, high, bins + 1, dtype=dtype, device=device)


def _bin_of(values, edges):
    """Each value's bin among the edges (the last bin includes its right edge) and whether it falls in one."""
    count = edges.shape[0] - 1
    at = searchsorted(edges, values, right=True) - 1
    last = edges[-1]
    at = where(values == last, count - 1, at)
    inside = (values >= edges[0]) & (values <= last) & (at >= 0) & (at < count)
    return where(inside, at, 0), inside


def histogramdd(input, bins, *, range=None, weight=None, density=False):
    """(hist, bin_edges): the D-dimensional histogram of the points input[..., D], with bins per dim (a count, a
    list of counts or a list of 1-D edge tensors), ranges as [low0, high0, low1, ...], weights and density, as
    torch.histogramdd."""
    _check(input, "histogramdd")
    if not input.dtype.is_floating or input.ndim < 1:
        raise RuntimeError("torch.histogramdd(): expected a floating point input of at least 1 dimension")
    d = input.shape[-1]
    points = input.reshape(-1, d)
    per_dim = list(bins) if isinstance(bins, (list, tuple)) else [bins] * d
    if len(per_dim) != d:
        raise RuntimeError(f"torch.histogramdd(): expected {d} sequences of bin edges for each of the {d} dimensions "
                           f"of the input, but got {len(per_dim)}")
    spans = [None] * d if range is None else [range[2 * i:2 * i + 2] for i in builtins.range(d)]
    edges = [_edges(points[:, i], per_dim[i], spans[i], input.dtype, input.device) for i in builtins.range(d)]
    counts = [e.shape[0] - 1 for e in edges]
    total = 1
    for c in counts:
        total *= max(c, 0)
    hist = zeros(total, dtype=input.dtype, device=input.device)
    if total and points.shape[0]:
        flat, keep = None, None
        for i in builtins.range(d):
            at, inside = _bin_of(points[:, i], edges[i])
            flat = at if flat is None else flat * counts[i] + at
            keep = inside if keep is None else keep & inside
        w = weight.reshape(-1) if weight is not None else points.new_ones(points.shape[0])
        from .scatter import index_add
        hist = index_add(hist, 0, flat, where(keep, w, 0.0))
    hist = hist.reshape(tuple(counts))
    if density:
        volume = None
        for i, e in enumerate(edges):
            widths = (e[1:] - e[:-1]).reshape((-1,) + (1,) * (d - 1 - i))
            volume = widths if volume is None else volume * widths
        hist = hist / (reduce.sum(hist) * volume)
    return histogramdd_result(hist, tuple(edges))


def histogram(input, bins, *, range=None, weight=None, density=False):
    """(hist, bin_edges): a histogram of input's elements over `bins` equal bins of [range] (the data's range by
    default) or over the given 1-D bin edges, weighted and normalised to a density where asked, as
    torch.histogram."""
    _check(input, "histogram")
    if not input.dtype.is_floating:
        raise RuntimeError(f"torch.histogram: input tensor and bins tensors should have the same dtype, but got "
                           f"input {input.dtype.name} and bins float")
    flat = input.reshape(-1)
    edges = _edges(flat, bins, range, input.dtype, input.device, one_dim=True)
    m = edges.shape[0]
    count = m - 1
    w = weight.reshape(-1) if weight is not None else None
    hist = zeros(count if count > 0 else 0, dtype=input.dtype, device=input.device)
    if count > 0 and flat.numel():
        at = searchsorted(edges, flat, right=True) - 1
        last = edges[-1]
        at = where(flat == last, count - 1, at)  # the last bin includes its right edge
        inside = (flat >= edges[0]) & (flat <= last) & (at >= 0) & (at < count)
        ones = w if w is not None else flat.new_ones(flat.shape[0])
        from .scatter import index_add
        hist = index_add(hist, 0, where(inside, at, 0), where(inside, ones, 0.0))
    if density:
        widths = edges[1:] - edges[:-1]
        hist = hist / (reduce.sum(hist) * widths)
    return histogram_result(hist, edges)
