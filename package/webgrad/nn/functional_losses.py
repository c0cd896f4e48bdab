"""The losses of torch.nn.functional beyond the common ones (which live in webgrad/ops/loss.py): kl_div,
gaussian_nll_loss, poisson_nll_loss, cosine_embedding_loss, hinge_embedding_loss, margin_ranking_loss,
multi_margin_loss, multilabel_margin_loss, multilabel_soft_margin_loss, soft_margin_loss, triplet_margin_loss and
triplet_margin_with_distance_loss.

Each is PyTorch's formula written with webgrad's differentiable ops, so its gradient comes from them and it runs on
every device. nn.functional re-exports them.
"""

import math
import warnings

from .._autograd import no_grad
from .._tensor import Tensor, arange
from ..ops import elementwise
from ..ops.elementwise import minimum, where
from ..ops.loss import _legacy_reduction

_xlogy = elementwise.function("xlogy")
_logsigmoid = elementwise.function("logsigmoid")


def _reduce(loss, reduction, op):
    if reduction == "none":
        return loss
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    raise ValueError(f"{op}(): {reduction} is not a valid value for reduction")


def _tensors(op, **named):
    for name, t in named.items():
        if not isinstance(t, Tensor):
            raise TypeError(f"{op}(): argument '{name}' must be Tensor, not {type(t).__name__}")
    elementwise.check_same_device(op, *named.values())


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    """The Kullback-Leibler divergence of `target` from the log-probabilities `input` (target as probabilities,
    or log-probabilities with log_target), as torch.nn.functional.kl_div; 'batchmean' divides the sum by the
    batch size."""
    _tensors("kl_div", input=input, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction == "mean":
        warnings.warn("reduction: 'mean' divides the total loss by both the batch size and the support size."
                      "'batchmean' divides only by the batch size, and aligns with the KL div math definition."
                      "'mean' will be changed to behave the same as 'batchmean' in the next major release.",
                      stacklevel=2)
    loss = target.exp() * (target - input) if log_target else _xlogy(target, target) - target * input
    if reduction == "batchmean":
        return loss.sum() / input.shape[0] if input.ndim else loss.sum()
    return _reduce(loss, reduction, "kl_div")


def gaussian_nll_loss(input, target, var, full=False, eps=1e-6, reduction="mean"):
    """The negative log-likelihood of `target` under Gaussians of mean `input` and variance `var` (one per
    element, one per row with the last dim 1 or missing, or a number), as torch.nn.functional.gaussian_nll_loss.
    var is clamped to eps with a straight-through gradient, as torch's."""
    _tensors("gaussian_nll_loss", input=input, target=target)
    if isinstance(var, (int, float)):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = input.new_full(tuple(input.shape), float(var))
    elif bool((var < 0).any().item()):
        raise ValueError("var has negative entry/entries")
    if tuple(var.shape) != tuple(input.shape):
        if tuple(input.shape[:-1]) == tuple(var.shape):
            var = var.unsqueeze(-1)
        elif not (input.ndim == var.ndim and sum(b for a, b in zip(input.shape, var.shape) if a != b) == 1):
            raise ValueError("var is of incorrect size")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    with no_grad():
        lift = var.clamp(min=eps) - var
    var = var + lift  # clamped, its gradient passed through unchanged (torch clamps a clone under no_grad)
    loss = 0.5 * (var.log() + (input - target) ** 2 / var)
    if full:
        loss = loss + 0.5 * math.log(2 * math.pi)
    return _reduce(loss, reduction, "gaussian_nll_loss")


def poisson_nll_loss(input, target, log_input=True, full=False, size_average=None, eps=1e-8, reduce=None,
                     reduction="mean"):
    """The negative log-likelihood of `target` under Poisson distributions of rate exp(input) (log_input) or
    input, with Stirling's approximation of log(target!) where full (for targets above 1), as
    torch.nn.functional.poisson_nll_loss."""
    _tensors("poisson_nll_loss", input=input, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not a valid value for reduction")
    loss = input.exp() - target * input if log_input else input - target * (input + eps).log()
    if full:
        stirling = target * target.log() - target + 0.5 * (2 * math.pi * target).log()
        loss = loss + where(target <= 1, 0.0, stirling)
    return _reduce(loss, reduction, "poisson_nll_loss")


def cosine_embedding_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """1 - cos(input1, input2) where target is 1, max(0, cos - margin) where it is -1 (cosines over the last
    dim), as torch.nn.functional.cosine_embedding_loss."""
    _tensors("cosine_embedding_loss", input1=input1, input2=input2, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    dim = target.ndim
    if dim > 1:
        raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")
    if input1.ndim != dim + 1 or input2.ndim != dim + 1:
        raise RuntimeError(f"{dim + 1}D target tensor expects {dim + 1}D input tensors, but found inputs with sizes "
                           f"{list(input1.shape)} and {list(input2.shape)}.")
    eps = 1e-12
    product = (input1 * input2).sum(dim)
    square1 = (input1 * input1).sum(dim) + eps
    square2 = (input2 * input2).sum(dim) + eps
    cos = product / (square1 * square2).sqrt()
    loss = where(target == 1, 1 - cos, 0.0) + where(target == -1, (cos - margin).clamp(min=0), 0.0)
    return _reduce(loss, reduction, "cosine_embedding_loss")


def hinge_embedding_loss(input, target, margin=1.0, size_average=None, reduce=None, reduction="mean"):
    """input where target is 1, max(0, margin - input) where it is -1, as
    torch.nn.functional.hinge_embedding_loss."""
    _tensors("hinge_embedding_loss", input=input, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = where(target != 1, (margin - input).clamp(min=0), 0.0) + where(target != -1, input, 0.0)
    return _reduce(loss, reduction, "hinge_embedding_loss")


def margin_ranking_loss(input1, input2, target, margin=0.0, size_average=None, reduce=None, reduction="mean"):
    """max(0, -target * (input1 - input2) + margin), as torch.nn.functional.margin_ranking_loss."""
    _tensors("margin_ranking_loss", input1=input1, input2=input2, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if not (input1.ndim == input2.ndim == target.ndim):
        raise RuntimeError(f"margin_ranking_loss : All input tensors should have same dimension but got sizes: "
                           f"input1: {list(input1.shape)}, input2: {list(input2.shape)}, target: {list(target.shape)} ")
    loss = (-target * (input1 - input2) + margin).clamp(min=0)
    return _reduce(loss, reduction, "margin_ranking_loss")


def soft_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """log(1 + exp(-target * input)), as torch.nn.functional.soft_margin_loss."""
    _tensors("soft_margin_loss", input=input, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = (-input * target).exp().log1p()
    return _reduce(loss, reduction, "soft_margin_loss")


def multilabel_soft_margin_loss(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """The mean over classes of each class's logistic loss (targets 0 or 1), as
    torch.nn.functional.multilabel_soft_margin_loss."""
    _tensors("multilabel_soft_margin_loss", input=input, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    loss = -(target * _logsigmoid(input) + (1 - target) * _logsigmoid(-input))
    if weight is not None:
        loss = loss * weight
    class_dim = input.ndim - 1
    loss = loss.sum(class_dim) / input.shape[class_dim]
    return _reduce(loss, reduction, "multilabel_soft_margin_loss")


def _rows(input, target, op):
    """input as [N, C] and target as [N] or [N, C] (a 0-d or 1-d input is one sample)."""
    if input.ndim > 2:
        raise RuntimeError(f"{op}: Expected non-empty vector or matrix with optional 0-dim batch size, but got: "
                           f"{list(input.shape)}")
    if target.dtype.is_floating:
        raise RuntimeError(f"{op}: expected target of an integer dtype, got {target.dtype.name}")
    return input.reshape(1, -1) if input.ndim < 2 else input


def multi_margin_loss(input, target, p=1, margin=1.0, weight=None, size_average=None, reduce=None,
                      reduction="mean"):
    """The multi-class hinge loss: per sample, the sum over classes j other than its target y of
    max(0, margin - x[y] + x[j])^p (times weight[y]), divided by the number of classes, as
    torch.nn.functional.multi_margin_loss."""
    _tensors("multi_margin_loss", input=input, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if p not in (1, 2):
        raise ValueError("only p == 1 and p == 2 supported")
    x = _rows(input, target, "multi_margin_loss")
    n, c = x.shape
    y = target.reshape(-1)
    if y.numel() != n:
        raise RuntimeError(f"inconsistent target size, expected {n} but got {list(target.shape)}")
    y = y.long()
    picked = x.gather(1, y.unsqueeze(1))
    hinge = (margin - picked + x).clamp(min=0)
    if p == 2:
        hinge = hinge * hinge
    if weight is not None:
        hinge = hinge * weight.index_select(0, y).unsqueeze(1)
    others = y.unsqueeze(1) != arange(c, device=x.device)
    loss = where(others, hinge, 0.0).sum(1) / c
    if input.ndim < 2 and reduction == "none":
        loss = loss.reshape(tuple(target.shape)) if target.ndim else loss.reshape(())
    return _reduce(loss, reduction, "multi_margin_loss")


def multilabel_margin_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    """The multi-label hinge loss: per sample, the sum over its target classes j (target's entries up to the first
    -1) and non-target classes k of max(0, 1 - (x[j] - x[k])), divided by the number of classes, as
    torch.nn.functional.multilabel_margin_loss."""
    _tensors("multilabel_margin_loss", input=input, target=target)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    x = _rows(input, target, "multilabel_margin_loss")
    t = target.reshape(x.shape).long()
    c = x.shape[1]
    valid = (t == -1).long().cumsum(1) == 0  # the entries before the first -1
    classes = arange(c, device=x.device)
    is_target = ((t.unsqueeze(2) == classes) & valid.unsqueeze(2)).any(1)  # [N, C]
    picked = x.gather(1, where(valid, t, 0))  # x at each listed target, [N, C (positions)]
    hinge = (1 - picked.unsqueeze(2) + x.unsqueeze(1)).clamp(min=0)  # [N, positions, classes]
    keep = valid.unsqueeze(2) & ~is_target.unsqueeze(1)
    loss = where(keep, hinge, 0.0).sum((1, 2)) / c
    if input.ndim < 2:
        loss = loss.reshape(())
    return _reduce(loss, reduction, "multilabel_margin_loss")


def _pairwise_distance(x1, x2, p=2.0, eps=1e-6, keepdim=False):
    from .functional_layers import pairwise_distance
    return pairwise_distance(x1, x2, p, eps, keepdim)


def _triplet(anchor, positive, negative, distance, margin, swap, reduction, op):
    a, p, n = anchor.ndim, positive.ndim, negative.ndim
    if not a == p == n:
        raise RuntimeError(f"{op}: The anchor, positive, and negative tensors are expected to have the same number of "
                           f"dimensions, but got: anchor {a}D, positive {p}D, and negative {n}D inputs")
    d_pos = distance(anchor, positive)
    d_neg = distance(anchor, negative)
    if swap:
        d_neg = minimum(d_neg, distance(positive, negative))
    loss = (margin + d_pos - d_neg).clamp(min=0)
    return _reduce(loss, reduction, op)


def triplet_margin_loss(anchor, positive, negative, margin=1.0, p=2, eps=1e-6, swap=False, size_average=None,
                        reduce=None, reduction="mean"):
    """max(0, margin + d(anchor, positive) - d(anchor, negative)) with d the p-norm pairwise distance (the
    smaller of d(anchor, negative) and d(positive, negative) with swap), as
    torch.nn.functional.triplet_margin_loss."""
    _tensors("triplet_margin_loss", anchor=anchor, positive=positive, negative=negative)
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if margin <= 0:
        raise ValueError(f"TripletMarginLoss: expected margin to be greater than 0, got {margin} instead")
    return _triplet(anchor, positive, negative, lambda x, y: _pairwise_distance(x, y, p, eps), margin, swap,
                    reduction, "triplet_margin_loss")


def triplet_margin_with_distance_loss(anchor, positive, negative, *, distance_function=None, margin=1.0, swap=False,
                                      reduction="mean"):
    """triplet_margin_loss with any distance function (pairwise_distance by default), as
    torch.nn.functional.triplet_margin_with_distance_loss."""
    _tensors("triplet_margin_with_distance_loss", anchor=anchor, positive=positive, negative=negative)
    if margin <= 0:
        raise ValueError(f"TripletMarginWithDistanceLoss: expected margin to be greater than 0, got {margin} instead")
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return _triplet(anchor, positive, negative, distance_function or _pairwise_distance, margin, swap, reduction,
                    "triplet_margin_with_distance_loss")


__all__ = ["kl_div", "gaussian_nll_loss", "poisson_nll_loss", "cosine_embedding_loss", "hinge_embedding_loss",
           "margin_ranking_loss", "soft_margin_loss", "multilabel_soft_margin_loss", "multi_margin_loss",
           "multilabel_margin_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss"]

