"""Bags of embedding rows, as ATen's ``_embedding_bag`` and its two backward ops: the flat form (1-D indices, bag
starts in offsets) that torch.nn.functional.embedding_bag lowers every call to.

Each bag reduces its rows (sum, mean or max; rows at padding_idx take no part, an empty bag gives zeros) with the
scatter kernels: index_add for sums and counts, index_reduce for maxima. Besides the result, the forward returns
what the backward reads, in ATen's layout: offset2bag (each index's bag), bag_size (rows counted per bag) and, for
max, max_indices (the weight row that won, per bag and column). Indices past the last bag's end (include_last_offset
with offsets[-1] < len(indices)) belong to no bag.
"""

import math

from .. import dtypes
from .._autograd import no_grad
from .._tensor import arange, full, zeros
from .elementwise import where

SUM, MEAN, MAX = 0, 1, 2


def _bag_of(indices, offsets, bags):
    """Each index's bag (int64 [n]): how many bag starts lie at or before it, less one; `bags` for indices after the
    last start when offsets has one more entry than there are bags."""
    n = indices.shape[0]
    marks = zeros(n + 1, dtype=dtypes.int64, device=indices.device)
    starts = offsets.long().clamp(0, n)
    marks = marks.index_add(0, starts, marks.new_ones(starts.shape[0]))
    return marks[:n].cumsum(0) - 1


def _kept(indices, bag_of, bags, padding_idx):
    """Whether each index takes part in its bag (not padding_idx, inside a bag)."""
    keep = bag_of < bags
    if padding_idx >= 0:
        keep = keep & (indices != padding_idx)
    return keep


def embedding_bag(weight, indices, offsets, mode=MEAN, per_sample_weights=None, include_last_offset=False,
                  padding_idx=-1):
    """(output [bags, dim], offset2bag [n], bag_size [bags], max_indices) of ATen's _embedding_bag: mode 0 sum
    (rows scaled by per_sample_weights where given), 1 mean, 2 max; max_indices is [bags, dim] for max, else
    zeros [bags]."""
    with no_grad():
        n, dim = indices.shape[0], weight.shape[1]
        bags = offsets.shape[0] - (1 if include_last_offset else 0)
        device = weight.device
        bag_of = _bag_of(indices, offsets, bags)
        keep = _kept(indices, bag_of, bags, padding_idx)
        # one extra bag collects what belongs to none; it is cut off at the end
        bag_size = zeros(bags + 1, dtype=dtypes.int64, device=device).index_add(0, bag_of, keep.long())[:bags]
        picked = weight.index_select(0, indices.long()) if n else zeros((0, dim), dtype=weight.dtype, device=device)
        if mode == MAX:
            picked = where(keep.unsqueeze(1), picked, -math.inf)
            out = zeros((bags + 1, dim), dtype=weight.dtype, device=device).index_reduce(
                0, bag_of, picked, "amax", include_self=False)
            # the first row of each bag that reaches the maximum, column by column
            hit = (picked == out.index_select(0, bag_of)) & keep.unsqueeze(1)
            position = where(hit, arange(n, device=device).unsqueeze(1), n)
            first = full((bags + 1, dim), n, dtype=dtypes.int64, device=device).index_reduce(
                0, bag_of, position.long(), "amin")
            # (position n, where a column of a bag has no row, reads the zero appended to the indices)
            max_indices = _append_zero(indices.long()).index_select(0, first.reshape(-1)).reshape(
                bags + 1, dim)[:bags].contiguous()
            out = where((bag_size > 0).unsqueeze(1), out[:bags], 0.0).contiguous()
            return out, bag_of, bag_size, max_indices
        if per_sample_weights is not None:
            picked = picked * per_sample_weights.reshape(-1, 1)
        picked = where(keep.unsqueeze(1), picked, 0.0)
        out = zeros((bags + 1, dim), dtype=weight.dtype, device=device).index_add(0, bag_of, picked)[:bags]
        if mode == MEAN:
            out = out / bag_size.clamp(min=1).to(dtype=weight.dtype).unsqueeze(1)
        return out.contiguous(), bag_of, bag_size, zeros(bags, dtype=dtypes.int64, device=device)


