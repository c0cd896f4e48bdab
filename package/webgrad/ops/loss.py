"""Losses, as torch.nn.functional.

Softmax cross-entropy is fused: forward and backward are one kernel each (the step's hot spot); the forward keeps
each row's log-sum-exp, so the backward makes the gradient in one pass over the logits, however wide the rows. The
other losses are short compositions of differentiable ops, so their gradients come from those ops;
binary_cross_entropy has its own backward to match PyTorch's clamped gradient at 0 and 1.
"""

import functools
import warnings

from .. import _bounds, dtypes
from .._autograd import no_grad, record
from .._tensor import Tensor
from .._view import View
from .elementwise import check_same_device, function, new, where
from .autocast_policy import full_precision
from .reduce import log_softmax
from .._backends import kernels

softplus = function("softplus")


def _grad_fn_named(name):
    """Name the graph node of the loss's result as PyTorch names it (NllLossBackward0, BinaryCrossEntropy...):
    the loss is a composition here, whose last op (a sum, a mean, a where) would otherwise name it. Only the
    node the loss made is renamed, never one of its inputs'."""
    def wrap(fn):
        @functools.wraps(fn)
        def named(*args, **kwargs):
            out = fn(*args, **kwargs)
            node = getattr(out, "grad_fn", None)
            if node is not None and not any(node is getattr(a, "grad_fn", None) for a in args):
                node.name = name
            return out
        return named
    return wrap