def _append_zero(x):
    """x with one more row of zeros (what an index in no bag, or a bag with no row, reads)."""
    from .shape import cat
    return cat([x, zeros((1,) + tuple(x.shape[1:]), dtype=x.dtype, device=x.device)])


def _rows_of(grad, offset2bag, bags):
    """grad's row for each index (zeros for an index in no bag)."""
    return _append_zero(grad).index_select(0, offset2bag.clamp(0, bags))


def embedding_bag_backward(grad, indices, offsets, offset2bag, bag_size, max_indices, num_weights,
                           scale_grad_by_freq=False, mode=MEAN, per_sample_weights=None, padding_idx=-1):
    """The gradient of the weight [num_weights, dim] of embedding_bag, from its saved offset2bag, bag_size and
    max_indices: each index's row receives its bag's gradient (divided by the bag's size for mean, scaled by its
    per-sample weight for sum; by the index's count over all bags with scale_grad_by_freq); for max, each column
    of a bag's gradient goes to the row that won it. Rows at padding_idx get none."""
    with no_grad():
        bags, dim = grad.shape[0], grad.shape[1]
        n = indices.shape[0]
        device = grad.device
        out = zeros((num_weights, dim), dtype=grad.dtype, device=device)
        if mode == MAX:
            won = (bag_size > 0).unsqueeze(1)
            if padding_idx >= 0:
                won = won & (max_indices != padding_idx)
            flat = (max_indices.long() * dim + arange(dim, device=device).unsqueeze(0)).reshape(-1)
            g = where(won, grad, 0.0).reshape(-1)  # (PyTorch refuses scale_grad_by_freq for max)
            return out.reshape(-1).index_add(0, flat, g).reshape(num_weights, dim)
        if not n:
            return out
        if offset2bag.shape[0] != n:  # (ATen leaves it empty where its own forward did not need it)
            offset2bag = _bag_of(indices, offsets, bags)
        keep = _kept(indices, offset2bag, bags, padding_idx)
        rows = _rows_of(grad, offset2bag, bags)
        if mode == MEAN:
            size = _append_zero(bag_size.long()).index_select(0, offset2bag.clamp(0, bags))
            rows = rows / size.clamp(min=1).to(dtype=grad.dtype).unsqueeze(1)
        elif per_sample_weights is not None:
            rows = rows * per_sample_weights.reshape(-1, 1)
        if scale_grad_by_freq:
            rows = rows / index_counts(indices, num_weights, grad.dtype).index_select(0, indices.long()).unsqueeze(1)
        rows = where(keep.unsqueeze(1), rows, 0.0)
        return out.index_add(0, indices.long(), rows)


def index_counts(indices, num_weights, dtype):
    """How often each of num_weights rows is indexed (at least 1: what scale_grad_by_freq divides by)."""
    counts = zeros(num_weights, dtype=dtype, device=indices.device)
    return counts.index_add(0, indices.long(), counts.new_ones(indices.shape[0])).clamp(min=1)


def per_sample_weights_backward(grad, weight, indices, offsets, offset2bag, mode, padding_idx=-1):
    """The gradient of embedding_bag's per_sample_weights (mode sum): each index's bag gradient dotted with its
    weight row; zero at padding_idx."""
    if mode != SUM:
        raise RuntimeError("embedding_bag_backward: per_sample_weights only supported for mode='sum'")
    with no_grad():
        n, bags = indices.shape[0], grad.shape[0]
        if not n:
            return zeros(0, dtype=grad.dtype, device=grad.device)
        if offset2bag.shape[0] != n:
            offset2bag = _bag_of(indices, offsets, bags)
        keep = _kept(indices, offset2bag, bags, padding_idx)
        dots = (_rows_of(grad, offset2bag, bags) * weight.index_select(0, indices.long())).sum(1)
        return where(keep, dots, 0.0)