def _reduce_rows(per_row, reduction, count):
    if reduction == "none":
        return per_row
    if reduction == "sum":
        return per_row.sum()
    if reduction == "mean":
        return per_row.sum() / count
    raise ValueError(f"reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def _half_cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """cross_entropy inside autocast with float16 arguments: float16 [N, C] logits with class indices take the
    fused kernels as they are (read into float32; a float32 loss, and a float16 gradient rounded once, as the
    cast's backward would give), so the half logits, not a float32 copy, wait for the backward. Other forms
    take float32 casts."""
    if input.dtype is dtypes.float16 and input.ndim == 2 and weight is None and isinstance(target, Tensor) and \
            not target.dtype.is_floating:
        with _bounds.reporting(_bounds.CROSS_ENTROPY):
            return _cross_entropy(input, target, None, ignore_index, reduction, label_smoothing, result=dtypes.float32)
    input, weight = (t.float() if isinstance(t, Tensor) and t.dtype is dtypes.float16 else t for t in (input, weight))
    return cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)


@full_precision("cross_entropy", reads_half=_half_cross_entropy)
@_grad_fn_named("NllLoss")
def cross_entropy(input, target, weight=None, ignore_index=-100, reduction="mean", label_smoothing=0.0):
    """Softmax cross-entropy with class-index targets, as torch.nn.functional.cross_entropy.

    input: [N, C] or [N, C, d1, ...] logits (or [C] for a single sample); target: int [N] / [N, d1, ...].
    A target outside [0, C) other than ignore_index raises IndexError: at once on the CPU, at the next
    read-back on WebGPU (see webgrad/_bounds.py).
    """
    with _bounds.reporting(_bounds.CROSS_ENTROPY):
        return _cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)


def _cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing, result=None):
    """result: the loss's dtype where it is not the logits' (float32 for autocast's float16 logits)."""
    if isinstance(target, Tensor) and target.dtype.is_floating:
        return _probability_cross_entropy(input, target, weight, reduction, label_smoothing)
    if weight is not None:
        return _weighted_cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing)
    if not isinstance(target, Tensor) or target.dtype.is_floating:
        raise TypeError("cross_entropy(): target must be an integer tensor of class indices "
                        "(probability targets are not supported yet)")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    if input.ndim == 1:
        return cross_entropy(input.unsqueeze(0), target.reshape(1), None, ignore_index, reduction, label_smoothing) \
            .reshape(() if reduction != "none" else ())
    if input.ndim > 2:  # [N, C, d...] -> [N*d..., C]
        c = input.shape[1]
        spatial = tuple(input.shape[2:])
        moved = input.movedim(1, -1).reshape(-1, c)
        per = cross_entropy(moved, target.reshape(-1), None, ignore_index, "none", label_smoothing)
        if reduction == "none":
            return per.reshape(input.shape[0], *spatial)
        valid = (target != ignore_index).sum().float()
        return _reduce_rows(per, reduction, valid)
    n, c = input.shape
    if tuple(target.shape) != (n,):
        raise ValueError(f"cross_entropy(): expected target of shape [{n}] for input of shape {list(input.shape)}, "
                         f"got {list(target.shape)}")
    if target.device != input.device:
        raise RuntimeError(f"cross_entropy(): input is on {input.device} but target is on {target.device}")
    logits = (input if input.dtype.is_floating else input.float()).contiguous()
    tgt = _class_indices(target).contiguous()
    backend = logits.device.backend

    # each row's log-sum-exp, kept for the backward where logits need a gradient: exp(logits - lse) is the softmax,
    # so the backward reads the logits once and writes their gradient once (a vocabulary of 50,257: no reduction)
    lse = new((n,), dtypes.float32 if logits.dtype is dtypes.float16 else logits.dtype, logits.device) \
        if logits.requires_grad else None
    lse_view = None if lse is None else lse._view

    def backward_rows(g_rows):  # the gradient for upstream per-row gradients g_rows ([n], any stride >= 0)
        out = new((n, c), logits.dtype, logits.device)
        kernels.cross_entropy_backward(backend, out._view, logits._view, tgt._view, g_rows._view, ignore_index,
                                       float(label_smoothing), lse_view)
        return out

    def composed_rows():  # each row's loss in differentiable ops, for gradients of gradients (create_graph)
        logp = log_softmax(logits.float() if logits.dtype is dtypes.float16 else logits, 1)
        valid = tgt != ignore_index
        picked = logp.gather(1, where(valid, tgt, 0).unsqueeze(1)).squeeze(1)
        rows = -(1.0 - label_smoothing) * picked - (label_smoothing / c) * logp.sum(1)
        return rows * valid.to(rows.dtype)

    if reduction != "mean":
        per_row = new((n,), result or logits.dtype, logits.device)
        kernels.cross_entropy(backend, per_row._view, logits._view, tgt._view, ignore_index, float(label_smoothing),
                              lse_view)

        def rows_backward(g):
            return (backward_rows(g.contiguous()),)
        rows_backward.composite = lambda: (composed_rows(), (logits,))
        record(per_row, "CrossEntropy", (logits,), rows_backward)
        return _reduce_rows(per_row, reduction, n)
    # PyTorch's mean divides by the number of rows whose target is not ignore_index (the default -100 marks
    # padding). The backend writes (mean, count) on the device: no read-back, and for a classifier's batch
    # one dispatch (webgpu: softmax_loss.cross_entropy_mean). Both are read as 0-d tensors of that storage.
    pair = new((2,), result or logits.dtype, logits.device)._view
    kernels.cross_entropy_mean(backend, pair, logits._view, tgt._view, ignore_index, float(label_smoothing), lse_view)
    loss, count = (Tensor._make(View(pair.storage, (), (), pair.offset + i, pair.dtype), logits.device) for i in (0, 1))
    # every row's loss enters the mean with weight 1 / count: the upstream gradient, broadcast over the rows
    def mean_backward(g):
        return (backward_rows((g / count).reshape(1).expand(n)),)
    mean_backward.composite = lambda: (composed_rows().sum() / count.detach(), (logits,))
    return record(loss, "CrossEntropy", (logits,), mean_backward)


def _probability_cross_entropy(input, target, weight, reduction, label_smoothing):
    """cross_entropy with class probabilities as target (input's shape): -sum_c w_c t_c log_softmax(x)_c per
    sample, the targets mixed with the uniform distribution by label_smoothing; mean divides by the number of
    samples (not by the weights), as PyTorch."""
    if tuple(target.shape) != tuple(input.shape):
        raise RuntimeError(f"cross_entropy(): class probability targets must have the input's shape "
                           f"{list(input.shape)}, got {list(target.shape)}")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0, got {label_smoothing}")
    check_same_device("cross_entropy", input, target, weight)
    class_dim = 0 if input.ndim == 1 else 1
    c = input.shape[class_dim]
    if weight is not None and tuple(weight.shape) != (c,):
        raise RuntimeError(f"cross_entropy(): weight must have one entry per class, shape [{c}], got "
                           f"{list(weight.shape)}")
    t = target * (1.0 - label_smoothing) + label_smoothing / c if label_smoothing else target
    terms = log_softmax(input, dim=class_dim) * t
    if weight is not None:
        terms = terms * weight.reshape((c,) + (1,) * (input.ndim - class_dim - 1))
    per_sample = -terms.sum(class_dim)
    if reduction == "none":
        return per_sample
    if reduction == "sum":
        return per_sample.sum()
    if reduction == "mean":
        return per_sample.sum() / (input.numel() // c if c else 0)
    raise ValueError(f"reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def _weighted_cross_entropy(input, target, weight, ignore_index, reduction, label_smoothing):
    """cross_entropy with class weights: log_softmax + nll_loss, plus PyTorch's weighted smoothing term
    (-sum_c w_c logp_c per sample, normalised like the nll part: by the summed weights of the targets)."""
    if input.ndim == 1:
        out = _weighted_cross_entropy(input.unsqueeze(0), target.reshape(1), weight, ignore_index, reduction,
                                      label_smoothing)
        return out.reshape(()) if reduction == "none" else out
    logp = log_softmax(input, dim=1)
    loss = nll_loss(logp, target, weight, ignore_index=ignore_index, reduction=reduction)
    if not label_smoothing:
        return loss
    c = input.shape[1]
    w = weight.to(dtype=logp.dtype).reshape((1, c) + (1,) * (input.ndim - 2))
    valid = target != ignore_index
    smooth = where(valid, -(logp * w).sum(1), 0.0)
    if reduction == "mean":
        picked = weight.to(dtype=logp.dtype).index_select(0, where(valid, _class_indices(target), 0).reshape(-1))
        smooth = smooth.sum() / where(valid.reshape(-1), picked, 0.0).sum()
    elif reduction == "sum":
        smooth = smooth.sum()
    return loss * (1.0 - label_smoothing) + smooth * (label_smoothing / c)


def _class_indices(target):
    """Class-index targets as the kernels read them: int64 (PyTorch's) and int32 as they are, bool and uint8
    widened to int32."""
    return target if target.dtype in (dtypes.int64, dtypes.int32) else target.int()


def _legacy_reduction(size_average, reduce, reduction):
    """PyTorch's deprecated size_average/reduce flags, mapped onto `reduction`."""
    if size_average is None and reduce is None:
        return reduction
    size_average = True if size_average is None else size_average
    reduce = True if reduce is None else reduce
    return "mean" if size_average and reduce else ("sum" if reduce else "none")


def _reduce(loss, reduction, op, weight=None):
    """Apply `reduction`; with an elementwise `weight`, mean is sum(w * loss) / sum(w), as PyTorch."""
    if weight is not None:
        if tuple(weight.shape) != tuple(loss.shape):
            raise ValueError(f"{op}(): weight of shape {list(weight.shape)} must have the input's shape {list(loss.shape)}")
        loss = loss * weight
    if reduction == "none":
        return loss
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / weight.sum() if weight is not None else loss.mean()
    raise ValueError(f"{op}(): reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


def _check_pair(input, target, op):
    if not isinstance(input, Tensor) or not isinstance(target, Tensor):
        raise TypeError(f"{op}(): expected input and target Tensors, got {type(input).__name__} and {type(target).__name__}")
    if tuple(target.shape) != tuple(input.shape):
        warnings.warn(f"{op}(): using a target size ({list(target.shape)}) that is different to the input size "
                      f"({list(input.shape)}). This will likely lead to incorrect results due to broadcasting. "
                      "Please ensure they have the same size.", stacklevel=3)


@full_precision("nll_loss")
@_grad_fn_named("NllLoss")
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None, reduction="mean"):
    """Negative log-likelihood of class indices. input: log-probabilities [N, C], [N, C, d1, ...] or [C];
    target: int [N], [N, d1, ...] or []. mean divides by the summed weights of the non-ignored targets.
    A target outside [0, C) other than ignore_index raises IndexError, as in cross_entropy."""
    with _bounds.reporting("nll_loss: target {value} is out of bounds for {size} classes"):
        return _nll_loss(input, target, weight, _legacy_reduction(size_average, reduce, reduction), ignore_index)


def _nll_loss(input, target, weight, reduction, ignore_index):
    if not isinstance(target, Tensor) or target.dtype.is_floating:
        raise TypeError("nll_loss(): target must be an integer tensor of class indices")
    if input.ndim == 1:
        out = _nll_loss(input.unsqueeze(0), target.reshape(1), weight, reduction, ignore_index)
        return out.reshape(()) if reduction == "none" else out
    n, c = input.shape[0], input.shape[1]
    expected = (n,) + tuple(input.shape[2:])
    if tuple(target.shape) != expected:
        raise ValueError(f"nll_loss(): expected target of shape {list(expected)} for input of shape "
                         f"{list(input.shape)}, got {list(target.shape)}")
    if weight is not None and tuple(weight.shape) != (c,):
        raise RuntimeError(f"nll_loss(): weight must have one entry per class, shape [{c}], got {list(weight.shape)}")
    check_same_device("nll_loss", input, target, weight)
    rows = input.movedim(1, -1).reshape(-1, c) if input.ndim > 2 else input
    t = _class_indices(target.reshape(-1))
    valid = t != ignore_index
    safe = where(valid, t, 0)  # ignored rows read class 0, then get weight 0
    w = valid.to(dtype=input.dtype)
    if weight is not None:
        w = w * weight.to(dtype=input.dtype).index_select(0, safe)
    loss = -rows.gather(1, safe.unsqueeze(1)).squeeze(1) * w
    if reduction == "none":
        return loss.reshape(expected)
    if reduction == "sum":
        return loss.sum()
    if reduction == "mean":
        return loss.sum() / w.sum()
    raise ValueError(f"nll_loss(): reduction must be 'none', 'mean' or 'sum', got {reduction!r}")


@full_precision("mse_loss")
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _check_pair(input, target, "mse_loss")
    reduction = _legacy_reduction(size_average, reduce, reduction)
    with no_grad():  # one graph node, MseLossBackward0 as PyTorch's (its next_functions reach the input's)
        d = input - target
        out = _reduce(d * d, reduction, "mse_loss", weight)

    def backward(g):  # 2 d w g, of the inputs themselves (so create_graph differentiates it again)
        d = input - target
        if reduction != "none":
            g = g.expand(d.shape)
        if reduction == "mean":
            g = g / weight.sum() if weight is not None else g * (1.0 / d.numel() if d.numel() else float("nan"))
        grad = d * g * 2.0 if weight is None else d * g * weight * 2.0
        return tuple((grad.sum_to_size(t.shape) * sign).to(t.dtype) if getattr(t, "requires_grad", False) else None
                     for t, sign in ((input, 1.0), (target, -1.0)))
    return record(out, "MseLoss", (input, target), backward)


@full_precision("l1_loss")
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _check_pair(input, target, "l1_loss")
    return _reduce((input - target).abs(), _legacy_reduction(size_average, reduce, reduction), "l1_loss", weight)


@full_precision("smooth_l1_loss")
@_grad_fn_named("SmoothL1Loss")
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    """0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta (plain L1 when beta == 0)."""
    _check_pair(input, target, "smooth_l1_loss")
    if beta < 0:
        raise RuntimeError(f"smooth_l1_loss(): beta must be non-negative, got {beta}")
    d = (input - target).abs()
    loss = d if beta == 0 else where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, _legacy_reduction(size_average, reduce, reduction), "smooth_l1_loss")


@full_precision("huber_loss")
@_grad_fn_named("HuberLoss")
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    """0.5 d^2 where |d| < delta, else delta * (|d| - 0.5 delta)."""
    _check_pair(input, target, "huber_loss")
    if delta <= 0:
        raise RuntimeError(f"huber_loss(): delta must be positive, got {delta}")
    d = (input - target).abs()
    return _reduce(where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta), reduction, "huber_loss", weight)


@full_precision("binary_cross_entropy")
@_grad_fn_named("BinaryCrossEntropy")
def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    """-w (y log x + (1 - y) log(1 - x)), each log clamped at -100 as PyTorch (so x = 0 or 1 stays finite).
    The gradient is PyTorch's w (x - y) / max(x (1 - x), 1e-12): finite at 0 and 1, where the composed
    ops' would be 0 * inf."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"binary_cross_entropy(): using a target size ({list(target.shape)}) that is different to the "
                         f"input size ({list(input.shape)}) is not allowed; please ensure they have the same size")
    for t, name in ((input, "input"), (target, "target")):  # NaN fails too (the CPU raises here, WebGPU at a read-back)
        kernels.check_values(t.device.backend, t._view, f"binary_cross_entropy(): all elements of {name} should be "
                             "between 0 and 1 (element {value} of {size} is not)", RuntimeError, low=0.0, high=1.0)
    with no_grad():
        log_x = input.log().clamp(min=-100.0)
        log_1mx = (1.0 - input).log().clamp(min=-100.0)
        loss = -(target * log_x + (1.0 - target) * log_1mx)

    def backward(g):
        gx = g * (input - target) / (input * (1.0 - input)).clamp(min=1e-12) if input.requires_grad else None
        gy = g * (log_1mx - log_x) if target.requires_grad else None
        return gx, gy
    loss = record(loss, "BinaryCrossEntropy", (input, target), backward)
    return _reduce(loss if weight is None else loss * weight, reduction, "binary_cross_entropy")


@full_precision("binary_cross_entropy_with_logits")
@_grad_fn_named("BinaryCrossEntropyWithLogits")
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None, reduction="mean",
                                     pos_weight=None):
    """BCE of sigmoid(input), computed stably as (1 - y) x + (1 + (pos_weight - 1) y) softplus(-x)."""
    reduction = _legacy_reduction(size_average, reduce, reduction)
    if tuple(target.shape) != tuple(input.shape):
        raise ValueError(f"binary_cross_entropy_with_logits(): target size ({list(target.shape)}) must be the same as "
                         f"input size ({list(input.shape)})")
    log_weight = 1.0 if pos_weight is None else (pos_weight - 1.0) * target + 1.0
    loss = (1.0 - target) * input + log_weight * softplus(-input)
    return _reduce(loss if weight is None else loss * weight, reduction, "binary_cross_entropy_with_logits")
